// attune train-tokenizer: a byte-level BPE tokenizer trained on JSONL or text files
// (text/bpe_trainer.h), written as a Hugging Face tokenizer folder.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/progress.h"
#include "attune/text/bpe_trainer.h"
#include "attune/text/subword.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {

namespace {

struct TokenizerCli {
  std::vector<std::string> inputs;
  std::string fields = "subject,text,title,description,question,answer";
  std::string out;
  std::size_t vocab_size = 8192;
  std::size_t min_frequency = 2;
  std::string special_tokens = "<s>,</s>,<pad>";
  std::string bos = "<s>", eos = "</s>", pad = "<pad>";
  std::size_t reserved = 0;
  std::size_t model_max_length = 512;
  std::size_t max_texts = 0;
  bool no_bos = false;
  bool quiet = false;
};

}  // namespace

void add_train_tokenizer(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("train-tokenizer",
                                 "train a byte-level BPE tokenizer (GPT-2 pre-tokenizer) on JSONL or text files; writes a "
                                 "Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json)");
  auto c = std::make_shared<TokenizerCli>();
  cmd->add_option("--input", c->inputs,
                  "a training file (repeat for several): .jsonl/.ndjson = one JSON object a line, whose --fields are "
                  "texts; any other file = one text a line")
      ->required();
  cmd->add_option("--fields", c->fields, "JSONL: the string fields that are texts (those a line lacks are skipped)")
      ->capture_default_str();
  cmd->add_option("--out", c->out, "the tokenizer folder to write (new, or without a tokenizer.json)")->required();
  cmd->add_option("--vocab-size", c->vocab_size, "the whole vocabulary: special tokens, 256 byte symbols and the merges")
      ->capture_default_str();
  cmd->add_option("--min-frequency", c->min_frequency, "a pair is merged only when it occurs at least this often")
      ->capture_default_str();
  cmd->add_option("--special-tokens", c->special_tokens, "special tokens, comma-separated; ids 0, 1, ... in this order")
      ->capture_default_str();
  cmd->add_option("--bos", c->bos, "the beginning-of-text token (one of --special-tokens)")->capture_default_str();
  cmd->add_option("--eos", c->eos, "the end-of-text token (one of --special-tokens)")->capture_default_str();
  cmd->add_option("--pad", c->pad, "the padding token (one of --special-tokens; \"\" = none)")->capture_default_str();
  cmd->add_option("--reserved", c->reserved,
                  "special tokens <|reserved_0|>, ... kept free after --special-tokens (agent ids, tools)")
      ->capture_default_str();
  cmd->add_option("--model-max-length", c->model_max_length, "tokenizer_config.json's model_max_length")->capture_default_str();
  cmd->add_option("--max-texts", c->max_texts, "stop reading after this many texts (0 = all), in the order of --input")
      ->capture_default_str();
  cmd->add_flag("--no-bos", c->no_bos, "do not put --bos before every encoded text");
  cmd->add_flag("--quiet", c->quiet, "no progress lines on stderr");
  cmd->callback([c, &rc] {
    text::BpeTrainOptions o;
    o.vocab_size = c->vocab_size;
    o.min_frequency = c->min_frequency;
    o.special_tokens = split_commas(c->special_tokens);
    o.bos = c->bos;
    o.eos = c->eos;
    o.pad = c->pad;
    o.reserved = c->reserved;
    o.model_max_length = c->model_max_length;
    o.add_bos = !c->no_bos;
    try {
      o.validate();
    } catch (const UsageError& e) {
      throw UsageError(std::string("train-tokenizer: ") + e.what());
    }
    const auto fields = split_commas(c->fields);
    for (const auto& in : c->inputs)
      if (!fs::is_regular_file(in)) throw UsageError("--input " + in + ": no such file");
    if (fs::exists(fs::path(c->out) / "tokenizer.json"))
      throw UsageError("--out " + c->out + " already holds a tokenizer.json: name a new folder (nothing was overwritten)");
    const auto t0 = std::chrono::steady_clock::now();
    text::BpeTrainer trainer(o);
    std::size_t added = 0;
    nlohmann::json sources = nlohmann::json::array();
    for (const auto& in : c->inputs) {
      const std::size_t before = added;
      Progress prog("train-tokenizer: reading " + in, fs::file_size(in), !c->quiet);
      std::size_t bytes = 0, shown = 0;
      const std::size_t empty = read_text_source(in, fields, c->max_texts, [&](std::string_view t) {
        trainer.add_text(t);
        bytes += t.size() + 1;
        if (bytes > (1u << 20)) {
          prog.add(bytes);
          shown += bytes;
          bytes = 0;
        }
      }, added);
      if (const auto size = fs::file_size(in); size > shown) prog.add(size - shown);  // field names, JSON syntax
      prog.finish();
      if (added == before)
        throw InputError(in, "", "", "no text in it" + (is_jsonl_file(in) ? " (no line has a non-empty string field among --fields " +
                                                                            c->fields + ")"
                                                                      : std::string()));
      sources.push_back({{"path", in}, {"bytes", fs::file_size(in)}, {"texts", added - before}, {"lines_without_fields", empty}});
    }
    if (!c->quiet)
      std::fprintf(stderr, "train-tokenizer: %zu texts, %zu distinct words\n", trainer.texts(), trainer.distinct_words());
    Progress merges("train-tokenizer: merges", o.vocab_size - o.special_tokens.size() - o.reserved - 256, !c->quiet);
    std::size_t shown = 0;
    const auto model = trainer.train([&](std::size_t done, std::size_t) {
      merges.add(done - shown);
      shown = done;
    });
    merges.finish();
    text::write_bpe_tokenizer(c->out, model, o);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const nlohmann::json record = {
        {"method", "byte-level-bpe"}, {"sources", sources}, {"fields", fields}, {"texts", trainer.texts()},
        {"distinct_words", trainer.distinct_words()}, {"vocab_size", model.vocab.size()}, {"merges", model.merges.size()},
        {"options", {{"vocab_size", o.vocab_size}, {"min_frequency", o.min_frequency}, {"special_tokens", o.special_tokens},
                     {"reserved", o.reserved}, {"bos", o.bos}, {"eos", o.eos}, {"pad", o.pad}, {"add_bos", o.add_bos},
                     {"max_texts", c->max_texts}}},
        {"deterministic", "the same texts give the same tokenizer (no random draws; ties go to the pair of lower ids)"},
        {"seconds", seconds}};
    write_file_atomic(fs::path(c->out) / "attune_tokenizer.json", record.dump(2) + "\n");
    // Read it back as every attune command will.
    const auto tok = text::SubwordTokenizer::load(c->out);
    std::printf("trained a byte-level BPE tokenizer: %zu tokens (%zu merges) from %zu texts in %.1fs -> %s\n",
                tok->vocab_size(), model.merges.size(), trainer.texts(), seconds, c->out.c_str());
    rc = 0;
  });
}

}  // namespace attune::cli
