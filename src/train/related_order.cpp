// train::related_order: records grouped by a key, each group a chain of BM25 nearest
// neighbours (include/attune/train/lm.h). Torch-free.
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attune/core/error.h"
#include "attune/index/bm25.h"
#include "attune/text/lexical.h"
#include "attune/train/lm.h"

namespace attune::train {

std::vector<std::size_t> related_order(const std::vector<std::string>& keys, const std::vector<std::string>& texts) {
  if (keys.size() != texts.size())
    throw Error("related_order: " + std::to_string(keys.size()) + " keys for " + std::to_string(texts.size()) + " texts");
  // Groups in the order their first record comes; each group's records in input order.
  std::unordered_map<std::string_view, std::size_t> group_of;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto [it, added] = group_of.try_emplace(keys[i], groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  std::vector<std::size_t> out;
  out.reserve(keys.size());
  std::vector<std::vector<std::string_view>> docs;
  std::vector<double> score;
  std::vector<char> used;
  for (const auto& g : groups) {
    if (g.size() <= 2) {
      out.insert(out.end(), g.begin(), g.end());
      continue;
    }
    docs.assign(g.size(), {});
    for (std::size_t j = 0; j < g.size(); ++j) docs[j] = text::bm25_token_views(texts[g[j]]);
    const index::Bm25Okapi bm25(docs);
    used.assign(g.size(), 0);
    std::size_t at = 0;  // the chain starts at the group's first record
    for (std::size_t step = 0; step < g.size(); ++step) {
      used[at] = 1;
      out.push_back(g[at]);
      if (step + 1 == g.size()) break;
      bm25.scores_text_into(texts[g[at]], score);
      // The unused record scoring highest; ties (and a text that shares no word with any
      // of them) go to the earliest, so the chain falls back to input order.
      std::size_t best = g.size();
      for (std::size_t j = 0; j < g.size(); ++j)
        if (!used[j] && (best == g.size() || score[j] > score[best])) best = j;
      at = best;
    }
  }
  return out;
}

}  // namespace attune::train
