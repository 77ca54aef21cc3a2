#include "attune/engine/models.h"

#include <filesystem>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/llm/openai.h"
#include "attune/feedback/judge.h"
#include "attune/feedback/user_feedback.h"
#include "attune/llm/planted.h"
#include "attune/llm/reference.h"
#include "attune/models/local_lm.h"

namespace attune::engine {

namespace fs = std::filesystem;

std::unique_ptr<llm::LanguageModel> make_llm(const std::string& spec, const DataSpec& d, const tasks::Task* task,
                                             const ModelOptions& opts) {
  if (spec == "reference") {
    auto background = train_outputs(d);
    if (background.empty())
      throw FieldError<Error>("background",
                              "the reference reader fits its background on the task's training outputs, and " +
                                  (d.data.empty() ? std::string("neither a dataset directory nor a background outputs file was given")
                                                  : "none were found in " + d.data + " for task " + d.task +
                                                        " (name a background outputs file)"));
    return std::make_unique<llm::ReferenceReader>(background, task ? task->labels() : std::vector<std::string>{});
  }
  if (starts_with(spec, "local:")) {
    const std::string dir = spec.substr(6);
    if (dir.empty()) throw UsageError("language model \"" + spec + "\": expected local:MODEL_DIR");
    if (!fs::is_directory(dir)) throw UsageError("language model \"" + spec + "\": no such folder \"" + dir + "\"");
    models::LocalOptions o;
    o.device = opts.device;
    o.dtype = opts.dtype;
    return models::LocalModel::load(dir, o);
  }
  if (starts_with(spec, "openai:")) return llm::make_openai_model(spec);  // key from ATTUNE_API_KEY
  if (starts_with(spec, "planted:curator"))
    return std::make_unique<feedback::PlantedCurator>(feedback::parse_planted_curator_spec(spec));
  if (starts_with(spec, "planted:judge"))
    return std::make_unique<feedback::PlantedJudge>(feedback::parse_planted_judge_spec(spec));
  if (starts_with(spec, "planted:")) return std::make_unique<llm::PlantedReader>(llm::parse_planted_spec(spec));
  throw UsageError("unknown language model \"" + spec +
                   "\" (expected reference, local:MODEL_DIR, openai:BASE_URL#MODEL or planted:first|marker|gate|judge|curator)");
}

std::unique_ptr<text::Tokenizer> budget_tokenizer(const std::string& tokenizer, const std::string& llm_spec) {
  if (!tokenizer.empty()) return text::make_tokenizer(tokenizer);
  if (starts_with(llm_spec, "local:") && fs::is_directory(llm_spec.substr(6))) return text::make_tokenizer("hf:" + llm_spec.substr(6));
  return text::make_tokenizer("whitespace");
}

}  // namespace attune::engine
