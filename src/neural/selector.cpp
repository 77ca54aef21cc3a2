#include "attune/neural/selector.h"

#include <cmath>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/retrieval/retriever.h"

namespace attune::neural {

std::shared_ptr<const Selector> Selector::load(const std::filesystem::path& dir, const Device& device) {
  const auto file = dir / "selector.json";
  auto sel = std::make_shared<Selector>();
  std::size_t max_length = 0;
  try {
    const auto cfg = nlohmann::json::parse(read_file(file));
    sel->variant_ = cfg.at("variant").get<std::string>();
    sel->pool_ = cfg.at("pool").get<std::vector<std::string>>();
    sel->k_ = cfg.at("k").get<std::size_t>();
    sel->prompt_max_length_ = cfg.at("prompt_max_length").get<std::size_t>();
    max_length = cfg.at("max_length").get<std::size_t>();
    // Folders written before 2026-11-25 record no "input": they read the prompt alone.
    sel->input_ = models::parse_selector_input(cfg.value("input", std::string("prompt")));
    sel->texts_ = cfg.value("texts", std::string("prompts"));
    if (cfg.contains("pool_bias")) {
      sel->pool_bias_ = cfg.at("pool_bias").get<std::vector<double>>();
      if (sel->pool_bias_.size() != sel->pool_.size())
        throw Error(file.string() + ": pool_bias has " + std::to_string(sel->pool_bias_.size()) + " values for a pool of " +
                    std::to_string(sel->pool_.size()));
      for (double b : sel->pool_bias_)
        if (!std::isfinite(b)) throw Error(file.string() + ": pool_bias holds a value that is not finite");
    }
  } catch (const UsageError& e) {
    throw Error(file.string() + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw Error(file.string() + ": " + e.what());
  }
  if (sel->variant_ != "rspg-pre" && sel->variant_ != "rspg-post")
    throw Error(file.string() + ": variant \"" + sel->variant_ + "\" (expected rspg-pre or rspg-post)");
  if (sel->texts_ != "prompts" && sel->texts_ != "documents")
    throw Error(file.string() + ": texts \"" + sel->texts_ + "\" (expected prompts or documents)");
  sel->model_ = models::SelectorModel::load(dir, device, sel->variant_ == "rspg-post", sel->input_, max_length);
  return sel;
}

// The text a documents-trained selector reads for one member: its top k documents' texts, one per line.
std::string selector_documents_text(std::span<const Document> candidates, const Ranking& ranking, std::size_t k) {
  std::string text;
  for (std::size_t j = 0; j < ranking.size() && j < k; ++j) {
    if (j) text += '\n';
    text += candidates[ranking.indices[j]].text;
  }
  return text;
}

namespace {

class SelectorRetriever final : public retrieval::Retriever {
 public:
  SelectorRetriever(std::string dir, std::shared_ptr<const Selector> sel, std::uint64_t seed) : dir_(std::move(dir)), sel_(std::move(sel)) {
    for (const auto& spec : sel_->pool()) pool_.push_back(retrieval::make_retriever(spec, seed));
  }
  std::string name() const override { return "selector:" + dir_; }

 protected:
  Ranking do_rank(const retrieval::Query& q, std::span<const Document> candidates, std::size_t k) const override {
    std::vector<Ranking> lists;
    std::vector<std::string> texts;
    const std::size_t want = k == 0 ? 0 : std::max(k, sel_->k());
    for (const auto& r : pool_) {
      lists.push_back(r->rank(q, candidates, want));
      texts.push_back(selector_documents_text(candidates, lists.back(), sel_->k()));
    }
    const auto scores = sel_->score(q.text, texts, {});
    std::size_t best = 0;
    for (std::size_t i = 1; i < scores.size(); ++i)
      if (scores[i] > scores[best]) best = i;
    return std::move(lists[best]);
  }

 private:
  std::string dir_;
  std::shared_ptr<const Selector> sel_;
  std::vector<std::unique_ptr<retrieval::Retriever>> pool_;
};

}  // namespace

void register_selector_retriever(const Device& device) {
  retrieval::register_retriever_kind("selector", [device](std::string_view dir, std::uint64_t seed) {
    auto sel = Selector::load(std::string(dir), device);
    if (sel->texts() != "documents")
      throw UsageError("selector " + std::string(dir) + " was trained on the task's prompts (attune train --method " +
                       sel->variant() + "): `attune eval --retrievers DIR` runs it; as a retriever spec only a selector "
                       "trained on documents (attune serve's rspg learner) can rank");
    if (sel->variant() != "rspg-pre")
      throw UsageError("selector " + std::string(dir) + " is " + sel->variant() +
                       ": it reads the reader's outputs, which a retriever does not have");
    return std::make_unique<SelectorRetriever>(std::string(dir), std::move(sel), seed);
  });
}

}  // namespace attune::neural
