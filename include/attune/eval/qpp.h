#pragma once
// Unsupervised query-performance predictors over one retriever's ranked scores, as paper
// 000 (Table 4) uses them to pick a retriever per input: WIG (Zhou & Croft 2007), NQC
// (Shtok et al. 2012), sigma_max and sigma_x% (Pérez-Iglesias & Araujo 2010).
//
// `scores` is the whole ranked list, best first (s_1 >= s_2 >= ...). The candidates a
// query is ranked over (a user's profile) play the collection: C = mean of all N scores
// stands in for the corpus score.
//   WIG      = (1/k) sum_{i<=k} (s_i - C) / sqrt(q)            q = query terms (at least 1)
//   NQC      = std(s_1..s_k) / |C|                              (0 when C = 0)
//   sigma_max = max over n = 1..N of std(s_1..s_n)
//   sigma_x% = std{ s_i : s_i >= (x/100) s_1 }
// with k = min(k, N) and population standard deviations; an empty list gives zeros.
// Retrievers without scores are given them by the caller: reciprocal ranks where
// Retriever::scores_are_ranks() (recency, the corpus first stage), zeros (none, random).
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace attune::eval {

struct Qpp {
  double wig = 0, nqc = 0, sigma_max = 0, sigma_x = 0;
};

Qpp qpp(std::span<const double> scores, std::size_t k, std::size_t query_terms, double x_percent = 50);

// The predictors' names in Qpp's order, with x for sigma_x%: {"wig", "nqc", "sigma_max", "sigma_50%"}.
std::vector<std::string> qpp_names(double x_percent = 50);
inline double qpp_value(const Qpp& q, std::size_t i) {
  return i == 0 ? q.wig : i == 1 ? q.nqc : i == 2 ? q.sigma_max : q.sigma_x;
}

}  // namespace attune::eval
