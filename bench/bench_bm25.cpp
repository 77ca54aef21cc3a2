// BM25 throughput.
//   ProfileBm25/<n>: one LaMP-style query against a profile of n documents (~40 words):
//     tokenize the profile, build BM25Okapi, score, rank (Retriever "bm25", k = 0).
//     Profiles come from git/commit_subject/dev_questions.json (title + " " + text, pooled
//     across users so that 256 fits), queries from the inputs; synthetic Zipf text when the
//     file is missing.
//   CorpusBm25Search: top-100 search of the 49,626-passage Debian corpus with qa dev
//     synopses as queries (index built once, outside the timed loop).
//   CorpusBm25Build / CorpusBm25Load: building that index from the texts; deserializing it.
// items/s = queries/s (or documents/s for the build).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attune/core/rng.h"
#include "attune/core/strings.h"
#include "attune/index/bm25.h"
#include "attune/index/corpus_index.h"
#include "attune/retrieval/profile_bm25.h"
#include "attune/retrieval/retriever.h"
#include "attune/text/lexical.h"

namespace fs = std::filesystem;
using attune::Document;

namespace {

const fs::path kShared = ATTUNE_SHARED_DIR;

struct ProfileData {
  std::vector<Document> docs;
  std::vector<std::string> queries;
  std::string source;
};

// Deterministic synthetic text: ~40 words drawn from a Zipf(1) vocabulary of 5,000 words.
ProfileData synthetic() {
  ProfileData d;
  d.source = "synthetic Zipf text";
  attune::Rng rng(20240601);
  std::vector<double> cdf;
  double sum = 0;
  for (int r = 1; r <= 5000; ++r) cdf.push_back(sum += 1.0 / r);
  auto word = [&] {
    const double u = rng.uniform() * sum;
    const auto r = std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    return "w" + std::to_string(r);
  };
  auto text = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? " " : "") + word();
    return s;
  };
  for (int i = 0; i < 4096; ++i) d.docs.push_back({"s" + std::to_string(i), "", text(40), {}, {}});
  for (int i = 0; i < 256; ++i) d.queries.push_back(text(30));
  return d;
}

const ProfileData& profile_data() {
  static const ProfileData data = [] {
    const fs::path file = kShared / "data/git/commit_subject/dev_questions.json";
    if (!fs::exists(file)) return synthetic();
    ProfileData d;
    d.source = file.string();
    std::ifstream in(file);
    const auto j = nlohmann::json::parse(in);
    for (const auto& q : j) {
      d.queries.push_back(attune::text_after(q.at("input").get<std::string>(), "description:"));
      for (const auto& p : q.at("profile")) {
        if (d.docs.size() >= 8192) break;
        d.docs.push_back({p.at("id").get<std::string>(), "",
                          p.at("title").get<std::string>() + " " + p.at("text").get<std::string>(),
                          {}, {}});
      }
    }
    return d;
  }();
  return data;
}

void ProfileBm25(benchmark::State& state) {
  const auto& data = profile_data();
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto bm25 = attune::retrieval::make_retriever("bm25", 0);
  std::size_t i = 0;
  std::size_t words = 0;
  for (std::size_t j = 0; j < n; ++j) words += attune::split_whitespace(data.docs[j].text).size();
  for (auto _ : state) {
    const std::size_t start = (i * n) % (data.docs.size() - n);
    std::span<const Document> profile(data.docs.data() + start, n);
    const attune::retrieval::Query q{"q", "", data.queries[i % data.queries.size()]};
    auto r = bm25->rank(q, profile, 0);
    benchmark::DoNotOptimize(r);
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetLabel(data.source == "synthetic Zipf text" ? "synthetic" : "commit_subject dev");
  state.counters["words/doc"] = static_cast<double>(words) / static_cast<double>(n);
}
BENCHMARK(ProfileBm25)->Arg(16)->Arg(64)->Arg(256);

// The same queries against profiles whose statistics are kept (retrieval::ProfileBm25, what
// `attune serve` holds per user): the query is tokenized and its postings scored, then the
// top k are ranked (k = 0: all n documents; the server asks for its call's k), with
// bit-identical scores.
void ProfileBm25Kept(benchmark::State& state) {
  const auto& data = profile_data();
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<attune::retrieval::ProfileBm25> kept;
  for (std::size_t p = 0; p < 16; ++p) {
    const std::size_t start = (p * n) % (data.docs.size() - n);
    kept.emplace_back(std::vector<Document>(data.docs.begin() + static_cast<std::ptrdiff_t>(start),
                                            data.docs.begin() + static_cast<std::ptrdiff_t>(start + n)));
  }
  std::size_t i = 0;
  for (auto _ : state) {
    const attune::retrieval::Query q{"q", "", data.queries[i % data.queries.size()]};
    auto r = kept[i % kept.size()].rank(q, static_cast<std::size_t>(state.range(1)));
    benchmark::DoNotOptimize(r);
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(ProfileBm25Kept)->ArgNames({"n", "k"})->ArgsProduct({{16, 57, 64, 256}, {0, 5}});  // 57: the profile

// The phases of a kept query, apart: mode 0 scores the query's text
// (Bm25Okapi::scores_text_into: split, hash, look up, add), mode 1 only selects the top 5 of
// a scored profile (index::rank_bm25_top), mode 2 builds the Ranking as ProfileBm25::rank
// does around them. The same 16 profiles and queries as ProfileBm25Kept.
void ProfileBm25Phases(benchmark::State& state) {
  const auto& data = profile_data();
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<attune::index::Bm25Okapi> kept;
  std::vector<attune::retrieval::ProfileBm25> profiles;
  for (std::size_t p = 0; p < 16; ++p) {
    const std::size_t start = (p * n) % (data.docs.size() - n);
    std::vector<Document> docs(data.docs.begin() + static_cast<std::ptrdiff_t>(start),
                               data.docs.begin() + static_cast<std::ptrdiff_t>(start + n));
    std::vector<std::vector<std::string_view>> tokens;
    for (const auto& d : docs) tokens.push_back(attune::text::bm25_token_views(d.text));
    kept.emplace_back(std::span<const std::vector<std::string_view>>(tokens));
    profiles.emplace_back(std::move(docs));
  }
  std::vector<std::vector<double>> scored;
  for (std::size_t i = 0; i < data.queries.size(); ++i) kept[i % kept.size()].scores_text_into(data.queries[i], scored.emplace_back());
  std::vector<attune::retrieval::Query> queries;
  for (const auto& q : data.queries) queries.push_back({"q", "", q});
  std::vector<double> scores;
  std::size_t i = 0;
  for (auto _ : state) {
    if (state.range(1) == 0) {
      kept[i % kept.size()].scores_text_into(data.queries[i % data.queries.size()], scores);
      benchmark::DoNotOptimize(scores.data());
    } else if (state.range(1) == 1) {
      auto top = attune::index::rank_bm25_top(scored[i % scored.size()], 5);
      benchmark::DoNotOptimize(top);
    } else {
      auto r = profiles[i % profiles.size()].rank(queries[i % queries.size()], 5);
      benchmark::DoNotOptimize(r);
    }
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetLabel(state.range(1) == 0 ? "scores_text_into" : state.range(1) == 1 ? "rank_bm25_top, k = 5" : "rank, queries made before");
}
BENCHMARK(ProfileBm25Phases)->ArgNames({"n", "phase"})->ArgsProduct({{16, 64}, {0, 1, 2}});

// A user's statistics made ready after a restart (the server's first query for them):
// mode 0 builds them from the n documents' text (tokenising every document), mode 1 reads
// them back from the bytes the store keeps (ProfileBm25::statistics), mode 2 only computes
// the documents' fingerprint (ProfileBm25::fingerprint, which the server checks first).
void ProfileBm25Ready(benchmark::State& state) {
  const auto& data = profile_data();
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<Document> docs(data.docs.begin(), data.docs.begin() + static_cast<std::ptrdiff_t>(n));
  const std::string bytes = attune::retrieval::ProfileBm25(docs).statistics();
  for (auto _ : state) {
    if (state.range(1) == 0) {
      attune::retrieval::ProfileBm25 p(docs);
      benchmark::DoNotOptimize(p);
    } else if (state.range(1) == 1) {
      attune::retrieval::ProfileBm25 p(docs, bytes);
      benchmark::DoNotOptimize(p);
    } else {
      auto fp = attune::retrieval::ProfileBm25::fingerprint(docs);
      benchmark::DoNotOptimize(fp);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetLabel(state.range(1) == 0 ? "built from text" : state.range(1) == 1 ? "read from bytes" : "fingerprint");
  state.counters["bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(ProfileBm25Ready)->ArgNames({"n", "mode"})->ArgsProduct({{64, 256}, {0, 1, 2}});

// ---- corpus --------------------------------------------------------------------------------

const fs::path kCorpus = kShared / "data/debian/debian_corpus.jsonl";
const fs::path kQa = kShared / "data/debian/qa_dev.jsonl";

const std::vector<std::string>& corpus_texts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t;
    std::ifstream in(kCorpus);
    std::string line;
    while (std::getline(in, line)) t.push_back(nlohmann::json::parse(line).at("text"));
    return t;
  }();
  return texts;
}

struct QaDev {
  std::vector<std::string> queries;  // qa phi_q: synopsis after "described as:", no "?"
  std::vector<std::string> gold;     // gold_doc ids
};

const QaDev& qa_dev() {
  static const QaDev qa = [] {
    QaDev d;
    std::ifstream in(kQa);
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      auto s = attune::text_after(j.at("input").get<std::string>(), "described as:");
      if (!s.empty() && s.back() == '?') s.pop_back();
      d.queries.push_back(std::move(s));
      d.gold.push_back(j.at("gold_doc").get<std::string>());
    }
    return d;
  }();
  return qa;
}

const std::vector<std::string>& corpus_ids() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> t;
    std::ifstream in(kCorpus);
    std::string line;
    while (std::getline(in, line)) t.push_back(nlohmann::json::parse(line).at("id"));
    return t;
  }();
  return ids;
}

const attune::index::CorpusIndex& corpus_index() {
  static const auto ix = attune::index::CorpusIndex::build(corpus_texts());
  return ix;
}

// Sanity check of the index (untimed, once): R@5 and R@100 on qa dev. DATA README
// reports 0.78 / 0.93 for a lowercased alphanumeric BM25.
std::pair<double, double> qa_recall() {
  static const std::pair<double, double> r = [] {
    const auto& ix = corpus_index();
    const auto& qa = qa_dev();
    const auto& ids = corpus_ids();
    std::size_t at5 = 0, at100 = 0;
    for (std::size_t i = 0; i < qa.queries.size(); ++i) {
      const auto hits = ix.search(qa.queries[i], 100);
      for (std::size_t h = 0; h < hits.size(); ++h) {
        if (ids[hits[h].doc] == qa.gold[i]) {
          at5 += h < 5;
          ++at100;
          break;
        }
      }
    }
    const double n = static_cast<double>(std::max<std::size_t>(1, qa.queries.size()));
    return std::pair{static_cast<double>(at5) / n, static_cast<double>(at100) / n};
  }();
  return r;
}

void CorpusBm25Search(benchmark::State& state) {
  const auto& ix = corpus_index();  // built before the timed loop
  const auto& queries = qa_dev().queries;
  const auto [r5, r100] = qa_recall();
  state.counters["qa_R@5"] = r5;
  state.counters["qa_R@100"] = r100;
  const auto k = static_cast<std::size_t>(state.range(0));
  // 0: every posting scored, 1: MaxScore, 2: term at a time with a threshold
  const auto prune = static_cast<attune::index::Pruning>(state.range(1));
  std::size_t i = 0, hits = 0, scored = 0, total = 0;
  for (auto _ : state) {
    attune::index::SearchStats st;
    auto r = ix.search(queries[i++ % queries.size()], k, prune, &st);
    hits += r.size();
    scored += st.postings_scored;
    total += st.postings_total;
    benchmark::DoNotOptimize(r);
  }
  state.counters["postings_scored_share"] = static_cast<double>(scored) / static_cast<double>(std::max<std::size_t>(1, total));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["docs"] = static_cast<double>(ix.size());
  state.counters["hits/query"] =
      static_cast<double>(hits) / static_cast<double>(std::max<std::int64_t>(1, state.iterations()));
}

void CorpusBm25Build(benchmark::State& state) {
  const auto& texts = corpus_texts();
  for (auto _ : state) {
    auto ix = attune::index::CorpusIndex::build(texts);
    benchmark::DoNotOptimize(ix);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * texts.size()));
}

void CorpusBm25Load(benchmark::State& state) {
  const std::string blob = corpus_index().serialize();
  for (auto _ : state) {
    auto ix = attune::index::CorpusIndex::deserialize(blob);
    benchmark::DoNotOptimize(ix);
  }
  state.counters["blob_MiB"] = static_cast<double>(blob.size()) / (1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (fs::exists(kCorpus) && fs::exists(kQa)) {
    benchmark::RegisterBenchmark("CorpusBm25Search", CorpusBm25Search)->ArgNames({"k", "prune"})->ArgsProduct({{10, 100}, {0, 1, 2}});
    benchmark::RegisterBenchmark("CorpusBm25Build", CorpusBm25Build)
        ->Iterations(2)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("CorpusBm25Load", CorpusBm25Load)->Unit(benchmark::kMillisecond);
  } else {
    std::cerr << "bench_bm25: no Debian corpus under " << kShared
              << "/data/debian; skipping the corpus benchmarks\n";
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
