#pragma once
// Language models and prompt-budget tokenizers from their specs.
#include <memory>
#include <string>

#include "attune/core/device.h"

#include "attune/engine/data_spec.h"
#include "attune/llm/language_model.h"
#include "attune/text/tokenizer.h"

namespace attune::engine {

// Where and how neural models run.
struct ModelOptions {
  Device device;                  // auto: CUDA when present, else the CPU
  std::string dtype = "float32";  // float32 | float16 | bfloat16
};

// SPEC: reference | local:DIR | openai:URL#MODEL. `task` may be null for uses without one
// (generate, score): the reference reader then has no label set. The reference reader
// fits its background on train_outputs(d): FieldError (field "background") when there is
// none. UsageError for an unknown spec or a missing folder.
std::unique_ptr<llm::LanguageModel> make_llm(const std::string& spec, const DataSpec& d, const tasks::Task* task,
                                             const ModelOptions& opts);

// The tokenizer prompt budgets are counted in: `tokenizer` when set (whitespace,
// whitespace-noeos, a model folder or tokenizer.json), else the local: model's own, else
// whitespace.
std::unique_ptr<text::Tokenizer> budget_tokenizer(const std::string& tokenizer, const std::string& llm_spec);

}  // namespace attune::engine
