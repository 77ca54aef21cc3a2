// attune train-lm: a Llama-architecture language model trained from scratch on JSONL or
// text files (train/lm.h), written as a Hugging Face folder that `local:DIR` loads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/progress.h"
#include "attune/core/rng.h"
#include "attune/core/strings.h"
#include "attune/data/dataset.h"
#include "attune/tasks/task.h"
#include "attune/text/subword.h"
#include "attune/train/lm.h"
#include "attune/train/reader.h"
#include "cmd_neural.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {

// --stage reader without --max-texts: examples per task (a seeded sample). qa needs more:
// copying a package name out of the prompt is learnt slowly (docs/RESULTS.md).
constexpr std::size_t kReaderExamplesPerTask = 5000;
constexpr std::size_t kReaderQaExamples = 7500;
// commit_pick's prompts are short (0.78M tokens for 5,000): 2,500 keep the default run within
// its budget on 2 cores.
constexpr std::size_t kReaderPickExamples = 2500;

std::size_t parse_count(const std::string& v, const std::string& option) {
  std::size_t n = 0, used = 0;
  try {
    n = std::stoul(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || v[0] == '-' || v[0] == '+')
    throw UsageError(option + ": \"" + v + "\" is not a whole number >= 0");
  return n;
}

// The reader's examples per task from --max-texts: N (every task) or TASK=N,... (the tasks
// named; the others keep their defaults). 0 = all.
std::map<std::string, std::size_t> reader_limits(const std::string& spec, const std::vector<std::string>& tasks) {
  std::map<std::string, std::size_t> out;
  for (const auto& t : tasks)
    out[t] = t == "qa" ? kReaderQaExamples : t == "commit_pick" ? kReaderPickExamples : kReaderExamplesPerTask;
  if (spec.empty()) return out;
  if (spec.find('=') == std::string::npos) {
    const auto n = parse_count(spec, "--max-texts");
    for (auto& [t, v] : out) v = n;
    return out;
  }
  for (const auto& part : split_commas(spec)) {
    const auto eq = part.find('=');
    if (eq == std::string::npos) throw UsageError("--max-texts " + spec + ": expected N or TASK=N,... (e.g. qa=20000)");
    const auto t = part.substr(0, eq);
    if (!out.count(t)) throw UsageError("--max-texts " + spec + ": \"" + t + "\" is not one of --tasks");
    out[t] = parse_count(part.substr(eq + 1), "--max-texts " + t);
  }
  return out;
}

// --reader-modes: MODE,MODE,... for every task (each keeps the modes it has), and/or TASK=MODE/MODE/... for one task,
// which then draws from those alone. Returns each task's list (empty: its defaults), every task checked to keep at
// least one mode before any work.
std::map<std::string, std::vector<std::string>> reader_mode_lists(const std::string& spec, const std::vector<std::string>& tasks) {
  static const std::vector<std::string> kAllModes = train::reader_mode_names();
  const auto mode = [&](const std::string& m) {
    if (std::find(kAllModes.begin(), kAllModes.end(), m) == kAllModes.end())
      throw UsageError("--reader-modes " + spec + ": \"" + m + "\" is not a document mode (" + join(kAllModes, ", ") + ")");
    return m;
  };
  std::vector<std::string> common;
  std::map<std::string, std::vector<std::string>> own;
  for (const auto& part : split_commas(spec)) {
    const auto eq = part.find('=');
    if (eq == std::string::npos) {
      common.push_back(mode(part));
      continue;
    }
    const auto t = part.substr(0, eq);
    if (std::find(tasks.begin(), tasks.end(), t) == tasks.end())
      throw UsageError("--reader-modes " + spec + ": \"" + t + "\" is not one of --tasks");
    if (own.count(t)) throw UsageError("--reader-modes " + spec + ": " + t + " is given twice");
    std::vector<std::string> list;
    std::size_t at = eq + 1;
    while (true) {
      const auto slash = part.find('/', at);
      list.push_back(mode(part.substr(at, slash == std::string::npos ? std::string::npos : slash - at)));
      if (slash == std::string::npos) break;
      at = slash + 1;
    }
    own[t] = std::move(list);
  }
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& t : tasks) {
    out[t] = own.count(t) ? own[t] : common;
    // Each task keeps the modes it has; one left with none is refused here, before any work, and so is a mode named
    // for one task that it does not have.
    std::vector<std::string> kept;
    try {
      kept = train::reader_modes(t, out[t]);
    } catch (const UsageError& e) {
      throw UsageError("--reader-modes " + spec + ": " + e.what());
    }
    if (own.count(t))
      for (const auto& m : own[t])
        if (std::find(kept.begin(), kept.end(), m) == kept.end())
          throw UsageError("--reader-modes " + spec + ": " + m + " is not a document mode of " + t);
  }
  return out;
}

void add_train_lm(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("train-lm",
                                 "pretrain a small Llama-architecture language model from scratch on JSONL or text files "
                                 "(next-token loss on packed sequences); writes a Hugging Face folder for local:DIR");
  auto o = std::make_shared<train::LmOptions>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto fields = std::make_shared<std::string>("subject,text,title,description,question,answer");
  auto out = std::make_shared<std::string>();
  auto tokenizer = std::make_shared<std::string>();
  auto max_texts = std::make_shared<std::string>();
  auto sample_texts = std::make_shared<std::string>();
  auto group_by = std::make_shared<std::string>();
  auto stage = std::make_shared<std::string>("pretrain");
  auto init = std::make_shared<std::string>();
  auto reader_k = std::make_shared<std::string>("1,2,3,4,5");
  auto prompt_max = std::make_shared<std::size_t>(256);
  auto reader_modes = std::make_shared<std::string>();
  auto reader_tasks = std::make_shared<std::string>("commit_subject,commit_area,commit_pick");
  auto claims = std::make_shared<std::string>();
  auto corpus = std::make_shared<std::string>();
  cmd->add_option("--input", *inputs, "a training file (repeatable): .jsonl/.ndjson (its --fields are texts) or one text a line")
      ->required();
  cmd->add_option("--fields", *fields, "JSONL: the string fields that are texts")->capture_default_str();
  auto join_fields = std::make_shared<bool>(false);
  cmd->add_flag("--join-fields", *join_fields,
                "pretrain, JSONL: a line's --fields are one text, joined by a space in --fields order (e.g. --fields "
                "text,title: a passage followed by its name), not a text each");
  cmd->add_option("--stage", *stage,
                  "pretrain = next-token pretraining on texts from scratch; reader = fine-tune --init as a retrieval-augmented "
                  "reader on commit histories (--input: JSONL commits with repo, author, date, subject, text) and, with --tasks qa, "
                  "Debian claims (--claims, --corpus)")
      ->check(CLI::IsMember({"pretrain", "reader"}))
      ->capture_default_str();
  cmd->add_option("--tokenizer", *tokenizer, "pretrain: the tokenizer folder (attune train-tokenizer), with BOS and EOS tokens");
  cmd->add_option("--init", *init, "reader: the language-model folder to fine-tune (its architecture and tokenizer are kept)");
  cmd->add_option("--reader-k", *reader_k, "reader: documents per prompt to draw from (with none, BM25, random and recency)")
      ->capture_default_str();
  cmd->add_option("--reader-modes", *reader_modes,
                  "reader: the document modes to draw from, equally likely: none, bm25, bm25-shuffled, random, recency "
                  "and bm25+best (commits: BM25's top k with the earlier commit closest to the answer put in), bm25+gold "
                  "(qa); default: all six of the commit tasks', and bm25,bm25+gold for qa. MODE,... for every task (each "
                  "keeps those it has), TASK=MODE/MODE/... for one (e.g. commit_subject=none/bm25/random/bm25+best)");
  cmd->add_option("--prompt-max-length", *prompt_max, "reader: the prompt budget in the model's tokenizer (eval's --max-length)")
      ->capture_default_str();
  cmd->add_option("--length-window", o->length_window,
                  "reader: 0 = batches straight from each epoch's seeded order; N = each run of N batches of it sorted by "
                  "length and batched again, those batches in a seeded order (less padding; train-lm prints the share)")
      ->capture_default_str();
  cmd->add_option("--head-weight", o->head_weight,
                  "reader: each token of an answer's head counts N times in the training loss (commit_subject's head: "
                  "its area through the ':', e.g. \"refs:\"; other answers have none); dev loss stays unweighted; 1 = off")
      ->capture_default_str();
  cmd->add_option("--repeat-share", o->repeat_share,
                  "pretrain: this share of the training texts (a seeded draw each) is put in twice in a row, so that the "
                  "model learns to copy from its context (induction heads); dev texts never are; 0 = off")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--answer-prefix", o->answer_prefix,
                  "reader: what each target starts with before the answer: a newline, then at most 8 characters (e.g. "
                  "'\\n\"' for an answer that opens with a quote, as the commit tasks' documents' titles and labels do; "
                  "give it with $'\\n\"' in bash); recorded in attune_reader.json, and a generation loses it after "
                  "its newline")
      ->capture_default_str();
  auto* tasks_opt = cmd->add_option("--tasks", *reader_tasks,
                                    "reader: the tasks whose prompts the examples take: commit_subject, commit_area and "
                                    "commit_pick (from the commits of --input; by default a commit task the commits give "
                                    "no example of is left out with a note, a named one is refused), qa (from --claims and "
                                    "--corpus)")
                        ->capture_default_str();
  cmd->add_option("--claims", *claims,
                  "reader, qa: a Debian factcheck JSONL file; its SUPPORTS claims become qa examples (package from synopsis)");
  cmd->add_option("--corpus", *corpus, "reader, qa: the passage corpus JSONL the qa examples retrieve from");
  cmd->add_option("--out", *out, "the model folder to write")->required();
  cmd->add_option("--max-texts", *max_texts,
                                        "pretrain: N = read at most N texts in all (default 0 = all), in the order of --input; N1,N2,... = one count "
                                        "per --input, each a seeded sample of that file's texts (0 = all of it); "
                                        "reader: at most this many examples per task, a seeded sample, N for every task "
                                        "or TASK=N,... (default " + std::to_string(kReaderExamplesPerTask) +
                                            " a commit task, " + std::to_string(kReaderQaExamples) + " qa; 0 = all)");
  cmd->add_option("--sample-texts", *sample_texts,
                  "pretrain: N1[,N2,...] = one count per --input, each a seeded sample of that file's texts (0 = all of it); "
                  "unlike --max-texts N, one input is sampled too, not cut to its first N");
  cmd->add_option("--group-by", *group_by,
                  "pretrain, JSONL: lines with the same value of this string field (e.g. author) are packed one after "
                  "another, each group as a chain of BM25 nearest neighbours (each next line the remaining one most like the "
                  "current), so a training sequence holds related texts the way a reader's prompt holds a user's retrieved "
                  "ones (in-context pretraining); a line without the field stays a group of its own; default: file order");
  cmd->add_option("--hidden", o->hidden, "hidden size")->capture_default_str();
  cmd->add_option("--layers", o->layers, "decoder layers")->capture_default_str();
  cmd->add_option("--heads", o->heads, "attention heads (must divide --hidden)")->capture_default_str();
  cmd->add_option("--kv-heads", o->kv_heads, "key/value heads (grouped-query attention; must divide --heads)")->capture_default_str();
  cmd->add_option("--intermediate", o->intermediate, "SwiGLU feed-forward size")->capture_default_str();
  cmd->add_option("--max-positions", o->max_positions, "the model's context (max_position_embeddings)")->capture_default_str();
  cmd->add_option("--seq-len", o->seq_len, "tokens per training sequence (at most --max-positions)")->capture_default_str();
  cmd->add_option("--epochs", o->fit.epochs, "passes over the packed sequences")->capture_default_str();
  cmd->add_option("--batch-size", o->fit.batch_size, "sequences per optimiser step")->capture_default_str();
  cmd->add_option("--micro-batch", o->fit.micro_batch, "sequences per forward/backward")->capture_default_str();
  cmd->add_option("--lr", o->fit.lr, "AdamW peak learning rate (warmup, then linear decay)")->capture_default_str();
  cmd->add_option("--warmup", o->fit.warmup, "warmup, as a fraction of all steps")->capture_default_str();
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW weight decay on matrices")->capture_default_str();
  cmd->add_option("--dev-fraction", o->dev_fraction, "share of texts held out for dev loss (by a hash of the text)")
      ->capture_default_str();
  cmd->add_option("--seed", o->fit.seed, "seed for the initialisation and the order of sequences")->capture_default_str();
  cmd->add_option_function<std::string>(
         "--device", [o](const std::string& v) { o->fit.device = Device::parse(v); }, "cpu, cuda, cuda:N or auto")
      ->default_str("cpu");
  cmd->add_option("--precision", o->precision,
                  "auto (bf16 autocast on CUDA, float32 on CPU), fp32, or bf16 (CUDA, or a CPU with avx512_bf16/amx_bf16); weights stay float32")
      ->capture_default_str();
  cmd->add_option("--checkpoint-every", o->fit.checkpoint_every, "steps between checkpoints in OUT/checkpoint (0 = epoch ends)")
      ->capture_default_str();
  cmd->add_flag("--resume", o->fit.resume, "continue the run in --out from its last checkpoint (same options and inputs)");
  cmd->add_option("--log-every", o->fit.log_every, "steps between progress lines")->capture_default_str();
  cmd->add_flag("--quiet", o->fit.quiet, "no progress on stderr");
  cmd->callback([=, &rc] {
    auto opts = *o;
    opts.fit.out = *out;
    for (const auto& in : *inputs)
      if (!fs::is_regular_file(in)) throw UsageError("--input " + in + ": no such file");
    if (*stage == "reader") {
      if (*join_fields) throw UsageError("--join-fields applies to --stage pretrain (the reader's examples are prompts, not texts)");
      if (o->repeat_share != 0)
        throw UsageError("--repeat-share applies to --stage pretrain (the reader's examples are prompts and their answers)");
      if (!sample_texts->empty())
        throw UsageError("--sample-texts applies to --stage pretrain (the reader's --max-texts is already a seeded sample per task)");
      if (init->empty()) throw UsageError("--stage reader needs --init LM_DIR: the language model to fine-tune (attune train-lm)");
      if (!tokenizer->empty()) throw UsageError("--stage reader takes the tokenizer of --init; leave out --tokenizer");
      std::vector<std::string> task_names;
      for (const auto& t : split_commas(*reader_tasks)) {
        if (t != "commit_subject" && t != "commit_area" && t != "commit_pick" && t != "qa")
          throw UsageError("--tasks " + *reader_tasks + ": \"" + t +
                           "\" is not a reader task (commit_subject, commit_area, commit_pick, qa)");
        if (std::find(task_names.begin(), task_names.end(), t) == task_names.end()) task_names.push_back(t);
      }
      if (task_names.empty()) throw UsageError("--tasks: name at least one of commit_subject, commit_area, commit_pick, qa");
      const bool want_qa = std::find(task_names.begin(), task_names.end(), "qa") != task_names.end();
      if (want_qa && (claims->empty() || corpus->empty()))
        throw UsageError("--tasks qa needs --claims FILE (Debian factcheck JSONL) and --corpus FILE (the passages)");
      if (!want_qa && (!claims->empty() || !corpus->empty()))
        throw UsageError("--claims and --corpus build qa examples: add qa to --tasks");
      for (const auto* f : {claims.get(), corpus.get()})
        if (!f->empty() && !fs::is_regular_file(*f)) throw UsageError(*f + ": no such file");
      train::ReaderDataOptions ro;
      ro.prompt_max_length = *prompt_max;
      ro.answer_prefix = opts.answer_prefix;
      // The reader's default samples keep the default run within its budget on 2 cores
      // (docs/RESULTS.md), and 5,000 beat 3,000 on dev for both commit tasks.
      const auto limits = reader_limits(*max_texts, task_names);
      ro.ks = positive_counts("--reader-k", *reader_k);
      const auto task_modes = reader_mode_lists(*reader_modes, task_names);
      if (!fs::is_directory(*init)) throw UsageError("--init " + *init + ": no such folder");
      opts.init = *init;
      opts.tokenizer = *init;
      opts.validate();
      train::prepare_lm_out(opts);
      ro.seed = opts.fit.seed;
      std::vector<train::Commit> commits;
      for (const auto& in : *inputs) {
        std::ifstream f(in);
        std::string line;
        std::size_t lineno = 0;
        while (std::getline(f, line)) {
          ++lineno;
          if (line.empty()) continue;
          const auto j = nlohmann::json::parse(line, nullptr, false);
          const auto field = [&](const char* k) {
            if (!j.is_object() || !j.contains(k) || !j[k].is_string())
              throw InputError(in, "line " + std::to_string(lineno), k, "a commit needs string fields repo, author, date, subject and text");
            return j[k].get<std::string>();
          };
          commits.push_back({field("id"), field("repo"), field("author"), field("date"), field("subject"), field("text")});
        }
      }
      const auto tok = text::SubwordTokenizer::load(opts.init);
      std::vector<train::ReaderExample> examples;
      std::string counts;
      for (const auto& name : task_names) {
        auto task = tasks::make_task(name);
        ro.limit = limits.at(name);
        ro.modes = task_modes.at(name);
        std::vector<train::ReaderExample> ex;
        if (name == "qa") {
          const auto claim_set = data::read_qa_jsonl(*claims, "factcheck", "train");
          const auto passages = data::read_corpus_jsonl(*corpus);
          ex = train::claim_qa_reader_examples(claim_set.examples, passages, *task, *tok, ro);
        } else {
          ex = train::commit_reader_examples(commits, *task, *tok, ro);
        }
        if (ex.empty() && !tasks_opt->count() && name != "qa") {
          // The default task list on histories that cannot give a task (commit_pick needs a
          // second author in a repository; commit_area subjects with areas): said, not refused.
          if (!opts.fit.quiet)
            std::fprintf(stderr, "train-lm: no %s example in the commits of --input (left out of the default --tasks)\n",
                         name.c_str());
          continue;
        }
        if (ex.empty()) throw UsageError("--tasks " + name + ": the inputs give no example of it");
        // With the modes each task drew from, so the folder says how its examples were made.
        std::string drawn;
        for (const auto& m : train::reader_modes(name, ro.modes)) drawn += (drawn.empty() ? "" : "/") + m;
        counts += (counts.empty() ? "" : ", ") + name + " " + std::to_string(ex.size()) + " of " + drawn;
        examples.insert(examples.end(), std::make_move_iterator(ex.begin()), std::make_move_iterator(ex.end()));
      }
      if (examples.empty()) throw UsageError("--tasks " + *reader_tasks + ": the inputs give no example of any of them");
      opts.fit.data_description = "reader examples (" + counts + ") from " + std::to_string(commits.size()) + " commits" +
                                  (want_qa ? " and the SUPPORTS claims of " + *claims + " over " + *corpus : "");
      if (!opts.fit.quiet) std::fprintf(stderr, "train-lm: %s\n", opts.fit.data_description.c_str());
      const auto res = train::train_reader(examples, opts);
      if (res.steps_done == res.total_steps)
        std::printf("fine-tuned a reader on %zu examples (%zu steps, %.1fs, %.0f tokens/s, %s %s): kept epoch %zu, dev answer loss "
                    "%.4f (start %.4f) -> %s\n",
                    res.train_sequences, res.steps_done, res.seconds, res.tokens_per_second, res.device.c_str(), res.precision.c_str(),
                    res.best_epoch, res.dev_loss, res.init_dev_loss, out->c_str());
      rc = 0;
      return;
    }
    if (!init->empty()) throw UsageError("--init applies to --stage reader (pretraining starts from random weights)");
    if (opts.length_window)
      throw UsageError("--length-window applies to --stage reader (pretraining's packed sequences are all one length)");
    if (opts.head_weight != 1) throw UsageError("--head-weight applies to --stage reader (pretraining's texts have no answer)");
    if (opts.answer_prefix != "\n") throw UsageError("--answer-prefix applies to --stage reader (pretraining's texts have no answer)");
    if (tokenizer->empty()) throw UsageError("--stage pretrain needs --tokenizer DIR (attune train-tokenizer)");
    opts.tokenizer = *tokenizer;
    if (!fs::is_directory(opts.tokenizer)) throw UsageError("--tokenizer " + *tokenizer + ": no such folder");
    opts.validate();
    // --max-texts: one total (the first N texts), or one count per input (a seeded sample of each),
    // checked before anything is written.
    // --sample-texts: one count per input, a seeded sample of each, also for one input.
    if (!sample_texts->empty() && !max_texts->empty())
      throw UsageError("--sample-texts and --max-texts: give one of them (--sample-texts samples each --input, "
                       "--max-texts N takes the first N texts)");
    const bool sampled = !sample_texts->empty();
    const std::string& count_spec = sampled ? *sample_texts : *max_texts;
    const std::string count_opt = sampled ? "--sample-texts" : "--max-texts";
    const auto counts = split_commas(count_spec);
    const bool per_input = counts.size() > 1 || sampled;
    if (per_input && counts.size() != inputs->size())
      throw UsageError(count_opt + " " + count_spec + ": " + std::to_string(counts.size()) + " counts for " +
                       std::to_string(inputs->size()) + " --input files (give one count per --input" +
                       (sampled ? ")" : ", or one in all)"));
    std::vector<std::size_t> want(inputs->size(), 0);
    for (std::size_t f = 0; per_input && f < counts.size(); ++f)
      want[f] = parse_count(counts[f], count_opt + " (input " + std::to_string(f + 1) + ")");
    const std::size_t total = !per_input && !counts.empty() ? parse_count(*max_texts, "--max-texts") : 0;
    if (!group_by->empty()) {
      if (total != 0 || std::any_of(want.begin(), want.end(), [](std::size_t n) { return n != 0; }))
        throw UsageError("--group-by and " + count_opt + ": give one of them (--group-by orders whole files; sample a file "
                         "before training on it)");
      for (const auto& in : *inputs)
        if (!is_jsonl_file(in)) throw UsageError("--group-by " + *group_by + ": " + in + " is not JSONL (.jsonl/.ndjson): its lines have no fields");
    }
    train::prepare_lm_out(opts);  // a bad --out or --resume fails before the texts are read
    std::vector<std::string> texts;
    std::size_t added = 0;
    std::string described;
    if (!group_by->empty()) {
      // Every line's texts; its group is (input, value of the field), or the line alone.
      std::vector<std::string> keys, joined;
      std::vector<std::vector<std::string>> record_texts;
      std::size_t keyed_inputs = 0;
      std::vector<std::string> unkeyed;  // inputs no line of which has the field
      for (std::size_t f = 0; f < inputs->size(); ++f) {
        const auto& in = (*inputs)[f];
        std::size_t keyed = 0, records = 0, n_texts = 0;
        for_each_text_record(in, split_commas(*fields), *join_fields, *group_by, [&](const TextRecord& r) {
          const auto here = std::to_string(f) + '\x1f';
          keys.push_back(r.key ? here + *r.key : here + '\x1e' + std::to_string(records));
          keyed += r.key.has_value();
          ++records;
          n_texts += r.texts.size();
          std::string all;
          for (const auto& t : r.texts) all += (all.empty() ? "" : " ") + t;
          joined.push_back(std::move(all));
          record_texts.push_back(r.texts);
          return true;
        });
        if (records == 0) throw InputError(in, "", "", "no text in it (JSONL: no line has a non-empty string among --fields " + *fields + ")");
        if (keyed == 0) unkeyed.push_back(in);
        keyed_inputs += keyed > 0;
        described += (described.empty() ? "" : " + ") + in + " (" + std::to_string(n_texts) + " texts" +
                     (*join_fields ? ", fields joined" : "") + (keyed ? ", grouped by " + *group_by : "") + ")";
      }
      if (keyed_inputs == 0)
        throw UsageError("--group-by " + *group_by + ": no line of the inputs has a string field \"" + *group_by +
                         "\" (check the name; e.g. author for commits)");
      for (const auto& in : unkeyed)
        std::fprintf(stderr, "train-lm: %s: no line has a string \"%s\": its texts stay in file order\n", in.c_str(), group_by->c_str());
      if (!opts.fit.quiet) std::fprintf(stderr, "train-lm: ordering %zu lines by --group-by %s ...\n", keys.size(), group_by->c_str());
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto i : train::related_order(keys, joined))
        for (auto& t : record_texts[i]) texts.push_back(std::move(t));
      if (!opts.fit.quiet)
        std::fprintf(stderr, "train-lm: ordered in %.1fs\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    for (std::size_t f = 0; group_by->empty() && f < inputs->size(); ++f) {
      const auto& in = (*inputs)[f];
      const std::size_t before = added;
      std::vector<std::string> these;
      read_text_source(in, split_commas(*fields), per_input ? 0 : total, [&](std::string_view t) { these.emplace_back(t); },
                       added, *join_fields);
      if (added == before) throw InputError(in, "", "", "no text in it (JSONL: no line has a non-empty string among --fields " + *fields + ")");
      std::string kept = std::to_string(these.size()) + " texts";
      if (want[f] != 0 && want[f] < these.size()) {
        Rng rng(derive_seed(opts.fit.seed, "pretrain-sample-" + std::to_string(f)));
        keep_sample(these, want[f], rng);
        kept = std::to_string(want[f]) + " of " + kept + ", a seeded sample";
      }
      for (auto& t : these) texts.push_back(std::move(t));
      described += (described.empty() ? "" : " + ") + in + " (" + kept + (*join_fields ? ", fields joined" : "") + ")";
    }
    opts.fit.data_description = described;
    if (!opts.fit.quiet) std::fprintf(stderr, "train-lm: %s\n", described.c_str());
    const auto res = train::train_lm(texts, opts);
    if (res.steps_done == res.total_steps)
      std::printf("trained a %zu-parameter language model on %zu tokens (%zu steps, %.1fs, %.0f tokens/s, %s %s): kept epoch "
                  "%zu, dev loss %.4f (start %.4f) -> %s\n",
                  res.parameters, res.train_tokens, res.steps_done, res.seconds, res.tokens_per_second, res.device.c_str(),
                  res.precision.c_str(), res.best_epoch,
                  res.dev_loss, res.init_dev_loss, out->c_str());
    rc = 0;
  });
}

}  // namespace attune::cli
