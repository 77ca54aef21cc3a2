// A load generator for `attune serve` (bench/RESULTS.md): starts the server in this process
// on a loopback port (a fresh store in a temporary folder), fills it, then runs C client
// threads with keep-alive connections until N requests or T seconds, whichever comes
// first, and prints throughput and latency percentiles. Clients and server share the
// machine's cores, as a load generator on the same host would.
//
//   bench_serve profile  [--users 100] [--docs 200]   per-user BM25 over 200-document profiles
//   bench_serve corpus                                 BM25 over the Debian corpus (49,626 passages)
//   bench_serve feedback                               per-document utilities, acknowledged when committed
//   common: [--requests 20000] [--seconds 30] [--clients 2] [--k 5]
//           [--retriever SPEC]   the tenant's retriever (default bm25), e.g. dense:DIR or
//                                rerank(bm25,20,cross:DIR); a neural spec's documents are
//                                embedded by one warm-up query per user before the timed run
//           [--micro-batch N]    the config's dense_micro_batch (default 16; 1 = off)
//           [--store SPEC]       a PostgreSQL URL or a SQLite file (default: a fresh one); an
//                                earlier run's store is reused with its cached embeddings
//
// Documents and queries come from ../shared/data (commit_subject train profiles and inputs;
// Debian corpus and qa_dev questions); without it the program says so and exits 0.
#include <httplib.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "attune/neural/dense.h"
#include "attune/neural/dense_corpus.h"
#include "attune/serve/http.h"
#include "attune/serve/service.h"
#include "attune/retrieval/first_stage.h"
#include "attune/store/store.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace attune;

namespace {

const std::string kShared = ATTUNE_SHARED_DIR;

struct Args {
  std::string mode;
  std::size_t users = 100, docs = 200, requests = 20000, clients = 2, k = 5, micro_batch = 16;
  std::string retriever = "bm25";
  std::string store;  // "" = a fresh SQLite file
  double seconds = 30;
};

std::vector<json> read_jsonl(const fs::path& p) {
  std::vector<json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto i = static_cast<std::size_t>(std::min<double>(v.size() - 1, p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_serve profile|corpus|feedback [--users N] [--docs N] [--requests N] [--seconds S] "
                         "[--clients C] [--k K] [--store postgresql://...]\n");
    return 2;
  }
  a.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--users") a.users = std::stoul(v);
    else if (f == "--docs") a.docs = std::stoul(v);
    else if (f == "--requests") a.requests = std::stoul(v);
    else if (f == "--seconds") a.seconds = std::stod(v);
    else if (f == "--clients") a.clients = std::stoul(v);
    else if (f == "--k") a.k = std::stoul(v);
    else if (f == "--retriever") a.retriever = v;
    else if (f == "--micro-batch") a.micro_batch = std::stoul(v);
    else if (f == "--store") a.store = v;
    else {
      std::fprintf(stderr, "bench_serve: unknown option %s\n", f.c_str());
      return 2;
    }
  }
  if (a.mode != "profile" && a.mode != "corpus" && a.mode != "feedback") {
    std::fprintf(stderr, "bench_serve: mode is profile, corpus or feedback\n");
    return 2;
  }
  const fs::path subject = kShared + "/data/git/commit_subject/train_questions.json";
  const fs::path corpus = kShared + "/data/debian/debian_corpus.jsonl";
  if (!fs::exists(subject) || !fs::exists(corpus)) {
    std::printf("bench_serve: skipped: needs %s and %s\n", subject.c_str(), corpus.c_str());
    return 0;
  }

  char tmpl[] = "/tmp/attune_bench_serve_XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  int rc = 0;
  {
    // --store: a PostgreSQL URL (the replicas' store) or a SQLite file; default a fresh SQLite
    // file. A store an earlier run filled is reused: its tenant "bench" gets the same documents
    // again, and the dense corpus stage finds that run's embeddings in the store (a warm-up of
    // seconds instead of minutes).
    auto st = a.store.empty() ? store::open_sqlite(dir / "serve.db") : store::open_store(a.store);
    const auto found = st->tenant_find("bench");
    const auto tenant = found ? *found : st->tenant_create("bench");
    const std::string key = serve::new_api_key();
    st->key_add(tenant, serve::key_prefix(key), serve::key_hash(key));
    serve::ServeConfig cfg;
    cfg.retriever = a.retriever;
    cfg.dense_micro_batch = a.micro_batch;
    neural::register_retrievers();
    neural::register_first_stages();
    neural::configure_for_serving(cfg.dense_micro_batch);  // as attune serve does
    serve::Service service(*st, cfg);

    // The data: users' profiles (texts of commit_subject profiles, cycled to --docs each) and
    // their queries, or the Debian corpus and qa questions.
    std::vector<std::string> users, queries;
    const auto t_fill = std::chrono::steady_clock::now();
    if (a.mode == "corpus") {
      std::vector<store::ServeDocument> docs;
      for (const auto& j : read_jsonl(corpus)) docs.push_back({"", j["id"], j["title"].get<std::string>() + " " + j["text"].get<std::string>(), ""});
      service.put_documents(tenant, "", docs);
      for (const auto& j : read_jsonl(kShared + "/data/debian/qa_dev.jsonl")) queries.push_back(j["input"]);
      users.push_back("reader");
    } else {
      std::ifstream in(subject);
      const json ex = json::parse(in);
      std::vector<std::string> texts;
      for (const auto& e : ex) {
        for (const auto& p : e["profile"]) {
          texts.push_back(p.value("title", "") + " " + p.value("text", ""));
          if (texts.size() >= 20000) break;
        }
        queries.push_back(e["input"]);
        if (texts.size() >= 20000 && queries.size() >= 1000) break;
      }
      std::size_t next = 0;
      for (std::size_t u = 0; u < a.users; ++u) {
        std::vector<store::ServeDocument> docs;
        for (std::size_t d = 0; d < a.docs; ++d) docs.push_back({"", "d" + std::to_string(d), texts[next++ % texts.size()], ""});
        users.push_back("u" + std::to_string(u));
        service.put_documents(tenant, users.back(), docs);
      }
    }
    const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fill).count();

    serve::HttpOptions o;
    o.port = 0;
    serve::HttpServer server(service, o);
    server.start();

    // A neural retriever embeds a user's documents at their first query: do it before timing.
    double warm_s = 0;
    if (a.retriever != "bm25" && a.mode != "feedback") {
      const auto t = std::chrono::steady_clock::now();
      for (std::size_t u = 0; u < users.size(); ++u) {
        serve::RetrieveRequest r;
        r.user = users[u];
        r.query = queries[u % queries.size()];
        r.k = a.k;
        service.retrieve(tenant, r);
      }
      // A spec with a corpus first stage of its own builds it in the background (queries get
      // BM25's candidates meanwhile): time only what is served once it is built.
      if (a.mode == "corpus" && retrieval::has_first_stage(a.retriever))
        while (service.counts().corpus_stages_built == 0) {
          if (service.counts().corpus_stage_builds_failed) {
            std::fprintf(stderr, "bench_serve: the corpus first stage of %s failed to build\n", a.retriever.c_str());
            fs::remove_all(dir);
            return 1;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      warm_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    }
    const auto batches0 = neural::query_batch_stats();

    // feedback mode: one request per user to rate.
    std::vector<std::string> request_ids;
    if (a.mode == "feedback")
      for (const auto& u : users) {
        serve::RetrieveRequest r;
        r.user = u;
        r.query = queries[request_ids.size() % queries.size()];
        r.k = a.k;
        const auto out = service.retrieve(tenant, r);
        request_ids.push_back(out.request_id);
      }

    std::atomic<std::size_t> issued{0}, failed{0};
    std::mutex mu;
    std::vector<double> lat;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.seconds);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> clients;
    for (std::size_t c = 0; c < a.clients; ++c)
      clients.emplace_back([&, c] {
        httplib::Client cli("127.0.0.1", server.port());
        cli.set_keep_alive(true);
        cli.set_tcp_nodelay(true);  // as curl and most HTTP clients do: no 40 ms Nagle / delayed-ACK stall
        cli.set_default_headers({{"Authorization", "Bearer " + key}});
        std::vector<double> mine;
        for (;;) {
          const std::size_t i = issued++;
          if (i >= a.requests || std::chrono::steady_clock::now() >= deadline) break;
          json body;
          std::string path = "/v1/retrieve";
          if (a.mode == "feedback") {
            path = "/v1/feedback";
            body = {{"request_id", request_ids[i % request_ids.size()]}, {"reward", static_cast<double>(i % 7) / 7}};
          } else {
            body = {{"user", users[i % users.size()]}, {"query", queries[(i * 7 + c) % queries.size()]}, {"k", a.k}};
          }
          const auto s = std::chrono::steady_clock::now();
          auto res = cli.Post(path, body.dump(), "application/json");
          mine.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
          if (!res || res->status != 200) ++failed;
        }
        std::lock_guard lock(mu);
        lat.insert(lat.end(), mine.begin(), mine.end());
      });
    for (auto& t : clients) t.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::size_t n = lat.size();
    std::vector<double> l = lat;
    const double p50 = percentile(l, 0.50), p90 = percentile(l, 0.90), p99 = percentile(l, 0.99),
                 mx = n ? *std::max_element(lat.begin(), lat.end()) : 0;
    std::printf("bench_serve %s: %zu clients, %zu users x %zu documents%s (filled in %.1f s), k=%zu, retriever %s\n",
                a.mode.c_str(), a.clients, a.mode == "corpus" ? std::size_t{0} : a.users,
                a.mode == "corpus" ? std::size_t{0} : a.docs, a.mode == "corpus" ? ", corpus of 49,626 passages" : "",
                fill_s, a.k, a.retriever.c_str());
    if (warm_s > 0)
      std::printf("  warm-up: one query per user%s in %.2f s (embeds their documents)\n",
                  a.mode == "corpus" && retrieval::has_first_stage(a.retriever) ? " and the corpus first stage's build" : "",
                  warm_s);
    const auto batches = neural::query_batch_stats();
    if (batches.batches > batches0.batches)
      std::printf("  dense queries: %llu in %llu micro-batches (mean %.2f, at most %zu)\n",
                  static_cast<unsigned long long>(batches.queries - batches0.queries),
                  static_cast<unsigned long long>(batches.batches - batches0.batches),
                  static_cast<double>(batches.queries - batches0.queries) /
                      static_cast<double>(batches.batches - batches0.batches),
                  a.micro_batch);
    std::printf("  %zu requests in %.2f s: %.0f requests/s; latency ms p50 %.3f p90 %.3f p99 %.3f max %.3f; %zu failed\n", n,
                secs, static_cast<double>(n) / secs, p50, p90, p99, mx, failed.load());
    rc = failed ? 1 : 0;
    server.stop();
  }
  fs::remove_all(dir);
  return rc;
}
