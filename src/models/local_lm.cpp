#include "attune/models/local_lm.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/hash.h"
#include "attune/llm/generate_check.h"
#include "attune/models/config.h"
#include "attune/models/decoding.h"
#include "attune/models/llama.h"
#include "attune/models/t5.h"
#include "attune/models/weights.h"
#include "attune/core/model_hash.h"
#include "attune/text/subword.h"

namespace attune::models {

namespace fs = std::filesystem;


namespace {

// decode = copy (llm::GenerateOptions): a token is allowed when the answer it makes, its
// leading whitespace dropped, is a substring of the prompt's text. A byte-level token can end
// inside a multi-byte character, which decodes to U+FFFD (one for a valid partial sequence
// with a byte-level decoder, one a byte with byte fallback): an answer ending in at most three
// of them that the prompt does not hold is allowed while the prompt holds the rest followed by
// a non-ASCII byte, and may not end there. EOS needs a non-space character in the answer;
// other special tokens, which decode to nothing, are never allowed.
constexpr std::string_view kSpace = " \t\n\r\f\v";
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

enum class Span { no, partial, yes };

Span copy_span(const std::string& source, std::string_view answer) {
  const std::size_t start = answer.find_first_not_of(kSpace);
  if (start == std::string_view::npos) return Span::yes;  // whitespace so far (the reader's answer prefix)
  answer.remove_prefix(start);
  if (source.find(answer) != std::string::npos) return Span::yes;
  int cut = 0;
  while (answer.ends_with(kReplacement) && cut < 3) {
    answer.remove_suffix(kReplacement.size());
    ++cut;
  }
  if (cut == 0) return Span::no;
  for (std::size_t at = source.find(answer); at != std::string::npos; at = source.find(answer, at + 1))
    if (at + answer.size() < source.size() && static_cast<unsigned char>(source[at + answer.size()]) >= 0x80)
      return Span::partial;
  return Span::no;
}

// The same for a reader's generation so far (`text`), its answer prefix (attune_reader.json)
// not counted: while the text is still inside the prefix's characters after its newline it is
// allowed; past them, the answer after them must be a span (what generate returns, with
// strip_answer_prefix). A text that leaves the prefix out is checked whole.
Span answer_span(const std::string& source, const std::string& text, std::string_view prefix) {
  if (prefix.size() > 1) {
    const auto visible = prefix.substr(1);
    const std::size_t start = text.find_first_not_of(kSpace);
    const std::string_view rest = start == std::string::npos ? std::string_view() : std::string_view(text).substr(start);
    if (rest.size() < visible.size() && visible.starts_with(rest)) return Span::yes;
    if (rest.starts_with(visible)) return copy_span(source, rest.substr(visible.size()));
  }
  return copy_span(source, text);
}

std::function<bool(std::size_t, const TokenIds&, std::int32_t)> copy_constraint(
    const text::SubwordTokenizer& tok, const std::vector<std::int32_t>& eos_ids, std::span<const llm::Prompt> prompts,
    const std::string& prefix) {
  return [&tok, &eos_ids, prompts, &prefix](std::size_t row, const TokenIds& generated, std::int32_t token) {
    const bool eos = std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
    if (eos) {
      const std::string text = tok.decode(generated, true);
      return strip_answer_prefix(text, prefix).find_first_not_of(kSpace) != std::string::npos &&
             answer_span(prompts[row].text, text, prefix) == Span::yes;
    }
    const std::int32_t one[1] = {token};
    if (tok.decode(one, true).empty()) return false;
    TokenIds ids = generated;
    ids.push_back(token);
    return answer_span(prompts[row].text, tok.decode(ids, true), prefix) != Span::no;
  };
}

}  // namespace

struct LocalModel::Impl {
  fs::path dir;
  LocalOptions opts;
  std::string id;
  std::shared_ptr<Decoder> decoder;
  bool seq2seq = false;
  std::int64_t max_positions = 0;  // 0 = unbounded (relative positions)
  std::shared_ptr<const text::SubwordTokenizer> tok;
  std::vector<std::int32_t> eos;
  std::optional<std::int32_t> bos;
  std::mutex mu;
  LocalStats stats;
  // attune_reader.json: how the reader was trained to answer (score scores that form).
  std::string answer_prefix;
  bool eos_after_answer = false;
  // A reader of `train-lm --stage reader` from before attune_reader.json: score refuses.
  bool reader_without_format = false;

  TokenIds prompt_ids(const std::string& text, std::size_t reserve) {
    auto ids = tok->encode(text, true).ids;
    if (!seq2seq && ids.empty()) {
      if (!bos) throw Error(dir.string() + ": empty prompt and the tokenizer has no BOS token to start from");
      ids.push_back(*bos);
    }
    if (max_positions > 0 && ids.size() + reserve > static_cast<std::size_t>(max_positions)) {
      const std::size_t keep = static_cast<std::size_t>(max_positions) > reserve ? static_cast<std::size_t>(max_positions) - reserve : 1;
      if (ids.size() > keep) {
        ++stats.truncated;
        if (seq2seq) {
          ids.resize(keep);
        } else {
          const bool has_bos = bos && ids.front() == *bos;
          TokenIds cut;
          if (has_bos) cut.push_back(*bos);
          cut.insert(cut.end(), ids.end() - static_cast<std::ptrdiff_t>(keep - cut.size()), ids.end());
          ids = std::move(cut);
        }
      }
    }
    stats.prompt_tokens += ids.size();
    return ids;
  }
};

LocalModel::LocalModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LocalModel::~LocalModel() = default;

std::unique_ptr<LocalModel> LocalModel::load(const fs::path& dir, const LocalOptions& opts) {
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": not a model folder (expected config.json, safetensors weights and tokenizer files)");
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->opts = opts;
  auto cfg = ConfigFile::load(dir);
  const auto device = to_torch(opts.device);
  const auto dtype = parse_dtype_name(opts.dtype);
  impl->tok = text::SubwordTokenizer::load(dir);
  if (LlamaConfig::supports(cfg)) {
    auto m = Llama::load(dir, device, dtype);
    impl->max_positions = m->config().max_positions;
    for (auto e : m->config().eos_ids) impl->eos.push_back(static_cast<std::int32_t>(e));
    impl->decoder = m;
  } else if (T5Config::supports(cfg)) {
    auto m = T5::load(dir, device, dtype);
    impl->seq2seq = true;
    // Relative positions: no hard limit; prompts keep the tokenizer's model_max_length.
    impl->max_positions = static_cast<std::int64_t>(impl->tok->model_max_length() > 0 && impl->tok->model_max_length() < (1u << 20)
                                                        ? impl->tok->model_max_length() : 0);
    for (auto e : m->config().eos_ids) impl->eos.push_back(static_cast<std::int32_t>(e));
    impl->decoder = m;
  } else {
    throw Error(cfg.source() + ": unsupported architecture \"" + cfg.architecture() + "\" (model_type \"" + cfg.model_type() +
                "\"); local: runs Llama-family (llama, qwen2, mistral) and T5 (t5, mt5) models");
  }
  if (auto e = impl->tok->eos_id(); e && std::find(impl->eos.begin(), impl->eos.end(), *e) == impl->eos.end()) impl->eos.push_back(*e);
  impl->bos = impl->tok->bos_id();
  if (!impl->bos && cfg.has("bos_token_id") && cfg.json()["bos_token_id"].is_number_integer())
    impl->bos = static_cast<std::int32_t>(cfg.integer("bos_token_id"));
  if (const fs::path rf = dir / kReaderFile; fs::exists(rf)) {
    // Every file of the folder is in the model's id (below), this one too: scores cached
    // under the folder's id before it was written are not reused.
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(rf));
    } catch (const std::exception& e) {
      throw Error(rf.string() + ": not JSON (" + e.what() + ")");
    }
    if (!j.is_object() || !j.value("answer_prefix", nlohmann::json()).is_string() ||
        !j.value("eos_after_answer", nlohmann::json()).is_boolean())
      throw Error(rf.string() + R"(: expected {"answer_prefix": STRING, "eos_after_answer": BOOL})");
    impl->answer_prefix = j["answer_prefix"].get<std::string>();
    impl->eos_after_answer = j["eos_after_answer"].get<bool>();
    if (impl->eos_after_answer && !impl->tok->eos_id())
      throw Error(rf.string() + ": eos_after_answer, but the tokenizer names no EOS token");
  } else if (fs::exists(dir / "attune_train.json")) {
    try {
      const auto j = nlohmann::json::parse(read_file(dir / "attune_train.json"));
      impl->reader_without_format = j.is_object() && j.value("method", "") == "lm" && j.contains("data") &&
                                    j["data"].is_string() && j["data"].get<std::string>().rfind("reader examples", 0) == 0;
    } catch (const std::exception&) {
    }
  }
  const std::string hash = model_content_hash(dir).substr(0, 32);
  const fs::path abs = fs::absolute(dir).lexically_normal();
  const std::string name = abs.filename().empty() ? abs.parent_path().filename().string() : abs.filename().string();
  impl->id = "local:" + name + "@" + hash;
  return std::unique_ptr<LocalModel>(new LocalModel(std::move(impl)));
}

void LocalModel::check(const llm::GenerateOptions& g) const {
  llm::validate_generate_options(g);
  const auto& m = *impl_;
  if (!m.seq2seq && m.max_positions > 0 && g.max_new_tokens >= static_cast<std::size_t>(m.max_positions))
    throw FieldError<UsageError>("max_new_tokens",
                                 "max_new_tokens = " + std::to_string(g.max_new_tokens) + ": must be below the context of " +
                                     m.dir.string() + " (" + std::to_string(m.max_positions) +
                                     " positions, the prompt's first token included): at most " +
                                     std::to_string(m.max_positions - 1));
}

std::vector<llm::Generation> LocalModel::generate(std::span<const llm::Prompt> prompts, const llm::GenerateOptions& g) {
  check(g);
  if (prompts.empty()) return {};
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& m = *impl_;
  std::vector<TokenIds> ids;
  for (auto& p : prompts) ids.push_back(m.prompt_ids(p.text, m.seq2seq ? 0 : g.max_new_tokens));
  DecodeOptions o;
  o.max_new_tokens = g.max_new_tokens;
  o.beams = g.beams;
  o.temperature = g.temperature;
  o.top_p = g.top_p;
  o.seed = g.seed;
  o.eos_ids = m.eos;
  o.batch_size = m.opts.batch_size;
  o.no_repeat_ngram = g.no_repeat_ngram;
  if (g.decode == "copy") o.allow = copy_constraint(*m.tok, m.eos, prompts, m.answer_prefix);
  std::vector<TokenIds> without;
  if (g.cad > 0) {
    // Context-aware decoding: each prompt's form without documents beside it; a prompt that
    // has none (its documents were none) decodes as without cad.
    for (auto& p : prompts)
      without.push_back(p.without_documents.empty() || p.without_documents == p.text
                            ? TokenIds{}
                            : m.prompt_ids(p.without_documents, m.seq2seq ? 0 : g.max_new_tokens));
    o.cad = g.cad;
    o.without_documents = &without;
  }
  auto out = models::generate(*m.decoder, ids, o);
  std::vector<llm::Generation> gens;
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto& t = out[i];
    m.stats.generated_tokens += t.size();
    // Copy decoding that ran out of budget or of allowed tokens inside a character: the
    // answer keeps its longest prefix that is a span of the prompt.
    if (g.decode == "copy")
      while (!t.empty() && answer_span(prompts[i].text, m.tok->decode(t, true), m.answer_prefix) != Span::yes) t.pop_back();
    gens.push_back({strip_answer_prefix(m.tok->decode(t, true), m.answer_prefix)});
  }
  m.stats.prompts += prompts.size();
  return gens;
}

std::vector<double> LocalModel::score(std::span<const llm::ScoreRequest> requests) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& m = *impl_;
  if (m.reader_without_format)
    throw Error(m.dir.string() + ": a reader of `train-lm --stage reader` made before reader folders said how they "
                "answer (" + std::string(kReaderFile) + "). It answers after a newline, so a bare target would be scored "
                "in a form it never gives (tens of nats too low). Add " + kReaderFile +
                R"( holding {"answer_prefix": "\n", "eos_after_answer": true} (docs/models.md), or train it again)");
  std::vector<TokenIds> prompts, targets;
  prompts.reserve(requests.size());
  targets.reserve(requests.size());
  for (auto& r : requests) {
    targets.push_back(m.tok->encode(m.answer_prefix + r.target, m.seq2seq).ids);
    if (m.eos_after_answer) targets.back().push_back(*m.tok->eos_id());
    prompts.push_back(m.prompt_ids(r.prompt, m.seq2seq ? 0 : targets.back().size()));
    m.stats.scored_tokens += targets.back().size();
  }
  std::vector<ScoreItem> items;
  for (std::size_t i = 0; i < requests.size(); ++i) items.push_back({&prompts[i], &targets[i]});
  ScoreOptions so;
  so.share_prefix = m.opts.share_prefix;
  so.batch_size = std::max<std::size_t>(1, m.opts.batch_size * 2);
  m.stats.prompts += requests.size();
  return models::score(*m.decoder, items, so);
}

llm::ModelInfo LocalModel::info() const { return {impl_->id}; }

LocalStats LocalModel::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

std::string LocalModel::device() const { return impl_->decoder->device().str(); }

}  // namespace attune::models
