#include "attune/train/contrastive.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "attune/core/error.h"
#include "attune/models/config.h"
#include "attune/core/parallel.h"
#include "attune/models/bert.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"
#include "attune/train/pretrain.h"

namespace attune::train {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- objective

torch::Tensor info_nce(const torch::Tensor& q, const torch::Tensor& k, double temperature, bool symmetric) {
  TORCH_CHECK(q.dim() == 2 && q.sizes() == k.sizes(), "info_nce: q and k must be [B, D] of the same shape");
  TORCH_CHECK(temperature > 0, "info_nce: temperature must be positive");
  auto logits = torch::matmul(q, k.t()) / temperature;
  auto labels = torch::arange(q.size(0), torch::TensorOptions().dtype(torch::kInt64).device(q.device()));
  auto loss = torch::nn::functional::cross_entropy(logits, labels);
  if (symmetric) loss = 0.5 * (loss + torch::nn::functional::cross_entropy(logits.t(), labels));
  return loss;
}

Crop random_crop(std::size_t n, Rng& rng, const CropOptions& o) {
  if (n == 0) return {};
  const double ratio = o.ratio_min + (o.ratio_max - o.ratio_min) * rng.uniform();
  std::size_t len = static_cast<std::size_t>(std::floor(static_cast<double>(n) * ratio));
  len = std::max(len, o.min_tokens);
  len = std::min(len, n);
  if (o.max_tokens > 0) len = std::min(len, o.max_tokens);
  len = std::max<std::size_t>(len, 1);
  const std::size_t begin = rng.below(n - len + 1);
  return {begin, begin + len};
}

// ---------------------------------------------------------------- pretraining loop

namespace {


// The options a resumed run must share with the run it continues.
nlohmann::json run_signature(const PretrainOptions& o, std::size_t intermediate) {
  return {{"hidden", o.hidden}, {"layers", o.layers}, {"heads", o.heads}, {"intermediate", intermediate},
          {"max_length", o.max_length}, {"steps", o.steps}, {"batch_size", o.batch_size}, {"lr", o.lr},
          {"weight_decay", o.weight_decay}, {"warmup", o.warmup}, {"temperature", o.temperature},
          {"normalize", o.normalize}, {"ratio_min", o.ratio_min}, {"ratio_max", o.ratio_max}, {"seed", o.seed}};
}

std::string duration(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

}  // namespace

void prepare_pretrain_out(const PretrainOptions& o) {
  const fs::path ckpt = o.out / "checkpoint", ckpt_new = o.out / "checkpoint.new";
  if (!o.resume && (fs::exists(ckpt) || fs::exists(ckpt_new) || fs::exists(o.out / "attune_train.json")))
    throw UsageError(o.out.string() + " already holds a training run: --resume it or choose another --out");
  if (o.resume && !fs::exists(ckpt / "state.json") && fs::exists(ckpt_new / "state.json")) {
    // Killed between writing the new checkpoint and swapping it in: the new one is whole.
    fs::remove_all(ckpt);
    fs::rename(ckpt_new, ckpt);
  }
  if (o.resume && !fs::exists(ckpt / "state.json"))
    throw UsageError(o.out.string() + ": no checkpoint to resume (checkpoint/state.json is missing)");
}

PretrainResult pretrain_encoder(const std::vector<std::string>& texts, const PretrainOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out.empty()) throw UsageError("pretrain-encoder needs an output folder (--out DIR)");
  if (o.steps == 0) throw UsageError("--steps must be positive");
  if (o.batch_size < 2) throw UsageError("--batch-size must be at least 2 (in-batch negatives)");
  if (o.hidden == 0 || o.heads == 0 || o.hidden % o.heads) throw UsageError("--heads must divide --hidden");
  if (o.max_length < 4) throw UsageError("--max-length must be at least 4");
  if (!(o.temperature > 0)) throw UsageError("--temperature must be positive");
  if (!(o.lr > 0)) throw UsageError("--lr must be positive");
  if (!(o.ratio_min > 0 && o.ratio_min <= o.ratio_max && o.ratio_max <= 1)) throw UsageError("crop ratios must satisfy 0 < min <= max <= 1");
  const std::size_t intermediate = o.intermediate ? o.intermediate : 4 * o.hidden;
  prepare_pretrain_out(o);
  const fs::path ckpt = o.out / "checkpoint", ckpt_new = o.out / "checkpoint.new";

  // Tokenize once, without specials; crops get [CLS] ... [SEP] around them.
  const auto tok = text::SubwordTokenizer::load(o.tokenizer);
  const auto cls = tok->cls_id(), sep = tok->sep_id();
  if (!cls || !sep) throw Error(o.tokenizer.string() + ": the tokenizer has no [CLS]/[SEP] tokens (a BERT vocabulary is needed)");
  const std::int64_t pad = tok->pad_id().value_or(0);
  CropOptions crop_opts;
  crop_opts.ratio_min = o.ratio_min;
  crop_opts.ratio_max = o.ratio_max;
  crop_opts.min_tokens = 4;
  crop_opts.max_tokens = o.max_length - 2;
  std::vector<std::vector<std::int32_t>> tokens(texts.size());
  parallel_for(texts.size(), 0, [&](std::size_t i) { tokens[i] = tok->encode(texts[i], false).ids; });
  std::erase_if(tokens, [&](const auto& t) { return t.size() < 2 * crop_opts.min_tokens; });
  if (tokens.size() < o.batch_size)
    throw Error("pretraining needs at least --batch-size (" + std::to_string(o.batch_size) + ") texts of 8+ tokens, and " +
                std::to_string(tokens.size()) + " remain");

  models::BertConfig cfg;
  cfg.vocab_size = static_cast<std::int64_t>(tok->vocab_size());
  cfg.hidden_size = static_cast<std::int64_t>(o.hidden);
  cfg.num_layers = static_cast<std::int64_t>(o.layers);
  cfg.num_heads = static_cast<std::int64_t>(o.heads);
  cfg.intermediate_size = static_cast<std::int64_t>(intermediate);
  cfg.max_positions = static_cast<std::int64_t>(o.max_length);
  cfg.pad_token_id = pad;
  const torch::Device device = models::parse_device(o.device);
  torch::manual_seed(o.seed);
  models::BertModel model(cfg, /*with_pooler=*/false);
  model->init_weights();
  model->to(device);
  model->train();

  // AdamW; no decay on biases and LayerNorm weights (as BERT's recipe).
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.lr).weight_decay(0.0)));
  torch::optim::AdamW optimizer(std::move(groups), torch::optim::AdamWOptions(o.lr));

  const nlohmann::json signature = run_signature(o, intermediate);
  std::size_t start = 0;
  std::vector<double> all_losses;
  if (o.resume) {
    const auto state = models::read_json_file(ckpt / "state.json");
    for (auto& [key, value] : signature.items())
      if (!state["options"].contains(key) || state["options"][key] != value)
        throw UsageError((ckpt / "state.json").string() + ": option \"" + key + "\" was " +
                         (state["options"].contains(key) ? state["options"][key].dump() : std::string("absent")) +
                         " in the checkpointed run, now " + value.dump() + ": resume with the same options");
    start = state.at("step").get<std::size_t>();
    all_losses = state.value("losses", std::vector<double>{});
    torch::NoGradGuard g;
    models::load_module(*model, models::WeightSet::open(ckpt));
    torch::load(optimizer, (ckpt / "optimizer.pt").string());
    if (!o.quiet) std::fprintf(stderr, "pretrain: resuming %s at step %zu/%zu\n", o.out.c_str(), start, o.steps);
  }

  const std::size_t warmup = o.warmup ? o.warmup : std::max<std::size_t>(1, o.steps / 10);
  auto lr_at = [&](std::size_t s) {
    if (s < warmup) return o.lr * static_cast<double>(s + 1) / static_cast<double>(warmup);
    return o.lr * std::max(0.0, static_cast<double>(o.steps - s) / static_cast<double>(std::max<std::size_t>(1, o.steps - warmup)));
  };

  auto metadata = [&](std::size_t step) {
    nlohmann::json m = {{"objective", "contriever-infonce"}, {"data", o.data_description}, {"texts", tokens.size()},
                        {"tokenizer", o.tokenizer.string()}, {"seed", o.seed}, {"torch_threads", models::torch_threads()}, {"steps", step}, {"options", signature},
                        {"loss", all_losses.empty() ? 0.0 : all_losses.back()}, {"device", o.device}};
    const std::size_t tail = std::min<std::size_t>(all_losses.size(), std::max<std::size_t>(1, o.log_every));
    if (tail) m["loss_last_mean"] = std::accumulate(all_losses.end() - tail, all_losses.end(), 0.0) / static_cast<double>(tail);
    return m;
  };
  models::SaveBertOptions save_opts;
  save_opts.tokenizer_dir = o.tokenizer;
  save_opts.pooling = models::Pooling::Mean;
  save_opts.normalize = o.normalize;
  save_opts.max_seq_length = o.max_length;

  auto checkpoint = [&](std::size_t step) {
    fs::remove_all(ckpt_new);
    auto so = save_opts;
    so.attune_metadata = metadata(step);
    models::save_bert(model, ckpt_new, so);
    torch::save(optimizer, (ckpt_new / "optimizer.pt").string());
    nlohmann::json state = {{"step", step}, {"options", signature}, {"losses", all_losses}};
    models::write_json_file(ckpt_new / "state.json", state);  // last: marks the checkpoint whole
    fs::remove_all(ckpt);
    fs::rename(ckpt_new, ckpt);
  };

  PretrainResult res;
  res.texts = tokens.size();
  const std::size_t n = tokens.size(), B = o.batch_size;
  std::vector<std::size_t> perm(n);
  auto last_log = std::chrono::steady_clock::now();
  std::size_t since_log = 0;
  double loss_acc = 0;
  for (std::size_t s = start; s < o.steps; ++s) {
    // Everything random in a step comes from Rng(seed, step): a resumed run draws the same.
    Rng rng(derive_seed(o.seed, "pretrain-step-" + std::to_string(s)));
    std::iota(perm.begin(), perm.end(), 0);
    for (std::size_t i = 0; i < B; ++i) std::swap(perm[i], perm[i + rng.below(n - i)]);  // B distinct texts
    std::vector<std::vector<std::int64_t>> rows(2 * B);
    std::size_t L = 0;
    for (std::size_t i = 0; i < B; ++i) {
      const auto& t = tokens[perm[i]];
      for (std::size_t v = 0; v < 2; ++v) {
        const Crop c = random_crop(t.size(), rng, crop_opts);
        auto& r = rows[v * B + i];
        r.push_back(*cls);
        r.insert(r.end(), t.begin() + static_cast<std::ptrdiff_t>(c.begin), t.begin() + static_cast<std::ptrdiff_t>(c.end));
        r.push_back(*sep);
        L = std::max(L, r.size());
      }
    }
    auto ids = torch::full({static_cast<std::int64_t>(2 * B), static_cast<std::int64_t>(L)}, pad, torch::kInt64);
    auto mask = torch::zeros_like(ids);
    auto ia = ids.accessor<std::int64_t, 2>(), ma = mask.accessor<std::int64_t, 2>();
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t j = 0; j < rows[i].size(); ++j) {
        ia[i][j] = rows[i][j];
        ma[i][j] = 1;
      }
    ids = ids.to(device);
    mask = mask.to(device);
    const double lr = lr_at(s);
    for (auto& g : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);

    auto hidden = model->forward(ids, torch::zeros_like(ids), mask);
    auto emb = models::pool_embeddings(hidden, mask, models::Pooling::Mean, o.normalize);
    auto loss = info_nce(emb.narrow(0, 0, B), emb.narrow(0, B, B), o.temperature, /*symmetric=*/true);
    optimizer.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();

    const double lv = loss.item<double>();
    if (!std::isfinite(lv)) throw Error("pretraining diverged at step " + std::to_string(s + 1) + " (loss " + std::to_string(lv) + "): lower --lr");
    all_losses.push_back(lv);
    res.losses.push_back(lv);
    loss_acc += lv;
    ++since_log;
    const std::size_t done = s + 1;
    if (!o.quiet && (since_log >= std::max<std::size_t>(1, o.log_every) || done == o.steps)) {
      const auto now = std::chrono::steady_clock::now();
      const double per = std::chrono::duration<double>(now - last_log).count() / static_cast<double>(since_log);
      std::fprintf(stderr, "pretrain: step %zu/%zu loss %.4f lr %.2e %.2f s/step ETA %s\n", done, o.steps,
                   loss_acc / static_cast<double>(since_log), lr, per, duration(per * static_cast<double>(o.steps - done)).c_str());
      last_log = now;
      since_log = 0;
      loss_acc = 0;
    }
    const bool stop = o.stop_after && done - start >= o.stop_after;
    if ((o.checkpoint_every && done % o.checkpoint_every == 0) || done == o.steps || stop) checkpoint(done);
    if (stop) break;
  }
  res.steps_done = start + res.losses.size();
  const std::size_t w = std::min<std::size_t>(res.losses.size(), std::max<std::size_t>(1, o.log_every));
  if (w) {
    res.first_loss = std::accumulate(res.losses.begin(), res.losses.begin() + w, 0.0) / static_cast<double>(w);
    res.last_loss = std::accumulate(res.losses.end() - w, res.losses.end(), 0.0) / static_cast<double>(w);
  }
  if (res.steps_done == o.steps) {
    model->eval();
    auto so = save_opts;
    so.attune_metadata = metadata(res.steps_done);
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    so.attune_metadata["seconds_this_run"] = res.seconds;
    models::save_bert(model, o.out, so);
    if (!o.quiet) std::fprintf(stderr, "pretrain: wrote %s (%zu steps, last loss %.4f)\n", o.out.c_str(), res.steps_done, res.last_loss);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace attune::train
