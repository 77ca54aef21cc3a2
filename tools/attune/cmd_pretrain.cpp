// attune pretrain-encoder: Contriever-style contrastive pretraining of a small BERT encoder
// from scratch on datasets' text (a corpus, or the training split's profile documents);
// --add-source mixes more datasets in, --add-texts plain text files (JSONL or a text a line).
#include <cstdio>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/core/hash.h"
#include "attune/data/dataset.h"
#include "attune/train/pretrain.h"
#include "cmd_neural.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {
namespace {

// The texts to pretrain on: the corpus passages of a corpus task, else the distinct
// profile documents of the task's train split; at most `limit` (0 = all), in file order.
std::vector<std::string> pretraining_texts(const DataOptions& d, std::size_t limit, std::string& described) {
  auto task = load_task(d);
  std::vector<std::string> texts;
  if (task->uses_corpus()) {
    if (d.data.empty()) throw UsageError("task " + task->name() + " reads a corpus: name its directory with --data");
    const fs::path corpus = data::find_corpus(d.data);
    for (const auto& doc : data::read_corpus_jsonl(corpus)) {
      if (limit && texts.size() >= limit) break;
      texts.push_back(task->document_text(doc));
    }
    described = corpus.string() + " (" + std::to_string(texts.size()) + " passages)";
    return texts;
  }
  DataOptions train = d;
  train.split = "train";
  auto ds = load_dataset(train);
  std::unordered_set<std::uint64_t> seen;
  for (const auto& ex : ds.examples)
    for (const auto& doc : ex.profile) {
      if (limit && texts.size() >= limit) break;
      auto t = task->document_text(doc);
      if (seen.insert(hash64(t)).second) texts.push_back(std::move(t));
    }
  described = d.data + " " + d.task + " train profiles (" + std::to_string(texts.size()) + " documents)";
  return texts;
}

}  // namespace

void add_pretrain_encoder(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("pretrain-encoder",
                                 "Contriever-style contrastive pretraining of a small BERT encoder from scratch "
                                 "(two random crops of a text are positives, the batch's other crops negatives)");
  auto d = std::make_shared<DataOptions>();
  auto o = std::make_shared<train::PretrainOptions>();
  auto limit = std::make_shared<std::size_t>(0);
  auto more = std::make_shared<std::vector<std::string>>();
  auto text_files = std::make_shared<std::vector<std::string>>();
  auto text_fields = std::make_shared<std::string>("title,subject,text");
  auto out = std::make_shared<std::string>();
  auto tokenizer = std::make_shared<std::string>();
  auto no_normalize = std::make_shared<bool>(false);
  auto warmup = std::make_shared<std::size_t>(0);
  cmd->add_option("--data", d->data, "a corpus directory (DIR/*_corpus.jsonl) or a LaMP-layout dataset directory")->required();
  cmd->add_option("--task", d->task, "task whose text to read: a corpus task (qa, ...) reads the corpus, others the train profiles")
      ->required();
  cmd->add_option("--limit", *limit, "at most this many texts from each source (0 = all)")->capture_default_str();
  cmd->add_option("--add-source", *more,
                  "DIR:TASK: also pretrain on this dataset's text (repeatable; e.g. ../shared/data/debian:qa mixes the "
                  "Debian corpus into git profiles)");
  cmd->add_option("--add-texts", *text_files,
                  "FILE: also pretrain on this file's texts (repeatable): .jsonl/.ndjson, one document a line (its "
                  "--text-fields joined, e.g. a commit's subject and description in ../shared/data/text/commits.jsonl), "
                  "or one text a line");
  cmd->add_option("--text-fields", *text_fields, "--add-texts JSONL: the string fields of one document, in order")
      ->capture_default_str();
  cmd->add_option("--out", *out, "output model folder (Hugging Face + sentence-transformers layout)")->required();
  cmd->add_option("--tokenizer", *tokenizer,
                  "tokenizer folder (vocab.txt / tokenizer.json); default ../shared/models/bert-base-uncased-vocab when it exists");
  cmd->add_option("--steps", o->steps, "optimizer steps")->capture_default_str();
  cmd->add_option("--batch-size", o->fit.batch_size, "texts per step (two crops each; in-batch negatives)")->capture_default_str();
  cmd->add_option("--lr", o->fit.lr, "AdamW peak learning rate (linear warmup, then linear decay)")->capture_default_str();
  cmd->add_option("--warmup", *warmup, "warmup steps (0 = 10% of --steps)")->capture_default_str();
  cmd->add_option("--clip", o->fit.clip, "gradient-norm clip (0 = none)")->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "InfoNCE temperature")->capture_default_str();
  cmd->add_option("--hidden", o->hidden, "hidden size")->capture_default_str();
  cmd->add_option("--layers", o->layers, "transformer layers")->capture_default_str();
  cmd->add_option("--heads", o->heads, "attention heads (must divide --hidden)")->capture_default_str();
  cmd->add_option("--intermediate", o->intermediate, "feed-forward size (0 = 4 x hidden)")->capture_default_str();
  cmd->add_option("--max-length", o->max_length, "tokens per crop including [CLS]/[SEP] (= max_position_embeddings)")
      ->capture_default_str();
  cmd->add_option("--ratio-min", o->ratio_min, "shortest crop, as a fraction of the text's tokens")->capture_default_str();
  cmd->add_option("--ratio-max", o->ratio_max, "longest crop, as a fraction of the text's tokens")->capture_default_str();
  cmd->add_flag("--no-normalize", *no_normalize, "raw inner products instead of cosine similarity");
  cmd->add_option("--seed", o->fit.seed, "seed for the initialisation, batches and crops")->capture_default_str();
  cmd->add_option_function<std::string>(
         "--device", [o](const std::string& v) { o->fit.device = Device::parse(v); }, "cpu, cuda, cuda:N or auto")
      ->default_str("cpu");
  cmd->add_option("--checkpoint-every", o->fit.checkpoint_every, "steps between checkpoints in OUT/checkpoint (0 = end only)")
      ->capture_default_str();
  cmd->add_flag("--resume", o->fit.resume, "continue the run in --out from its last checkpoint (same options)");
  cmd->add_option("--log-every", o->fit.log_every, "steps between loss lines on stderr")->capture_default_str();
  cmd->add_flag("--quiet", o->fit.quiet, "no progress on stderr");
  cmd->callback([=, &rc] {
    auto opts = *o;
    opts.fit.out = *out;
    if (*warmup) opts.fit.warmup_steps = *warmup;
    opts.normalize = !*no_normalize;
    if (!tokenizer->empty()) {
      opts.tokenizer = *tokenizer;
    } else {
      const fs::path def = fs::path("..") / "shared" / "models" / "bert-base-uncased-vocab";
      if (!fs::exists(def)) throw UsageError("name a tokenizer folder with --tokenizer DIR (" + def.string() + " does not exist)");
      opts.tokenizer = def;
    }
    if (!fs::exists(opts.tokenizer)) throw UsageError("--tokenizer " + opts.tokenizer.string() + ": no such folder");
    for (const auto& f : *text_files)
      if (!fs::is_regular_file(f)) throw UsageError("--add-texts " + f + ": no such file");
    std::vector<std::string> fields;
    for (auto& f : split_commas(*text_fields))
      if (!f.empty()) fields.push_back(std::move(f));
    if (fields.empty()) throw UsageError("--text-fields: name at least one field");
    opts.validate();                    // option errors, a bad --out or --resume fail before the texts are read
    train::prepare_pretrain_out(opts);
    std::string described;
    auto texts = pretraining_texts(*d, *limit, described);
    // The same text from two sources is one text (no false negatives within a batch).
    std::unordered_set<std::uint64_t> seen;
    for (const auto& t : texts) seen.insert(hash64(t));
    for (const auto& f : *text_files) {
      std::size_t added = 0, kept = 0;
      const std::size_t none = read_text_source(
          f, fields, *limit,
          [&](std::string_view t) {
            std::string text(t);
            if (seen.insert(hash64(text)).second) {
              texts.push_back(std::move(text));
              ++kept;
            }
          },
          added, /*join=*/true);
      if (added == 0)
        throw InputError(f, "", "", "no text in it (JSONL: no line has a non-empty string among --text-fields " + *text_fields + ")");
      described += " + " + f + " (" + std::to_string(kept) + " texts" +
                   (kept < added ? ", " + std::to_string(added - kept) + " repeats left out" : "") +
                   (none ? ", " + std::to_string(none) + " lines without a field" : "") + ")";
    }
    for (const auto& src : *more) {
      const auto colon = src.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == src.size())
        throw UsageError("--add-source " + src + ": expected DIR:TASK (e.g. ../shared/data/debian:qa)");
      DataOptions extra = *d;
      extra.data = src.substr(0, colon);
      extra.task = src.substr(colon + 1);
      std::string what;
      auto add = pretraining_texts(extra, *limit, what);
      for (auto& t : add)
        if (seen.insert(hash64(t)).second) texts.push_back(std::move(t));
      described += " + " + what;
    }
    opts.fit.data_description = described;
    if (!opts.fit.quiet) std::fprintf(stderr, "pretrain: %s\n", described.c_str());
    const auto res = train::pretrain_encoder(texts, opts);
    std::printf("%s: %zu steps on %zu texts, loss %.4f -> %.4f, %.1f s\n", opts.fit.out.c_str(), res.steps_done, res.texts,
                res.first_loss, res.last_loss, res.seconds);
    rc = 0;
  });
}

}  // namespace attune::cli
