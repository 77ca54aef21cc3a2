// Language-model pretraining (train/lm.h) on the shared loop.
#include "attune/models/local_lm.h"
#include "attune/train/lm.h"
#include "attune/train/reader.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/machine.h"
#include "attune/core/parallel.h"
#include "attune/core/rng.h"
#include "attune/models/autocast.h"
#include "attune/models/config.h"
#include "attune/models/llama.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"
#include "checkpoint.h"
#include "fit.h"

namespace attune::train {

namespace fs = std::filesystem;

void LmOptions::validate() const {
  {
    FitOptions f = fit;
    f.inputs.push_back(tokenizer);
    f.validate();
  }
  const auto bad = [](const char* field, std::size_t v, const std::string& why) {
    throw FieldError<UsageError>(field, std::string(field) + " = " + std::to_string(v) + ": " + why);
  };
  if (tokenizer.empty() && init.empty())
    throw FieldError<UsageError>("tokenizer", "a language model needs a tokenizer folder (attune train-tokenizer)");
  if (hidden == 0 || layers == 0 || intermediate == 0) bad("hidden", hidden, "hidden, layers and intermediate must be positive");
  if (heads == 0 || hidden % heads) bad("heads", heads, "must divide hidden = " + std::to_string(hidden));
  if ((hidden / heads) % 2) bad("heads", heads, "hidden / heads must be even (RoPE rotates pairs)");
  if (kv_heads == 0 || heads % kv_heads) bad("kv_heads", kv_heads, "must divide heads = " + std::to_string(heads));
  if (seq_len < 2) bad("seq_len", seq_len, "must be at least 2");
  if (seq_len > max_positions) bad("seq_len", seq_len, "must not exceed max_positions = " + std::to_string(max_positions));
  if (!(dev_fraction >= 0 && dev_fraction < 0.5))
    throw FieldError<UsageError>("dev_fraction", "dev_fraction = " + std::to_string(dev_fraction) + ": must be in [0, 0.5)");
  if (precision != "auto" && precision != "fp32" && precision != "bf16")
    throw FieldError<UsageError>("precision", "precision \"" + precision + "\": expected auto, fp32 or bf16");
  (void)models::resolve_precision(precision, models::to_torch(fit.device));  // bf16 needs CUDA or a CPU with bf16 instructions: refused before any work
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay))
    throw FieldError<UsageError>("weight_decay", "weight_decay = " + std::to_string(weight_decay) + ": must be finite and >= 0");
  if (!(repeat_share >= 0 && repeat_share <= 1))
    throw FieldError<UsageError>("repeat_share", "repeat_share = " + std::to_string(repeat_share) + ": must be in [0, 1]");
  if (head_weight < 1 || head_weight > 100) bad("head_weight", head_weight, "must be from 1 (off) to 100");
  if (!models::valid_answer_prefix(answer_prefix))
    throw FieldError<UsageError>("answer_prefix", "answer_prefix \"" + answer_prefix +
                                                      "\": must be a newline then at most 8 characters, none a control character");
}

namespace {

// A training sequence: its tokens, and the first position whose token is a target (1 for
// pretraining: every next token; the first answer token for a reader example).
struct Seq {
  std::vector<std::int32_t> ids;
  std::size_t target_from = 1;
  std::size_t head_until = 0;  // target positions below this are the answer's head (LmOptions::head_weight)
};

// GPT-2 style: N(0, 0.02) for matrices, the residual outputs (o_proj, down_proj) scaled by
// 1 / sqrt(2 layers), norms at 1.
void init_weights(torch::nn::Module& m, std::size_t layers) {
  torch::NoGradGuard g;
  const double out_std = 0.02 / std::sqrt(2.0 * static_cast<double>(layers));
  for (auto& p : m.named_parameters()) {
    const auto& name = p.key();
    auto& t = p.value();
    if (t.dim() >= 2) {
      const bool residual = name.find("o_proj") != std::string::npos || name.find("down_proj") != std::string::npos;
      t.normal_(0, residual ? out_std : 0.02);
    } else if (name.find("norm") != std::string::npos) {
      t.fill_(1.0);
    } else {
      t.zero_();
    }
  }
}

// An epoch's order of the training sequences: the seeded permutation, and with
// o.length_window = N each run of N batches of it sorted by length (stable) and cut into
// batches again, the run's full batches in a seeded order (a last partial batch stays last,
// where the loop takes it).
std::vector<std::size_t> lm_epoch_order(const LmOptions& o, const std::vector<Seq>& seqs, std::size_t epoch) {
  auto order = epoch_order(o.fit.seed, "lm-epoch-", epoch, seqs.size());
  const std::size_t B = o.fit.batch_size, W = o.length_window * B;
  if (W == 0 || B == 0) return order;
  std::vector<std::size_t> out;
  out.reserve(order.size());
  for (std::size_t lo = 0; lo < order.size(); lo += W) {
    const std::size_t hi = std::min(order.size(), lo + W);
    std::vector<std::size_t> run(order.begin() + static_cast<std::ptrdiff_t>(lo), order.begin() + static_cast<std::ptrdiff_t>(hi));
    std::stable_sort(run.begin(), run.end(), [&](std::size_t a, std::size_t b) { return seqs[a].ids.size() < seqs[b].ids.size(); });
    const std::size_t full = run.size() / B;
    const auto batches = epoch_order(o.fit.seed, "lm-length-window-" + std::to_string(lo) + "-", epoch, full);
    for (const std::size_t b : batches) out.insert(out.end(), run.begin() + static_cast<std::ptrdiff_t>(b * B),
                                                   run.begin() + static_cast<std::ptrdiff_t>((b + 1) * B));
    out.insert(out.end(), run.begin() + static_cast<std::ptrdiff_t>(full * B), run.end());
  }
  return out;
}

class LmLearner final : public DevSelectedLearner {
 public:
  LmLearner(std::vector<Seq> train, std::vector<Seq> dev, const models::LlamaConfig& cfg, const LmOptions& o,
            const fs::path& tokenizer_dir, std::int32_t pad, bool reader = false)
      : DevSelectedLearner(o.fit, {"dev_loss"}), o_(o), tr_(std::move(train)), dv_(std::move(dev)), tokenizer_dir_(tokenizer_dir),
        pad_(pad), reader_(reader), reader_prefix_(o.answer_prefix) {
    device_ = models::to_torch(o.fit.device);
    precision_ = models::resolve_precision(o.precision, device_);
    torch::manual_seed(o.fit.seed);
    if (o.init.empty()) {
      model_ = std::make_shared<models::Llama>(cfg, device_, torch::kFloat32);
      init_weights(model_->module(), o.layers);
      model_->module().to(device_);
    } else {
      model_ = models::Llama::load(o.init, device_, torch::kFloat32);
    }
    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : model_->module().parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    for (const auto& p : model_->module().parameters()) params_ += static_cast<std::size_t>(p.numel());
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(o.fit.lr).betas({0.9, 0.95}).weight_decay(o.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                      torch::optim::AdamWOptions(o.fit.lr).betas({0.9, 0.95}).weight_decay(0.0)));
    optimizer_ = std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(o.fit.lr));
    sig_ = {{"tokenizer", tokenizer_dir.string()}, {"init", o.init.string()}, {"hidden", o.hidden}, {"layers", o.layers}, {"heads", o.heads},
            {"kv_heads", o.kv_heads}, {"intermediate", o.intermediate}, {"max_positions", o.max_positions},
            {"seq_len", o.seq_len}, {"rope_theta", o.rope_theta}, {"weight_decay", o.weight_decay},
            {"dev_fraction", o.dev_fraction}, {"epochs", o.fit.epochs}, {"batch_size", o.fit.batch_size},
            {"micro_batch", o.fit.micro_batch}, {"lr", o.fit.lr}, {"warmup", o.fit.warmup}, {"clip", o.fit.clip},
            {"seed", o.fit.seed}, {"train_sequences", tr_.size()}, {"precision", models::precision_name(precision_)}};
    if (o.length_window) sig_["length_window"] = o.length_window;  // absent when off: earlier runs resume
    if (o.head_weight != 1) sig_["head_weight"] = o.head_weight;
    if (o.answer_prefix != models::kReaderAnswerPrefix) sig_["answer_prefix"] = o.answer_prefix;
    if (o.repeat_share != 0) sig_["repeat_share"] = o.repeat_share;
    if (!o.fit.quiet)
      std::fprintf(stderr, "train-lm: device %s, %s; %s\n", device_.str().c_str(),
                   precision_ == models::Precision::BF16 ? "bf16 autocast (float32 weights)" : "float32",
                   this_machine().line().c_str());
  }

  std::string name() const override { return "lm"; }
  std::size_t size() const override { return tr_.size(); }
  std::vector<std::size_t> order(std::size_t epoch) const override { return lm_epoch_order(o_, tr_, epoch); }
  std::vector<torch::Tensor> parameters() override { return model_->module().parameters(); }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void train_mode(bool on) override { model_->module().train(on); }

  torch::Tensor loss(const MicroBatch& mb) override {
    std::vector<const Seq*> rows;
    for (auto i : mb.items) rows.push_back(&tr_[i]);
    return batch_loss(rows, o_.head_weight);
  }

  std::optional<DevValue> dev() override {
    if (dv_.empty()) return std::nullopt;
    torch::NoGradGuard ng;
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t lo = 0; lo < dv_.size(); lo += 8) {
      std::vector<const Seq*> rows;
      for (std::size_t i = lo; i < std::min(dv_.size(), lo + 8); ++i) rows.push_back(&dv_[i]);
      sum += batch_loss(rows, 1).item<double>() * static_cast<double>(rows.size());
      n += rows.size();
    }
    const double loss = sum / static_cast<double>(n);
    char line[96];
    std::snprintf(line, sizeof line, " dev loss %.4f (perplexity %.1f)", loss, std::exp(loss));
    return DevValue{-loss, {{"dev_loss", loss}}, line};
  }
  nlohmann::json signature() const override { return sig_; }

  void save(const fs::path& dir, const FitState& st) override {
    model_->save(dir);
    models::write_json_file(dir / "attune_train.json", metadata(st, st.step));
  }
  void load(const fs::path& dir) override { models::load_module(model_->module(), models::WeightSet::open(dir)); }
  void save_kept(const FitState& st) override {
    const auto& out = o_.fit.out;
    save(out, st);
    // The tokenizer beside the weights, and how to generate: a Hugging Face folder.
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
      if (fs::exists(tokenizer_dir_ / f)) write_file_atomic(out / f, read_file(tokenizer_dir_ / f));
    const auto& c = model_->config();
    nlohmann::json gen = {{"bos_token_id", c.bos_id}, {"eos_token_id", c.eos_ids.at(0)}, {"max_length", c.max_positions},
                          {"do_sample", false}};
    models::write_json_file(out / "generation_config.json", gen);
    // A reader answers prefix + answer + EOS (its examples' targets): `local:` scores that form.
    if (reader_)
      models::write_json_file(out / models::kReaderFile,
                              {{"answer_prefix", reader_prefix_}, {"eos_after_answer", true}});
  }

  std::size_t parameter_count() const { return params_; }
  std::string device_name() const { return device_.str(); }
  const char* precision() const { return models::precision_name(precision_); }

 private:
  std::size_t dev_size() const override { return dv_.size(); }

  // Mean next-token cross-entropy over the rows' target positions (rows right-padded: a
  // causal model's real tokens never see the padding after them). Only those positions are
  // projected onto the vocabulary (the reader stage: the answer, not the prompt), in blocks
  // (Llama::train_loss_sum). With head_weight W, each head position is gathered W times: its
  // cross-entropy counts W times in the sum and in the count it is divided by.
  torch::Tensor batch_loss(const std::vector<const Seq*>& rows, std::size_t head_weight) {
    std::size_t longest = 0;
    for (const auto* r : rows) longest = std::max(longest, r->ids.size());
    const auto B = static_cast<std::int64_t>(rows.size()), T = static_cast<std::int64_t>(longest);
    auto ids = torch::full({B, T}, static_cast<std::int64_t>(pad_), torch::kInt64);
    std::vector<std::int64_t> at, want;  // flattened [B, T-1] positions with loss, and their next tokens
    auto a = ids.accessor<std::int64_t, 2>();
    for (std::int64_t b = 0; b < B; ++b) {
      const auto& r = *rows[static_cast<std::size_t>(b)];
      for (std::size_t t = 0; t < r.ids.size(); ++t) a[b][static_cast<std::int64_t>(t)] = r.ids[t];
      for (std::size_t t = std::max<std::size_t>(r.target_from, 1); t < r.ids.size(); ++t)
        for (std::size_t w = t < r.head_until ? head_weight : 1; w > 0; --w) {
          at.push_back(b * (T - 1) + static_cast<std::int64_t>(t) - 1);
          want.push_back(r.ids[t]);
        }
    }
    if (at.empty()) throw Error("train-lm: a batch with no target token (every row's answer is empty)");
    const auto N = static_cast<std::int64_t>(at.size());
    ids = ids.to(device_);
    models::AutocastScope autocast(device_, precision_);
    const auto input = ids.narrow(1, 0, T - 1);
    // Every position once (pretraining's packed rows): no gather. A weighted head repeats
    // positions, so its count may reach B * (T - 1) without covering every position.
    const bool repeats = head_weight > 1 && std::any_of(rows.begin(), rows.end(), [](const Seq* r) { return r->head_until > 0; });
    const auto where = N == B * (T - 1) && !repeats ? torch::Tensor() : torch::tensor(at, torch::kInt64);
    return model_->train_loss_sum(input, torch::tensor(want, torch::kInt64), where) / static_cast<double>(N);
  }

  const LmOptions& o_;
  std::vector<Seq> tr_, dv_;
  fs::path tokenizer_dir_;
  std::int32_t pad_ = 0;
  bool reader_ = false;  // the reader stage: the folder says how it answers (attune_reader.json)
  std::string reader_prefix_;  // ... with this answer prefix (LmOptions::answer_prefix)
  torch::Device device_{torch::kCPU};
  models::Precision precision_ = models::Precision::FP32;
  std::shared_ptr<models::Llama> model_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  nlohmann::json sig_;
  std::size_t params_ = 0;
};

// Runs the loop and fills `res` from it: steps, the kept epoch, dev losses (start, kept) and
// this process's rate in training tokens a second (res.train_tokens: one epoch's).
void run_and_fill(LmLearner& learner, const LmOptions& o, LmResult& res) {
  res.device = learner.device_name();
  res.precision = learner.precision();
  const auto f = fit(learner, o.fit);
  res.steps_done = f.steps_done;
  res.total_steps = f.state.total_steps;
  res.best_epoch = f.state.best_epoch;
  res.losses = f.losses;
  res.seconds = f.seconds;
  res.init_dev_loss = learner.initial("dev_loss");
  res.dev_loss = res.best_epoch ? f.state.epochs[res.best_epoch - 1].dev_value("dev_loss") : res.init_dev_loss;
  if (f.seconds > 0 && res.total_steps)
    res.tokens_per_second = static_cast<double>(res.train_tokens) * static_cast<double>(o.fit.epochs) *
                            (static_cast<double>(f.losses.size()) / static_cast<double>(res.total_steps)) / f.seconds;
}

}  // namespace

void prepare_lm_out(const LmOptions& o) { prepare_out(o.fit); }

LmResult train_lm(const std::vector<std::string>& texts, const LmOptions& o) {
  o.validate();
  if (o.length_window)
    throw FieldError<UsageError>("length_window", "batches by length apply to the reader stage; pretraining's packed sequences are all "
                                                  "one length");
  if (o.head_weight != 1)
    throw FieldError<UsageError>("head_weight", "an answer's head is weighed in the reader stage; pretraining's texts have no answer");
  if (o.answer_prefix != models::kReaderAnswerPrefix)
    throw FieldError<UsageError>("answer_prefix", "an answer prefix belongs to the reader stage; pretraining's texts have no answer");
  const auto tok = text::SubwordTokenizer::load(o.tokenizer);
  const auto bos = tok->bos_id(), eos = tok->eos_id();
  if (!bos || !eos)
    throw FieldError<UsageError>("tokenizer", o.tokenizer.string() + ": the tokenizer names no " + (bos ? "EOS" : "BOS") +
                                                  " token (a language model's texts start with BOS and end with EOS)");
  // Tokenize (in parallel), split train / dev by a hash of the text, pack.
  std::vector<std::vector<std::int32_t>> ids(texts.size());
  parallel_for(texts.size(), 0, [&](std::size_t i) { ids[i] = tok->encode(texts[i], false).ids; });
  const auto cut = static_cast<std::uint64_t>(o.dev_fraction * 1e6);
  std::vector<std::int32_t> tr_stream, dv_stream;
  Rng repeat_rng(derive_seed(o.fit.seed, "pretrain-repeat"));
  std::size_t repeated = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (ids[i].empty()) continue;
    const bool is_dev = derive_seed(0, texts[i]) % 1000000 < cut;
    auto& s = is_dev ? dv_stream : tr_stream;
    // One draw per training text, whatever the share, so a share's repeated texts hold a smaller share's.
    const bool twice = !is_dev && repeat_rng.uniform() < o.repeat_share;
    for (int copy = 0; copy < (twice ? 2 : 1); ++copy) {
      s.push_back(*bos);
      s.insert(s.end(), ids[i].begin(), ids[i].end());
      s.push_back(*eos);
    }
    repeated += twice;
  }
  if (!o.fit.quiet && o.repeat_share > 0)
    std::fprintf(stderr, "train-lm: %zu training texts put in twice in a row (repeat_share %g)\n", repeated, o.repeat_share);
  const std::size_t T = o.seq_len + 1;
  const auto pack = [T](const std::vector<std::int32_t>& s) {
    std::vector<Seq> out;
    for (std::size_t at = 0; at + T <= s.size(); at += T)
      out.push_back({std::vector<std::int32_t>(s.begin() + static_cast<std::ptrdiff_t>(at), s.begin() + static_cast<std::ptrdiff_t>(at + T)), 1});
    return out;
  };
  auto train = pack(tr_stream), dev = pack(dv_stream);
  if (dev.size() > 256) dev.resize(256);  // dev loss on at most 256 sequences
  if (train.empty())
    throw Error("train-lm: the texts give no training sequence of " + std::to_string(T) + " tokens (" +
                std::to_string(tr_stream.size()) + " tokens in all): give more text or a shorter --seq-len");
  if (!o.fit.quiet)
    std::fprintf(stderr, "train-lm: %zu texts -> %zu training sequences of %zu tokens (%zu tokens), %zu dev sequences\n",
                 texts.size(), train.size(), o.seq_len, train.size() * o.seq_len, dev.size());
  prepare_out(o.fit);

  models::LlamaConfig cfg;
  cfg.vocab_size = static_cast<std::int64_t>(tok->vocab_size());
  cfg.hidden_size = static_cast<std::int64_t>(o.hidden);
  cfg.intermediate_size = static_cast<std::int64_t>(o.intermediate);
  cfg.num_layers = static_cast<std::int64_t>(o.layers);
  cfg.num_heads = static_cast<std::int64_t>(o.heads);
  cfg.num_kv_heads = static_cast<std::int64_t>(o.kv_heads);
  cfg.head_dim = cfg.hidden_size / cfg.num_heads;
  cfg.max_positions = static_cast<std::int64_t>(o.max_positions);
  cfg.rms_eps = 1e-5;
  cfg.rope_theta = o.rope_theta;
  cfg.tie_embeddings = true;
  cfg.eos_ids = {*eos};
  cfg.bos_id = *bos;

  LmResult res;
  res.train_sequences = train.size();
  res.dev_sequences = dev.size();
  res.train_tokens = train.size() * o.seq_len;
  if (!o.init.empty()) throw FieldError<UsageError>("init", "pretraining starts from random weights: init must be empty (train_reader fine-tunes)");
  LmLearner learner(std::move(train), std::move(dev), cfg, o, o.tokenizer, tok->pad_id().value_or(*eos));
  res.parameters = learner.parameter_count();
  if (!o.fit.quiet) std::fprintf(stderr, "train-lm: %zu parameters\n", res.parameters);
  run_and_fill(learner, o, res);
  return res;
}

LmResult train_reader(const std::vector<ReaderExample>& examples, const LmOptions& o_in) {
  LmOptions o = o_in;
  if (o.init.empty()) throw FieldError<UsageError>("init", "reader fine-tuning needs the language model to start from (--init DIR)");
  if (o.repeat_share != 0)
    throw FieldError<UsageError>("repeat_share", "texts are repeated in pretraining; a reader example is a prompt and its answer");
  o.tokenizer = o.init;
  o.validate();
  const auto tok = text::SubwordTokenizer::load(o.init);
  const auto bos = tok->bos_id(), eos = tok->eos_id();
  if (!bos || !eos) throw FieldError<UsageError>("init", o.init.string() + ": its tokenizer names no BOS or EOS token");
  const auto file = models::ConfigFile::load(o.init);
  const auto cfg = models::LlamaConfig::from(file);
  const std::size_t context = static_cast<std::size_t>(cfg.max_positions);
  // attune_train.json records the architecture fine-tuned, which is --init's, not the defaults.
  o.hidden = static_cast<std::size_t>(cfg.hidden_size);
  o.layers = static_cast<std::size_t>(cfg.num_layers);
  o.heads = static_cast<std::size_t>(cfg.num_heads);
  o.kv_heads = static_cast<std::size_t>(cfg.num_kv_heads);
  o.intermediate = static_cast<std::size_t>(cfg.intermediate_size);
  o.max_positions = context;
  o.seq_len = std::min(o.seq_len, context);
  // The folder will say its examples' answer prefix: each target must start with it.
  for (const auto& ex : examples)
    if (ex.target.compare(0, o.answer_prefix.size(), o.answer_prefix) != 0)
      throw FieldError<UsageError>("answer_prefix", "reader example " + ex.id + ": its target does not start with the answer prefix "
                                                    "the folder would record (ReaderDataOptions::answer_prefix and "
                                                    "LmOptions::answer_prefix must be the same)");
  std::vector<Seq> seqs(examples.size());
  std::vector<char> head_lost(examples.size(), 0);
  parallel_for(examples.size(), 0, [&](std::size_t i) {
    auto p = tok->encode(examples[i].prompt, true).ids;
    if (p.empty() || p.front() != *bos) p.insert(p.begin(), *bos);
    const auto& target = examples[i].target;
    const auto t = tok->encode(target, false).ids;
    Seq s;
    s.target_from = p.size();
    if (const auto hc = examples[i].head_chars) {
      if (hc > target.size()) throw Error("train-lm: reader example " + examples[i].id + ": head_chars beyond its target");
      // The head's tokens, when the target's tokens begin with them (a token across the head's
      // end leaves the example unweighted, counted below).
      const auto h = tok->encode(target.substr(0, hc), false).ids;
      if (!h.empty() && h.size() <= t.size() && std::equal(h.begin(), h.end(), t.begin()))
        s.head_until = s.target_from + h.size();
      else
        head_lost[i] = 1;
    }
    s.ids = std::move(p);
    s.ids.insert(s.ids.end(), t.begin(), t.end());
    s.ids.push_back(*eos);
    seqs[i] = std::move(s);
  });
  const auto cut = static_cast<std::uint64_t>(o.dev_fraction * 1e6);
  std::vector<Seq> train, dev;
  LmResult res;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    if (seqs[i].ids.size() > context) {
      ++res.too_long;
      continue;
    }
    (derive_seed(0, examples[i].id) % 1000000 < cut ? dev : train).push_back(std::move(seqs[i]));
  }
  if (dev.size() > 256) dev.resize(256);
  if (train.empty()) throw Error("train-lm: no reader example fits the model's context of " + std::to_string(context) + " tokens");
  res.train_sequences = train.size();
  res.dev_sequences = dev.size();
  for (const auto& s : train) res.train_tokens += s.ids.size();
  {
    // The first epoch's micro-batches as the loop forms them (fit.cpp: consecutive runs of
    // the epoch's order, micro_batch at a time within each batch), each as long as its longest row.
    const auto order = lm_epoch_order(o, train, 0);
    std::size_t positions = 0;
    for (std::size_t lo = 0; lo < order.size(); lo += o.fit.batch_size)
      for (std::size_t m = lo, hi = std::min(order.size(), lo + o.fit.batch_size); m < hi; m += o.fit.micro_batch) {
        const std::size_t end = std::min(hi, m + o.fit.micro_batch);
        std::size_t longest = 0;
        for (std::size_t i = m; i < end; ++i) longest = std::max(longest, train[order[i]].ids.size());
        positions += longest * (end - m);
      }
    res.padding_share = positions ? 1.0 - static_cast<double>(res.train_tokens) / static_cast<double>(positions) : 0.0;
  }
  for (const auto& s : train) res.head_tokens += s.head_until ? s.head_until - s.target_from : 0;
  res.heads_lost = static_cast<std::size_t>(std::count(head_lost.begin(), head_lost.end(), 1));
  if (!o.fit.quiet && o.head_weight != 1)
    std::fprintf(stderr, "train-lm: answer heads weigh %zu: %zu head tokens in training; %zu heads left unweighted (a token across "
                 "the head's end)\n", o.head_weight, res.head_tokens, res.heads_lost);
  if (!o.fit.quiet)
    std::fprintf(stderr,
                 "train-lm: %zu reader examples (%zu tokens), %zu dev, %zu left out as longer than %zu tokens; "
                 "padding %.1f%% of the batches' positions\n",
                 train.size(), res.train_tokens, dev.size(), res.too_long, context, 100 * res.padding_share);
  prepare_out(o.fit);
  LmLearner learner(std::move(train), std::move(dev), cfg, o, o.init, tok->pad_id().value_or(*eos), /*reader=*/true);
  res.parameters = learner.parameter_count();
  run_and_fill(learner, o, res);
  return res;
}

}  // namespace attune::train
