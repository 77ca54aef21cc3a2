#pragma once
// Task metrics exactly as LAMP.md states them, plus retrieval and agreement metrics.
// Inputs are not stripped here unless said; tasks strip outputs and golds first.
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace attune::metrics {

// Fraction of equal pairs (sizes must match; empty -> 0).
double accuracy(const std::vector<int>& pred, const std::vector<int>& gold);
// sklearn f1_score(gold, pred, labels=range(num_labels), average="macro", zero_division=0):
// every label of the fixed list counts, unseen ones as 0; predictions of -1 are wrong.
double macro_f1(const std::vector<int>& pred, const std::vector<int>& gold, int num_labels);
double mae(const std::vector<double>& pred, const std::vector<double>& gold);
double rmse(const std::vector<double>& pred, const std::vector<double>& gold);

struct Prf { double precision = 0, recall = 0, fmeasure = 0; };
// rouge_score without stemming (tokens = text::rouge_tokens). Empty side -> all zero.
Prf rouge1(std::string_view prediction, std::string_view target);
Prf rougeL(std::string_view prediction, std::string_view target);
// SQuAD exact match after squad_normalize: 1 or 0.
double exact_match(std::string_view prediction, std::string_view gold);

// Retrieval: 1 when any relevant id is in the first k of `ranked`, else 0 (per query).
double recall_at_k(const std::vector<std::string>& ranked, const std::unordered_set<std::string>& relevant, std::size_t k);
// Binary-relevance NDCG@k: DCG = sum_{i<k, rel} 1/log2(i+2), ideal over min(k,|relevant|).
double ndcg_at_k(const std::vector<std::string>& ranked, const std::unordered_set<std::string>& relevant, std::size_t k);

double pearson(const std::vector<double>& x, const std::vector<double>& y);  // NaN when a side is constant
// Kendall tau-b (scipy.stats.kendalltau default), handles ties; NaN when a side is constant.
double kendall_tau(const std::vector<double>& x, const std::vector<double>& y);
// |A ∩ B| / |A ∪ B| of the two id sets; 1 when both are empty.
double jaccard(const std::vector<std::string>& a, const std::vector<std::string>& b);

}  // namespace attune::metrics
