// attune train: trains a retriever / reranker / selector from language-model feedback.
// Feedback comes from the store's cache when it is there, and is collected first otherwise.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/retriever.h"
#include "attune/train/ropg.h"
#include "cmd_neural.h"
#include "attune/llm/openai.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {

WorkflowSplit load_workflow_split(const DataOptions& d, const tasks::Task& task, store::Store& st, const RunOptions& r,
                                  const std::vector<std::string>& specs, std::size_t limit) {
  WorkflowSplit s{load_dataset(d), {}, limit};
  s.sources = engine::make_sources(d, task, st, r.models(), r.quiet, specs);
  return s;
}

std::unique_ptr<WorkflowSplit> load_dev_split(const DataOptions& d, const TrainArgs& a, const tasks::Task& task,
                                              store::Store& st, const RunOptions& r, const std::vector<std::string>& specs) {
  if (a.dev_split.empty()) return nullptr;
  DataOptions dd = d;
  dd.split = a.dev_split;
  return std::make_unique<WorkflowSplit>(load_workflow_split(dd, task, st, r, specs, a.dev_limit));
}

train::Bench make_bench(const tasks::Task& task, llm::LanguageModel& model, store::Store& st, const text::Tokenizer& tok,
                        const RunOptions& r, const TrainArgs& a) {
  train::Bench b{task, model, st, tok, r.threads, !r.quiet};
  b.generate.max_new_tokens = a.max_new_tokens;
  b.generate.decode = a.decode;
  check_generate_options(model, b.generate);  // e.g. --decode copy with a reader that only decodes freely
  return b;
}

void apply_fit_options(const TrainArgs& a, const RunOptions& r, train::FitOptions& o) {
  o.out = a.out;
  o.epochs = a.epochs.value_or(o.epochs);
  o.batch_size = a.batch_size.value_or(o.batch_size);
  // A method's default micro-batch shrinks to a smaller --batch-size; one that is given must fit.
  o.micro_batch = a.micro_batch.value_or(std::min(o.micro_batch, o.batch_size));
  o.lr = a.lr.value_or(o.lr);
  o.warmup = a.warmup.value_or(o.warmup);
  o.clip = a.clip.value_or(o.clip);
  o.checkpoint_every = a.checkpoint_every.value_or(o.checkpoint_every);
  o.seed = r.seed;
  o.device = r.device;
  o.resume = a.resume;
  o.quiet = r.quiet;
}

void add_train(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("train", "train a retriever, reranker or selector from language-model feedback");
  auto d = std::make_shared<DataOptions>();
  d->split = "train";
  auto r = std::make_shared<RunOptions>();
  auto a = std::make_shared<TrainArgs>();
  auto ro = std::make_shared<train::RopgOptions>();
  d->add(*cmd);
  r->add(*cmd);
  cmd->add_option("--config", "read options from a file: `key = value` lines (long option names, e.g. lr = 1e-5); the command line wins");
  cmd->add_option("--method", a->method, "ropg-rl | ropg-kd | luf | rspg-pre | rspg-post | pearl | purple | ium | ium-online")->required();
  cmd->add_option("--llm", a->llm, "the language model whose feedback is learned: reference, local:DIR, openai:URL#MODEL")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "output model folder (usable as a retriever spec)")->required();
  cmd->add_option("--init", a->init, "ROPG: the encoder to start from (a dense model folder, e.g. from pretrain-encoder)");
  cmd->add_option("--initial", a->initial, "retriever that picks the top-l candidates (and d_b, ROPG-RL's baseline)")
      ->capture_default_str();
  cmd->add_option("--top-l", a->top_l, "candidates per query (000: 16)")->capture_default_str();
  cmd->add_option("--dev-split", a->dev_split, "split used to pick the best epoch (\"\" = none: keep the last)")
      ->capture_default_str();
  cmd->add_option("--limit", a->limit, "only the first N training examples (0 = all)")->capture_default_str();
  cmd->add_option("--dev-limit", a->dev_limit, "only the first N dev examples (0 = all)")->capture_default_str();
  cmd->add_option("--feedback-max-length", a->feedback_max_length, "prompt budget of the feedback prompts (0 = 512)")
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", a->max_new_tokens,
                  "generation length cap of the feedback (doc and retriever kinds) and Pearl's dev outputs: use eval's "
                  "--max-new-tokens, so the trainer learns from the outputs eval scores")
      ->capture_default_str();
  cmd->add_option("--decode", a->decode,
                  "how the feedback (doc and retriever kinds) and Pearl's dev outputs are decoded: free, or copy (each answer a "
                  "span of its prompt; local: models only). Use eval's --decode; copy and free feedback are kept apart in the store")
      ->capture_default_str();
  add_optional(cmd, "--epochs", a->epochs, "passes over the training examples (default: the method's; ROPG 10)");
  add_optional(cmd, "--batch-size", a->batch_size, "examples per optimiser step (effective batch; default: the method's, ROPG 64)");
  add_optional(cmd, "--micro-batch", a->micro_batch, "examples per forward/backward (gradient accumulation; default ROPG 8)");
  add_optional(cmd, "--lr", a->lr, "peak learning rate, linear warmup then linear decay (default: the method's; ROPG 1e-3)");
  add_optional(cmd, "--warmup", a->warmup, "warmup, as a fraction of all steps (default: the method's; ROPG 0.05)");
  add_optional(cmd, "--clip", a->clip, "gradient-norm clip (0 = none; default 1)");
  add_optional(cmd, "--query-max-length", a->query_max_length, "query tokens, specials included (default ROPG 128)");
  add_optional(cmd, "--doc-max-length", a->doc_max_length, "document tokens, specials included (default ROPG 128)");
  cmd->add_flag("--double-softmax", a->double_softmax,
                "ROPG-KD as the LaMP reference code computes it (cross-entropy on softmaxed scores), not the paper's KL");
  add_optional(cmd, "--target-temperature", a->target_temperature,
               "ROPG-KD and RSPG: the target is softmax(utility' / T) (default 1, the papers')");
  add_optional(cmd, "--target-normalization", a->target_normalization,
               "ROPG-KD: utility' = the utilities z-scored per query (zscore, default) or raw (none, the "
               "paper's: near-uniform targets on [0, 1] utilities); RSPG: the same for the pool's Eval values "
               "(default none, the paper's)");
  add_optional(cmd, "--policy-scale", a->policy_scale,
               "ROPG-KD: fitted (default; pi = softmax(c score / tau), c fitted per batch to the target's spread, so a "
               "target broader or sharper than the starting policy does not flatten or sharpen the encoder) or fixed "
               "(c = 1, the paper's; the default with --double-softmax)")
      ->check(CLI::IsMember({"fixed", "fitted"}));
  cmd->add_flag("--freeze-embeddings", a->freeze_embeddings,
                "ropg-kd, ropg-rl, luf: keep the encoder's word embeddings as loaded (train the layers above them)");
  add_optional(cmd, "--policy-temperature", a->policy_temperature,
               "ROPG: the policy is softmax(score / tau) (default: the temperature the --init encoder was trained "
               "at, recorded in its attune_train.json (pretrain-encoder: 0.05); 1, the paper's, when it records none)");
  cmd->add_option("--protocol", a->protocol,
                  "ROPG: how the trained folder retrieves: rerank = rerank(INITIAL, TOP_L, the encoder), the protocol "
                  "it is trained and its epoch chosen in; dense = the encoder alone over every candidate (000's)")
      ->check(CLI::IsMember({"rerank", "dense"}))
      ->capture_default_str();
  add_optional(cmd, "--initial-prior", a->initial_prior,
               "ROPG with --protocol rerank: learned (default) = the policy adds w * the initial retriever's z-scored "
               "score to the encoder's, w chosen on training queries before training and learned with it (the folder "
               "retrieves rerank(INITIAL,TOP_L,dense:DIR,fuse=1/tau:w)); none = the encoder alone orders the candidates. "
               "PURPLE: learned = the Plackett-Luce log-weights are log f + w z, the head starts at zero so the "
               "untrained order is the first stage's (w from --purple-prior-weight, learned with the head; the default, "
               "chosen on dev); none (003's) = f alone. RSPG: learned = each pool member's score gets a learned bias "
               "started at its mean training target / T (the untrained selector avoids members that do not help on "
               "average); none (000's, the default) = the encoder alone");
  cmd->add_flag("--keep-flat", a->keep_flat,
                "ROPG-KD: also train on queries whose candidates all have the same utility (the paper's; by default "
                "they are left out, since their uniform target only flattens the scores)");
  add_optional(cmd, "--kd-target", a->kd_target,
               "ROPG-KD: what the target distribution is built from on the training queries: utility (default, 000's: "
               "the task metric of the reader's output with each document) or likelihood (REPLUG-LSR's: log p(y | x, d) "
               "- log p(y | x), scoring calls instead of generations); dev picks the kept epoch by utility either way");
  add_optional(cmd, "--luf-weights", a->luf_weights,
               "LUF: the weights of its three losses, STRICT,FLACCID,HARD (multi-positive InfoNCE, the KL from the "
               "judged scores, the rank-weighted hard-negative margin; default 1,1,1, paper 004's sum); 0 turns one off");
  add_optional(cmd, "--luf-gamma", a->luf_gamma, "LUF: the hard-negative loss's margin gamma (default 1)");
  cmd->add_flag("--luf-in-batch", a->luf_in_batch,
                "LUF: the strict loss's denominator is every document of the micro-batch (paper 004 Eq. 2): the other "
                "queries' candidates are in-batch negatives (by default each query's own candidates only)");
  cmd->add_flag("--luf-relevance-batches", a->luf_relevance_batches,
                "LUF, with --luf-in-batch: micro-batches group queries that share relevant documents (paper 004 Eq. 1, "
                "greedily), so batch-mates' documents are hard negatives");
  cmd->add_flag("--document-dates", a->document_dates,
                "ROPG: the encoder reads each candidate as its text + \" date: \" + its date, as paper 000's training "
                "(LaMP's code); the folder records it and retrieves the same way. Every document needs a date");
  cmd->add_option("--document-fields", a->document_fields,
                  "ROPG: F1,F2,...: the encoder reads each candidate as its text + \" F: value\" for each field of its "
                  "profile item (e.g. commit_area's tag, which the reader sees and the task's document text leaves out; "
                  "date = --document-dates); the folder records them and retrieves the same way. Every document needs them");
  add_optional(cmd, "--checkpoint-every", a->checkpoint_every,
               "optimiser steps between checkpoints, and at every epoch end (default: ROPG 50; 0 = epoch ends only)");
  cmd->add_flag("--resume", a->resume, "continue the run checkpointed in --out");
  const TrainRunner rspg = add_rspg_options(cmd), pearl = add_pearl_options(cmd), purple = add_purple_options(cmd), ium = add_ium_options(cmd);
  cmd->callback([=, &rc] {
    // The dev split picks the kept epoch: the training split would pick the one that fits it best.
    if (!a->dev_split.empty() && a->dev_split == d->split)
      throw UsageError("--split " + d->split + " and --dev-split " + a->dev_split +
                       " name the same split: the kept epoch would be chosen on the training data (name another "
                       "--dev-split, or --dev-split \"\" to keep the last epoch)");
    // A method's own options (--pearl-*, --purple-* and their flags) mean nothing to another.
    for (const auto* opt : cmd->get_options()) {
      if (opt->count() == 0) continue;
      const std::string name = opt->get_name();
      const bool pearl_only = name.rfind("--pearl-", 0) == 0 || name == "--no-anchor";
      const bool purple_only = name.rfind("--purple-", 0) == 0 || name == "--no-cross-attention" || name == "--pointwise";
      const bool ium_only = name.rfind("--ium-", 0) == 0 || name == "--agents";
      const char* owner = pearl_only ? "pearl" : purple_only ? "purple" : ium_only ? "ium" : nullptr;
      if (owner && a->method != owner && !(std::string(owner) == "ium" && a->method == "ium-online")) throw UsageError(name + " applies to --method " + owner + ", not " + a->method);
    }
    if (a->target_temperature && a->method != "ropg-kd" && a->method != "rspg-pre" && a->method != "rspg-post")
      throw UsageError("--target-temperature applies to ropg-kd, rspg-pre and rspg-post, not " + a->method +
                       (a->method == "pearl" ? " (its label temperature is --pearl-tau)" : ""));
    if (a->keep_flat && a->method != "ropg-kd") throw UsageError("--keep-flat applies to ropg-kd, not " + a->method);
    if (a->kd_target && a->method != "ropg-kd") throw UsageError("--kd-target applies to ropg-kd, not " + a->method);
    if (a->kd_target) train::parse_kd_target(*a->kd_target);  // a bad value first
    if ((a->luf_weights || a->luf_gamma || a->luf_in_batch || a->luf_relevance_batches) && a->method != "luf")
      throw UsageError(std::string(a->luf_weights ? "--luf-weights" : a->luf_gamma ? "--luf-gamma" : a->luf_in_batch ? "--luf-in-batch" : "--luf-relevance-batches") +
                       " applies to luf, not " + a->method);
    if (a->document_dates && a->method != "ropg-kd" && a->method != "ropg-rl" && a->method != "luf")
      throw UsageError("--document-dates applies to ropg-kd, ropg-rl and luf, not " + a->method);
    if (!a->document_fields.empty() && a->method != "ropg-kd" && a->method != "ropg-rl" && a->method != "luf")
      throw UsageError("--document-fields applies to ropg-kd, ropg-rl and luf, not " + a->method);
    std::vector<std::string> document_fields;
    if (a->document_dates) document_fields.push_back("date");
    for (const auto& f : split_commas(a->document_fields)) {
      if (f.empty() || f.find_first_of(" \t:") != std::string::npos)
        throw UsageError("--document-fields " + a->document_fields + ": \"" + f + "\" is not a field name");
      if (std::find(document_fields.begin(), document_fields.end(), f) != document_fields.end())
        throw UsageError("--document-fields " + a->document_fields + ": \"" + f + "\" is named twice" +
                         (f == "date" && a->document_dates ? " (--document-dates is the field date)" : ""));
      document_fields.push_back(f);
    }
    if (a->target_normalization && a->method != "ropg-kd" && a->method != "rspg-pre" && a->method != "rspg-post")
      throw UsageError("--target-normalization applies to ropg-kd, rspg-pre and rspg-post, not " + a->method);
    if (a->target_normalization) train::parse_target_normalization(*a->target_normalization);  // a bad value first
    if (a->protocol != "rerank" && a->method != "ropg-kd" && a->method != "ropg-rl" && a->method != "luf")
      throw UsageError("--protocol applies to ropg-kd, ropg-rl and luf, not " + a->method);
    const bool own_prior = a->method == "purple" || a->method == "rspg-pre" || a->method == "rspg-post";
    if (a->initial_prior && a->method != "ropg-kd" && a->method != "ropg-rl" && a->method != "luf" && !own_prior)
      throw UsageError("--initial-prior applies to ropg-kd, ropg-rl, luf, purple, rspg-pre and rspg-post, not " + a->method);
    if (a->initial_prior && own_prior) {
      train::parse_initial_prior(*a->initial_prior);  // a bad value first
    } else if (a->initial_prior) {
      const auto p = train::parse_initial_prior(*a->initial_prior);  // a bad value first
      if (p == train::InitialPrior::Learned && a->protocol != "rerank")
        throw UsageError("--initial-prior learned needs --protocol rerank (its prior is the initial retriever's order; "
                         "--protocol dense has no initial retriever at retrieval time)");
    }
    if (a->freeze_embeddings && a->method != "ropg-kd" && a->method != "ropg-rl" && a->method != "luf")
      throw UsageError("--freeze-embeddings applies to ropg-kd, ropg-rl and luf, not " + a->method);
    if (a->policy_scale && a->method != "ropg-kd")
      throw UsageError("--policy-scale applies to ropg-kd, not " + a->method);
    if (a->policy_temperature && a->method != "ropg-kd" && a->method != "ropg-rl" && a->method != "luf")
      throw UsageError("--policy-temperature applies to ropg-kd, ropg-rl and luf, not " + a->method);
    if (a->decode != "free" && (a->method == "luf" || a->method == "purple"))
      throw UsageError("--decode " + a->decode + " applies to methods that learn from generated answers (ropg-kd, ropg-rl, rspg-pre, "
                       "rspg-post, pearl, ium, ium-online), not " + a->method +
                       (a->method == "luf" ? " (its labels are the judge's replies)" : " (its rewards are log-likelihoods)"));
    if (a->method == "rspg-pre" || a->method == "rspg-post") return rspg(*d, *r, *a), void(rc = 0);
    if (a->method == "pearl") return pearl(*d, *r, *a), void(rc = 0);
    if (a->method == "purple") return purple(*d, *r, *a), void(rc = 0);
    if (a->method == "ium" || a->method == "ium-online") return ium(*d, *r, *a), void(rc = 0);
    if (a->method != "ropg-rl" && a->method != "ropg-kd" && a->method != "luf")
      throw UsageError("unknown --method \"" + a->method + "\" (expected ropg-rl, ropg-kd, luf, rspg-pre, rspg-post, pearl, purple, ium or ium-online)");
    if (a->init.empty())
      throw UsageError("--method " + a->method + " needs --init MODEL_DIR: the dense encoder to start from "
                       "(make one with `attune pretrain-encoder`)");
    if (!fs::is_directory(a->init)) throw UsageError("--init " + a->init + ": no such model folder");
    if (a->top_l < 2) throw UsageError("--top-l must be at least 2");
    // The shared hyper-parameters: what was given, else ROPG's defaults (RopgOptions).
    apply_fit_options(*a, *r, ro->fit);
    ro->query_max_length = a->query_max_length.value_or(ro->query_max_length);
    ro->doc_max_length = a->doc_max_length.value_or(ro->doc_max_length);
    ro->objective = train::parse_ropg_objective(a->method);
    ro->double_softmax = a->double_softmax;
    ro->target_temperature = a->target_temperature.value_or(ro->target_temperature);
    ro->policy_temperature = a->policy_temperature;
    if (a->policy_scale) ro->fit_policy_scale = *a->policy_scale == "fitted";
    ro->freeze_word_embeddings = a->freeze_embeddings;
    if (a->target_normalization) ro->target_normalization = train::parse_target_normalization(*a->target_normalization);
    if (a->protocol == "rerank") ro->rerank = train::RopgOptions::Rerank{a->initial, a->top_l};
    ro->initial_prior = a->initial_prior ? train::parse_initial_prior(*a->initial_prior)
                        : a->protocol == "rerank" ? train::InitialPrior::Learned
                                                  : train::InitialPrior::None;
    ro->skip_flat = !a->keep_flat;
    ro->document_fields = document_fields;
    if (a->kd_target) ro->kd_target = train::parse_kd_target(*a->kd_target);
    if (a->luf_weights) {
      const auto w = real_list("--luf-weights", *a->luf_weights);
      if (w.size() != 3)
        throw UsageError("--luf-weights " + *a->luf_weights + ": expected three weights, STRICT,FLACCID,HARD (e.g. 1,1,1)");
      ro->luf.lambda_strict = w[0];
      ro->luf.lambda_flaccid = w[1];
      ro->luf.lambda_hard = w[2];
    }
    if (a->luf_gamma) ro->luf.gamma = *a->luf_gamma;
    ro->luf.in_batch = a->luf_in_batch;
    ro->luf.relevance_batches = a->luf_relevance_batches;
    ro->init = a->init;
    ro->validate();  // option errors before any work
    auto task = load_task(*d);
    auto tok = engine::budget_tokenizer(r->tokenizer, a->llm);
    auto st = store::open_store(r->store_file());
    neural::register_retrievers(r->device);
    auto model = engine::make_llm(a->llm, *d, task.get(), r->models());
    const auto bench = make_bench(*task, *model, *st, *tok, *r, *a);  // checks its generation options against the model before any work
    nlohmann::json args = {{"method", a->method}, {"data", d->data}, {"task", d->task}, {"split", d->split},
                           {"dev_split", a->dev_split}, {"llm", llm::redact_url_passwords(a->llm)}, {"out", a->out}, {"init", a->init},
                           {"initial", a->initial}, {"top_l", a->top_l}, {"protocol", a->protocol},
                           {"initial_prior", train::to_string(ro->initial_prior)}, {"document_dates", a->document_dates}, {"document_fields", document_fields},
                           {"kd_target", train::to_string(ro->kd_target)}, {"limit", a->limit},
                           {"luf", {{"lambda_strict", ro->luf.lambda_strict}, {"lambda_flaccid", ro->luf.lambda_flaccid},
                                    {"lambda_hard", ro->luf.lambda_hard}, {"gamma", ro->luf.gamma},
                                    {"in_batch", ro->luf.in_batch}, {"relevance_batches", ro->luf.relevance_batches}}}, {"epochs", ro->fit.epochs},
                           {"batch_size", ro->fit.batch_size}, {"lr", ro->fit.lr}, {"resume", a->resume},
                           {"max_new_tokens", a->max_new_tokens}, {"decode", a->decode}};
    const auto tr = load_workflow_split(*d, *task, *st, *r, {a->initial}, a->limit);
    const auto dev = load_dev_split(*d, *a, *task, *st, *r, {a->initial});
    store::RunScope run(*st, "train", args.dump(), r->seed);

    train::RopgWorkflow wf;
    wf.initial = a->initial;
    wf.top_l = a->top_l;
    wf.feedback_max_length = a->feedback_max_length;
    wf.data_label = d->data + " " + d->task + " " + d->split;
    wf.options = *ro;
    const auto out = train::run_ropg(bench, tr.view(), dev ? dev->view() : train::SplitSource{}, wf);
    const auto& res = out.result;
    nlohmann::json summary = {{"method", a->method}, {"out", a->out}, {"train_examples", out.train_examples},
                              {"dev_examples", out.dev_examples}, {"steps", res.steps_done}, {"total_steps", res.total_steps},
                              {"best_epoch", res.best_epoch}, {"init_dev_top1", res.init_dev_top1}, {"dev_oracle", res.dev_oracle},
                              {"seconds", res.seconds}, {"seed", r->seed}};
    if (ro->initial_prior == train::InitialPrior::Learned) {
      summary["initial_weight_start"] = res.initial_weight_start;
      summary["initial_weight"] = res.initial_weight;
    }
    if (!res.epochs.empty()) {
      // best_epoch 0 with dev: no epoch beat the starting encoder, which the folder holds.
      summary["dev_top1"] = res.best_epoch ? res.epochs[res.best_epoch - 1].dev_top1
                                           : out.dev_examples ? res.init_dev_top1 : res.epochs.back().dev_top1;
      summary["last_loss"] = res.epochs.back().loss;
    }
    const bool finished = res.steps_done == res.total_steps;
    run.end(finished ? "ok" : "stopped", summary.dump());
    if (finished)
      std::printf("trained %s on %zu %s %s examples (%zu steps, %.1fs): kept epoch %zu%s%s -> %s\n", a->method.c_str(),
                  out.train_examples, d->task.c_str(), d->split.c_str(), res.steps_done, res.seconds, res.best_epoch,
                  res.best_epoch == 0 && out.dev_examples ? " (the starting encoder: no epoch beat it on dev)" : "",
                  out.dev_examples == 0 ? "" : (", dev top-1 utility " + std::to_string(summary.value("dev_top1", 0.0)) +
                                      " (initial encoder " + std::to_string(res.init_dev_top1) + ", oracle " +
                                      std::to_string(res.dev_oracle) + ")").c_str(),
                  a->out.c_str());
    rc = 0;
  });
}

}  // namespace attune::cli
