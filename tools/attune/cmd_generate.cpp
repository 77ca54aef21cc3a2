// attune generate: runs a language model once on one prompt (greedy by default) and prints
// the text.
#include <cstdio>
#include <iostream>
#include <fstream>
#include <iterator>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/llm/generate_check.h"
#include "common.h"

namespace attune::cli {

namespace {
// --prompt TEXT, or --prompt-file F ("-" = stdin).
std::string prompt_text(const std::string& prompt, const std::string& file, bool have_prompt) {
  if (have_prompt && !file.empty()) throw UsageError("give --prompt or --prompt-file, not both");
  if (have_prompt) return prompt;
  if (file.empty()) throw UsageError("--prompt TEXT or --prompt-file FILE is required");
  if (file == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  return read_file(file);
}
}  // namespace

void add_generate(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("generate", "run a language model once on a prompt (greedy unless told otherwise)");
  auto d = std::make_shared<DataOptions>();
  auto r = std::make_shared<RunOptions>();
  auto spec = std::make_shared<std::string>();
  auto prompt = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto g = std::make_shared<llm::GenerateOptions>();
  cmd->add_option("--llm", *spec, "reference | local:MODEL_DIR | openai:BASE_URL#MODEL")->required();
  auto* p = cmd->add_option("--prompt", *prompt, "the prompt text (may be empty: a causal LM starts from BOS)");
  cmd->add_option("--prompt-file", *file, "read the prompt from a file (- = stdin)");
  cmd->add_option("--max-new-tokens", g->max_new_tokens, "generation budget (a local: causal model: below its context length)")->capture_default_str();
  auto* beams = cmd->add_option("--beams", g->beams, "beam search with this many beams (1 = greedy; at most 64)")->capture_default_str();
  auto* temp = cmd->add_option("--temperature", g->temperature, "> 0 samples with this temperature (seeded by --seed)")->capture_default_str();
  cmd->add_option("--top-p", g->top_p, "nucleus mass kept when sampling")->capture_default_str();
  cmd->add_option("--no-repeat-ngram", g->no_repeat_ngram,
                  kNoRepeatNgramHelp)
      ->capture_default_str();
  cmd->add_option("--decode", g->decode,
                  "free, or copy: the answer is a span of the prompt (greedy; local: models only)")
      ->capture_default_str();
  beams->excludes(temp);
  d->add(*cmd, false, false);
  r->add(*cmd);
  cmd->callback([=, &rc] {
    const std::string text = prompt_text(*prompt, *file, p->count() > 0);
    llm::validate_generate_options(*g);  // before the model loads; a local model adds its context
    std::unique_ptr<tasks::Task> task;
    if (!d->task.empty()) task = load_task(*d);
    auto model = engine::make_llm(*spec, *d, task.get(), r->models());
    g->seed = r->seed;
    std::vector<llm::Prompt> ps = {{text}};
    auto out = model->generate(ps, *g);
    std::printf("%s\n", out.at(0).text.c_str());
    print_llm_counters(*model, r->quiet);
    rc = 0;
  });
}

void add_score(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("score", "log-probability (natural log) of a target continuing a prompt");
  auto d = std::make_shared<DataOptions>();
  auto r = std::make_shared<RunOptions>();
  auto spec = std::make_shared<std::string>();
  auto prompt = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto target = std::make_shared<std::string>();
  cmd->add_option("--llm", *spec, "reference | local:MODEL_DIR | openai:BASE_URL#MODEL")->required();
  auto* p = cmd->add_option("--prompt", *prompt, "the prompt text");
  cmd->add_option("--prompt-file", *file, "read the prompt from a file (- = stdin)");
  cmd->add_option("--target", *target, "the continuation to score")->required();
  d->add(*cmd, false, false);
  r->add(*cmd);
  cmd->callback([=, &rc] {
    const std::string text = prompt_text(*prompt, *file, p->count() > 0);
    std::unique_ptr<tasks::Task> task;
    if (!d->task.empty()) task = load_task(*d);
    auto model = engine::make_llm(*spec, *d, task.get(), r->models());
    std::vector<llm::ScoreRequest> reqs = {{text, *target}};
    auto s = model->score(reqs);
    std::printf("%.6f\n", s.at(0));
    print_llm_counters(*model, r->quiet);
    rc = 0;
  });
}

}  // namespace attune::cli
