// attune serve's HTTP API on a loopback port: every endpoint, authentication, isolation
// between users and between tenants (adversarially: guessed ids, another tenant's
// request_id, path tricks), bad input, limits, and a restart that keeps everything.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "attune/feedback/user_feedback.h"
#include "attune/serve/http.h"
#include "attune/serve/openapi.h"
#include "attune/serve/service.h"
#include "attune/retrieval/first_stage.h"
#include "attune/retrieval/retriever.h"
#include <cmath>
#include <fstream>
#include <sstream>
#include "attune/store/store.h"
#include "fixtures/postgres.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace attune;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/attune_serve_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A store with two tenants, a server on a free loopback port, and a client per key.
struct Fixture {
  TempDir dir;
  std::unique_ptr<store::Store> st;
  std::string key_a, key_a2, key_b;
  std::unique_ptr<serve::Service> service;
  std::unique_ptr<serve::HttpServer> server;

  explicit Fixture(serve::ServeConfig cfg = {}) {
    st = store::open_sqlite(dir.path / "serve.db");
    const auto a = st->tenant_create("acme"), b = st->tenant_create("globex");
    key_a = serve::new_api_key();
    key_a2 = serve::new_api_key();
    key_b = serve::new_api_key();
    st->key_add(a, serve::key_prefix(key_a), serve::key_hash(key_a));
    st->key_add(a, serve::key_prefix(key_a2), serve::key_hash(key_a2));
    st->key_add(b, serve::key_prefix(key_b), serve::key_hash(key_b));
    start(std::move(cfg));
  }
  void start(serve::ServeConfig cfg = {}) {
    service = std::make_unique<serve::Service>(*st, std::move(cfg));
    serve::HttpOptions o;
    o.port = 0;
    o.openapi = serve::openapi_document();
    o.extra_metrics = [] { return std::string("# TYPE attune_test_extra gauge\nattune_test_extra 7\n"); };
    server = std::make_unique<serve::HttpServer>(*service, o);
    server->start();
  }
  void stop() {
    server.reset();
    service.reset();
  }
  httplib::Client client(const std::string& key) const {
    httplib::Client c("127.0.0.1", server->port());
    if (!key.empty()) c.set_default_headers({{"Authorization", "Bearer " + key}});
    return c;
  }
};

struct Reply {
  int status = 0;
  json body;
};

Reply call_text(httplib::Client& c, const std::string& method, const std::string& path, const std::string& body) {
  httplib::Result r = method == "GET"    ? c.Get(path)
                      : method == "PUT"  ? c.Put(path, body, "application/json")
                      : method == "DELETE" ? c.Delete(path)
                                         : c.Post(path, body, "application/json");
  EXPECT_TRUE(r) << method << " " << path << ": no reply";
  if (!r) return {};
  Reply out;
  out.status = r->status;
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

template <class C>
Reply call(C&& c, const std::string& method, const std::string& path, const std::string& body = "") {
  return call_text(c, method, path, body);
}
template <class C>
Reply call(C&& c, const std::string& method, const std::string& path, const json& body) {
  return call_text(c, method, path, body.dump());
}
template <class C>
Reply call(C&& c, const std::string& method, const std::string& path, const char* body) {
  return call_text(c, method, path, body);
}

std::set<std::string> ids(const Reply& r) {
  std::set<std::string> out;
  for (const auto& d : r.body["documents"]) out.insert(d["id"].get<std::string>());
  return out;
}

json docs(std::initializer_list<std::pair<const char*, const char*>> list) {
  json a = json::array();
  for (const auto& [id, text] : list) a.push_back({{"id", id}, {"text", text}});
  return {{"documents", a}};
}

}  // namespace

TEST(Serve, HealthMetricsAndTheOpenApiDocumentNeedNoKey) {
  Fixture f;
  EXPECT_EQ(call(f.client(""), "GET", "/healthz").body["status"], "ok");
  const auto doc = call(f.client(""), "GET", "/openapi.json");
  ASSERT_EQ(doc.status, 200);
  EXPECT_EQ(doc.body["openapi"].get<std::string>().substr(0, 2), "3.");
  // Every route the server answers is in the document.
  for (const char* p : {"/healthz", "/metrics", "/v1/retrieve", "/v1/feedback", "/v1/users/{user}/documents",
                        "/v1/users/{user}/documents/{id}", "/v1/users/{user}", "/v1/corpus/documents",
                        "/v1/corpus/documents/{id}", "/v1/rerank", "/search"})
    EXPECT_TRUE(doc.body["paths"].contains(p)) << p;
  for (const char* p : {"/v1/users/{user}/documents", "/v1/users/{user}/documents/{id}", "/v1/corpus/documents",
                        "/v1/corpus/documents/{id}"})
    EXPECT_TRUE(doc.body["paths"][p].contains("get")) << p;
  auto r = f.client("").Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("attune_retrieves_total 0"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("\nattune_test_extra 7\n"), std::string::npos) << r->body;  // HttpOptions::extra_metrics
}

// What was stored reads back: a page at a time in id order, or one document by id; only
// the tenant's own, and a user's only under that user.
TEST(Serve, DocumentsReadBackByPageInIdOrderAndOneById) {
  Fixture f;
  auto a = f.client(f.key_a);
  json corpus = json::array();
  for (int i = 9; i >= 0; --i) corpus.push_back({{"id", "c" + std::to_string(i)}, {"text", "passage " + std::to_string(i)}});
  ASSERT_EQ(call(a, "POST", "/v1/corpus/documents", json{{"documents", corpus}}).status, 200);
  ASSERT_EQ(call(a, "PUT", "/v1/users/ann/documents",
                 json{{"documents", {{{"id", "n2"}, {"text", "two"}, {"date", "2024-05-01"}}, {{"id", "n1"}, {"text", "one"}}}}})
                .status, 200);
  // Three pages of 4, 4 and 2.
  std::vector<std::string> seen;
  std::string after;
  for (int page = 0; page < 3; ++page) {
    const auto r = call(a, "GET", "/v1/corpus/documents?limit=4" + (after.empty() ? "" : "&after=" + after));
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_EQ(r.body["total"], 10);
    for (const auto& d : r.body["documents"]) seen.push_back(d["id"]);
    if (page < 2) {
      ASSERT_TRUE(r.body["next"].is_string()) << r.body.dump();
      after = r.body["next"];
    } else {
      EXPECT_TRUE(r.body["next"].is_null()) << r.body.dump();
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"}));
  auto r = call(a, "GET", "/v1/corpus/documents/c3");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, (json{{"id", "c3"}, {"text", "passage 3"}}));
  r = call(a, "GET", "/v1/users/ann/documents");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["total"], 2);
  EXPECT_EQ(r.body["documents"][0]["id"], "n1");
  EXPECT_EQ(r.body["documents"][1], (json{{"id", "n2"}, {"text", "two"}, {"date", "2024-05-01"}}));
  EXPECT_TRUE(r.body["next"].is_null());
  EXPECT_EQ(call(a, "GET", "/v1/users/ann/documents/n2").body["date"], "2024-05-01");
  // Not found: another user's id, a corpus id under a user, a user with nothing.
  EXPECT_EQ(call(a, "GET", "/v1/users/bob/documents/n2").status, 404);
  EXPECT_EQ(call(a, "GET", "/v1/users/ann/documents/c3").status, 404);
  EXPECT_EQ(call(a, "GET", "/v1/corpus/documents/n1").status, 404);
  r = call(a, "GET", "/v1/users/nobody/documents");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["total"], 0);
  EXPECT_TRUE(r.body["documents"].empty());
  // Another tenant sees none of it; no key, nothing at all.
  auto b = f.client(f.key_b);
  EXPECT_EQ(call(b, "GET", "/v1/corpus/documents").body["total"], 0);
  EXPECT_EQ(call(b, "GET", "/v1/corpus/documents/c3").status, 404);
  EXPECT_EQ(call(b, "GET", "/v1/users/ann/documents").body["total"], 0);
  EXPECT_EQ(call(f.client(""), "GET", "/v1/corpus/documents").status, 401);
  // Bad paging.
  for (const char* q : {"limit=0", "limit=x", "limit=1001", "limit=", "limit=-1"}) {
    r = call(a, "GET", std::string("/v1/corpus/documents?") + q);
    EXPECT_EQ(r.status, 400) << q;
    EXPECT_EQ(r.body["error"]["field"], "limit") << q;
  }
  // A deleted document is gone from both.
  ASSERT_EQ(call(a, "DELETE", "/v1/corpus/documents/c3").status, 200);
  EXPECT_EQ(call(a, "GET", "/v1/corpus/documents/c3").status, 404);
  EXPECT_EQ(call(a, "GET", "/v1/corpus/documents?limit=100").body["total"], 9);
}

TEST(Serve, EveryV1CallNeedsAnActiveKeyOfTheTenant) {
  Fixture f;
  for (const auto& key : std::vector<std::string>{"", "atk_0000000000000000000000000000000000000000", f.key_a + "x"}) {
    const auto r = call(f.client(key), "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}});
    EXPECT_EQ(r.status, 401) << key;
    EXPECT_EQ(r.body["error"]["field"], "Authorization");
  }
  httplib::Client basic("127.0.0.1", f.server->port());
  basic.set_default_headers({{"Authorization", "Basic " + f.key_a}});
  EXPECT_EQ(call(basic, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}}).status, 401);
  EXPECT_EQ(call(f.client(f.key_a), "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}}).status, 200);
  // A revoked key stops working at once; the tenant's other key goes on.
  ASSERT_EQ(f.st->key_revoke("", serve::key_hash(f.key_a)), 1u);
  EXPECT_EQ(call(f.client(f.key_a), "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}}).status, 401);
  EXPECT_EQ(call(f.client(f.key_a2), "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}}).status, 200);
  EXPECT_EQ(call(f.client(""), "GET", "/search?query=x").status, 401);
}

TEST(Serve, AUserIsServedOwnDocumentsAndTheCorpusNeverAnotherUsersOrTenants) {
  Fixture f;
  auto a = f.client(f.key_a), b = f.client(f.key_b);
  ASSERT_EQ(call(a, "PUT", "/v1/users/ann/documents",
                 docs({{"a1", "ann fixes the parser crash"}, {"a2", "ann writes release notes"}})).status, 200);
  ASSERT_EQ(call(a, "PUT", "/v1/users/bob/documents", docs({{"b1", "bob secret parser crash fix"}})).status, 200);
  ASSERT_EQ(call(a, "POST", "/v1/corpus/documents", docs({{"c1", "how to report a parser crash"}})).status, 200);
  ASSERT_EQ(call(b, "PUT", "/v1/users/ann/documents", docs({{"x1", "globex ann parser crash"}})).status, 200);

  // bob's document matches ann's query word for word: it is still never served to ann.
  auto r = call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "bob secret parser crash fix"}, {"k", 10}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(ids(r), (std::set<std::string>{"a1", "a2", "c1"}));
  EXPECT_FALSE(r.body["request_id"].get<std::string>().empty());
  EXPECT_EQ(r.body["model_version"], "bm25@v1");
  for (const auto& d : r.body["documents"]) EXPECT_EQ(d["source"], d["id"] == "c1" ? "corpus" : "user");
  // Only the corpus / only the user's own documents.
  EXPECT_EQ(ids(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "parser crash"}, {"sources", {"corpus"}}})),
            std::set<std::string>{"c1"});
  EXPECT_EQ(ids(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "parser crash"}, {"sources", {"user"}}})),
            (std::set<std::string>{"a1", "a2"}));
  // Tenant globex's ann is another person: she sees her document only, and none of acme's corpus.
  EXPECT_EQ(ids(call(b, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "parser crash how to report"}})),
            std::set<std::string>{"x1"});
  // Guessed and tricky user names are just other (empty) users.
  for (const char* u : {"bob ", "BOB", "../bob", "acme/bob", "1/bob", "2/ann"})
    EXPECT_TRUE(ids(call(a, "POST", "/v1/retrieve", json{{"user", u}, {"query", "bob secret"}, {"sources", {"user"}}})).empty())
        << u;
  // A path that tries to climb out of a user: no such route, or a user named like that.
  EXPECT_EQ(call(a, "DELETE", "/v1/users/ann%2F..%2Fbob").status, 404);
  EXPECT_EQ(call(a, "DELETE", "/v1/users/..").status, 200);  // a user named ".." (had nothing)
  EXPECT_EQ(ids(call(a, "POST", "/v1/retrieve", json{{"user", "bob"}, {"query", "secret"}, {"sources", {"user"}}})),
            std::set<std::string>{"b1"});
  // Globex cannot delete acme's documents, by guessing their ids.
  EXPECT_EQ(call(b, "DELETE", "/v1/users/bob/documents/b1").status, 404);
  EXPECT_EQ(call(b, "DELETE", "/v1/corpus/documents/c1").status, 404);
  EXPECT_EQ(ids(call(a, "POST", "/v1/retrieve", json{{"user", "bob"}, {"query", "secret"}})),
            (std::set<std::string>{"b1"}));
}

TEST(Serve, FeedbackNamesItsRequestAndOnlyServedDocumentsAndStaysWithItsTenant) {
  Fixture f;
  auto a = f.client(f.key_a), b = f.client(f.key_b);
  // Three documents: with two, rank_bm25's idf of a word in one of them is 0 and all tie.
  call(a, "PUT", "/v1/users/ann/documents",
       docs({{"a1", "fix the parser crash"}, {"a2", "release notes"}, {"a3", "update the manual"}}));
  const auto r = call(a, "POST", "/v1/retrieve",
                      json{{"user", "ann"}, {"query", "parser crash"}, {"k", 1}, {"task", "commit_subject"}});
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(ids(r), std::set<std::string>{"a1"});
  const std::string rid = r.body["request_id"];

  auto fb = call(a, "POST", "/v1/feedback", json{{"request_id", rid}, {"utilities", {{"a1", 1.0}}}, {"reward", 0.5}});
  ASSERT_EQ(fb.status, 200) << fb.body.dump();
  EXPECT_EQ(fb.body["records"], 2);
  // The output is scored with the request's task (commit_subject: ROUGE-1 as reward).
  fb = call(a, "POST", "/v1/feedback",
            json{{"request_id", rid}, {"output", "fix the parser crash"}, {"reference", "fix the parser crash"}});
  ASSERT_EQ(fb.status, 200) << fb.body.dump();
  auto st = f.st->feedback_of(*f.st->tenant_find("acme"));
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[2].kind, "output");
  EXPECT_DOUBLE_EQ(st[2].value, 1.0);

  // a2 was not served by this request; an unknown request; another tenant's key on this request.
  fb = call(a, "POST", "/v1/feedback", json{{"request_id", rid}, {"utilities", {{{"id", "a2"}, {"utility", 1}}}}});
  EXPECT_EQ(fb.status, 400);
  EXPECT_EQ(fb.body["error"]["field"], "utilities[0].id");
  EXPECT_EQ(call(a, "POST", "/v1/feedback", json{{"request_id", "req_guess"}, {"reward", 1}}).status, 404);
  EXPECT_EQ(call(b, "POST", "/v1/feedback", json{{"request_id", rid}, {"reward", 1}}).status, 404);
  // Nothing of a refused call is written.
  fb = call(a, "POST", "/v1/feedback", json{{"request_id", rid}, {"utilities", {{"a1", 1.0}, {"zz", 0.0}}}});
  EXPECT_EQ(fb.status, 400);
  EXPECT_EQ(f.st->feedback_of(*f.st->tenant_find("acme")).size(), 3u);
  EXPECT_TRUE(f.st->feedback_of(*f.st->tenant_find("globex")).empty());
  // A request without a task has no metric for an output.
  const auto r2 = call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "parser"}});
  fb = call(a, "POST", "/v1/feedback", json{{"request_id", r2.body["request_id"]}, {"output", "x"}, {"reference", "y"}});
  EXPECT_EQ(fb.status, 400);
  EXPECT_EQ(fb.body["error"]["field"], "output");
  EXPECT_EQ(call(a, "POST", "/v1/feedback", json{{"request_id", rid}}).status, 400);  // names nothing
}

TEST(Serve, DeletingAUserRemovesEverythingDerivedFromThem) {
  Fixture f;
  auto a = f.client(f.key_a);
  call(a, "PUT", "/v1/users/ann/documents", docs({{"a1", "parser crash"}}));
  call(a, "PUT", "/v1/users/bob/documents", docs({{"b1", "parser crash"}}));
  const auto r = call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "parser"}});
  ASSERT_EQ(call(a, "POST", "/v1/feedback", json{{"request_id", r.body["request_id"]}, {"reward", 1}}).status, 200);
  const auto d = call(a, "DELETE", "/v1/users/ann");
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(d.body["rows"], 4);  // 1 document, 1 request, 1 feedback record, the stored BM25 statistics
  EXPECT_TRUE(ids(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "parser"}})).empty());
  EXPECT_EQ(call(a, "POST", "/v1/feedback", json{{"request_id", r.body["request_id"]}, {"reward", 1}}).status, 404);
  EXPECT_EQ(ids(call(a, "POST", "/v1/retrieve", json{{"user", "bob"}, {"query", "parser"}})), std::set<std::string>{"b1"});
  // One document: replace, then delete.
  EXPECT_EQ(call(a, "PUT", "/v1/users/bob/documents/b1", json{{"text", "release notes"}}).status, 200);
  const auto now = call(a, "POST", "/v1/retrieve", json{{"user", "bob"}, {"query", "parser"}});
  ASSERT_EQ(now.body["documents"].size(), 1u);
  EXPECT_EQ(now.body["documents"][0]["text"], "release notes");
  EXPECT_EQ(call(a, "DELETE", "/v1/users/bob/documents/b1").status, 200);
  EXPECT_EQ(call(a, "DELETE", "/v1/users/bob/documents/b1").status, 404);
}

TEST(Serve, BadInputIsAJsonErrorNamingTheFieldAndChangesNothing) {
  serve::ServeConfig cfg;
  cfg.limits.max_k = 20;
  cfg.limits.max_documents_per_call = 3;
  cfg.limits.max_body_bytes = 4096;
  Fixture f(cfg);
  auto a = f.client(f.key_a);
  const auto expect = [&](const Reply& r, int status, const std::string& field) {
    EXPECT_EQ(r.status, status) << r.body.dump();
    ASSERT_TRUE(r.body.contains("error")) << r.body.dump();
    if (!field.empty()) {
      EXPECT_EQ(r.body["error"]["field"], field) << r.body.dump();
    }
    EXPECT_FALSE(r.body["error"]["message"].get<std::string>().empty());
  };
  expect(call(a, "POST", "/v1/retrieve", std::string("{\"user\": \"ann\", ")), 400, "body");
  expect(call(a, "POST", "/v1/retrieve", std::string("{\"user\": \"a\xff\", \"query\": \"x\"}")), 400, "body");
  expect(call(a, "POST", "/v1/retrieve", std::string("[1, 2]")), 400, "body");
  expect(call(a, "POST", "/v1/retrieve", json{{"query", "x"}}), 400, "user");
  expect(call(a, "POST", "/v1/retrieve", json{{"user", 7}, {"query", "x"}}), 400, "user");
  expect(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}}), 400, "query");
  expect(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}, {"k", 0}}), 400, "k");
  expect(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}, {"k", -3}}), 400, "k");
  expect(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}, {"k", 21}}), 400, "k");
  expect(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "x"}, {"task", "lamp9"}}), 400, "task");
  expect(call(a, "POST", "/v1/retrieve", json{{"user", "a\tb"}, {"query", "x"}}), 400, "user");
  expect(call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", std::string(5000, 'q')}}), 413, "body");
  expect(call(a, "PUT", "/v1/users/ann/documents", docs({{"1", "a"}, {"2", "b"}, {"3", "c"}, {"4", "d"}})), 400,
         "documents");
  expect(call(a, "PUT", "/v1/users/ann/documents", docs({{"1", "a"}, {"1", "b"}})), 400, "documents[1].id");
  expect(call(a, "PUT", "/v1/users/ann/documents", json{{"documents", {{{"id", "1"}}}}}), 400, "documents[0].text");
  expect(call(a, "PUT", "/v1/users/ann/documents", json{{"documents", {{{"id", "1"}, {"text", "a"}, {"date", "May"}}}}}),
         400, "documents[0].date");
  expect(call(a, "POST", "/v1/feedback", json{{"request_id", "r"}, {"reward", "high"}}), 400, "reward");
  expect(call(a, "GET", "/v2/nothing"), 404, "");
  // A refused batch writes none of its documents.
  EXPECT_TRUE(f.st->documents_of(*f.st->tenant_find("acme")).empty());
}

TEST(Serve, AKeyOverItsRateIsAnswered429) {
  serve::ServeConfig cfg;
  cfg.limits.requests_per_second = 0.5;
  cfg.limits.burst = 2;
  Fixture f(cfg);
  const json q{{"user", "ann"}, {"query", "x"}};
  EXPECT_EQ(call(f.client(f.key_a), "POST", "/v1/retrieve", q).status, 200);
  EXPECT_EQ(call(f.client(f.key_a), "POST", "/v1/retrieve", q).status, 200);
  EXPECT_EQ(call(f.client(f.key_a), "POST", "/v1/retrieve", q).status, 429);
  EXPECT_EQ(call(f.client(f.key_b), "POST", "/v1/retrieve", q).status, 200);  // per key
}

TEST(Serve, RerankAndSearchForExistingClients) {
  Fixture f;
  auto a = f.client(f.key_a);
  auto r = call(a, "POST", "/v1/rerank",
                json{{"query", "parser crash"}, {"documents", {"release notes", {{"text", "parser crash fixed"}}, "crash"}},
                     {"top_n", 2}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body["results"].size(), 2u);
  EXPECT_EQ(r.body["results"][0]["index"], 1);
  call(a, "POST", "/v1/corpus/documents", docs({{"c1", "parser crash report"}, {"c2", "release notes"}}));
  call(a, "PUT", "/v1/users/ann/documents", docs({{"a1", "parser crash of ann"}}));
  r = call(a, "GET", "/search?query=parser%20crash&k=5");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body["topk"].size(), 1u);  // the corpus only: never a user's document
  EXPECT_EQ(r.body["topk"][0]["pid"], "c1");
  EXPECT_EQ(r.body["topk"][0]["rank"], 1);
  EXPECT_EQ(call(a, "GET", "/search?query=x&k=abc").status, 400);
  for (const char* k : {"0", "-1", "101", "", "5x", " 5"}) {
    const auto bad_k = call(a, "GET", std::string("/search?query=x&k=") + k);
    EXPECT_EQ(bad_k.status, 400) << k;
    EXPECT_EQ(bad_k.body["error"]["field"], "k") << k;
  }
}

TEST(Serve, ARestartedServerHasEverythingThatWasAcknowledged) {
  Fixture f;
  call(f.client(f.key_a), "PUT", "/v1/users/ann/documents", docs({{"a1", "parser crash"}}));
  call(f.client(f.key_a), "POST", "/v1/corpus/documents", docs({{"c1", "parser report"}}));
  const auto r = call(f.client(f.key_a), "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "parser"}});
  ASSERT_EQ(call(f.client(f.key_a), "POST", "/v1/feedback", json{{"request_id", r.body["request_id"]}, {"reward", 1}}).status,
            200);
  f.stop();
  f.start();
  EXPECT_EQ(ids(call(f.client(f.key_a), "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "parser"}})),
            (std::set<std::string>{"a1", "c1"}));
  EXPECT_EQ(call(f.client(f.key_a), "POST", "/v1/feedback", json{{"request_id", r.body["request_id"]}, {"reward", 0}}).status,
            200);
  EXPECT_EQ(f.st->feedback_of(*f.st->tenant_find("acme")).size(), 2u);
}

// A user's BM25 statistics are kept in the store: a restarted server scores with them
// without tokenising a document (the same ranking, bit for bit), a change to the documents
// removes them with the change and the next query writes them again, and deleting the user
// removes them.
TEST(Serve, AUsersBm25StatisticsAreKeptInTheStoreAndGoWithTheirDocuments) {
  Fixture f;
  auto c = f.client(f.key_a);
  call(c, "PUT", "/v1/users/ann/documents",
       docs({{"a1", "parser crash on empty input"}, {"a2", "the network server times out"}, {"a3", "parser fix for the crash"}}));
  const json q = {{"user", "ann"}, {"query", "parser crash"}, {"k", 3}, {"sources", {"user"}}};
  const auto first = call(c, "POST", "/v1/retrieve", q);
  ASSERT_EQ(first.status, 200);
  const auto tenant = *f.st->tenant_find("acme");
  const auto key = store::profile_stats_blob_key(tenant, "ann");
  ASSERT_TRUE(f.st->blob_get(key).has_value());
  EXPECT_EQ(f.service->counts().profile_stats_built, 1u);
  f.stop();
  f.start();
  auto c2 = f.client(f.key_a);
  const auto again = call(c2, "POST", "/v1/retrieve", q);
  EXPECT_EQ(f.service->counts().profile_stats_loaded, 1u);
  EXPECT_EQ(f.service->counts().profile_stats_built, 0u);
  ASSERT_EQ(again.body["documents"].size(), first.body["documents"].size());
  for (std::size_t i = 0; i < first.body["documents"].size(); ++i) {
    EXPECT_EQ(again.body["documents"][i]["id"], first.body["documents"][i]["id"]);
    EXPECT_EQ(again.body["documents"][i]["score"].get<double>(), first.body["documents"][i]["score"].get<double>());
  }
  // Damaged bytes behind a matching fingerprint are built again, not served.
  const auto stored = *f.st->blob_get(key);
  f.st->blob_put(key, stored.substr(0, 64) + "garbage");
  f.stop();
  f.start();
  EXPECT_EQ(call(f.client(f.key_a), "POST", "/v1/retrieve", q).body["documents"], first.body["documents"]);
  EXPECT_EQ(f.service->counts().profile_stats_built, 1u);
  EXPECT_EQ(*f.st->blob_get(key), stored);
  // A change removes them; the next query builds and stores the new ones.
  call(f.client(f.key_a), "PUT", "/v1/users/ann/documents", docs({{"a4", "parser crash again"}}));
  EXPECT_FALSE(f.st->blob_get(key).has_value());
  const auto changed = call(f.client(f.key_a), "POST", "/v1/retrieve", q);
  EXPECT_EQ(changed.body["documents"][0]["id"], "a4");
  ASSERT_TRUE(f.st->blob_get(key).has_value());
  EXPECT_NE(*f.st->blob_get(key), stored);
  EXPECT_NE(f.st->blob_get(key)->find("again"), std::string::npos);  // the new document's terms
  ASSERT_EQ(call(f.client(f.key_a), "DELETE", "/v1/users/ann/documents/a4").status, 200);
  EXPECT_FALSE(f.st->blob_get(key).has_value());
  call(f.client(f.key_a), "POST", "/v1/retrieve", q);
  ASSERT_TRUE(f.st->blob_get(key).has_value());
  EXPECT_EQ(f.st->blob_get(key)->find("again"), std::string::npos);  // the deleted document's are gone
  ASSERT_EQ(call(f.client(f.key_a), "DELETE", "/v1/users/ann").status, 200);
  EXPECT_FALSE(f.st->blob_get(key).has_value());
  const auto metrics = f.client("").Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("attune_profile_stats_loaded_total"), std::string::npos);
}

TEST(Serve, ConfigFileErrorsNameTheKey) {
  TempDir dir;
  const auto write = [&](const std::string& text) {
    const auto p = dir.path / "c.json";
    std::ofstream(p) << text;
    return p;
  };
  const auto cfg = serve::read_config(write(R"({"retriever": "bm25", "tenants": {"acme": {"retriever": "recency"}},
                                                "limits": {"max_k": 7, "requests_per_second": 2.5},
                                                "dense_micro_batch": 4, "sync_seconds": 0.5,
                                                "corpus_stage_background": false,
                                                "learn": {"lease_seconds": 6}})"));
  EXPECT_FALSE(cfg.corpus_stage_background);
  EXPECT_EQ(cfg.tenants.at("acme").retriever, "recency");
  EXPECT_EQ(cfg.dense_micro_batch, 4u);
  EXPECT_EQ(cfg.limits.max_k, 7u);
  EXPECT_DOUBLE_EQ(cfg.limits.requests_per_second, 2.5);
  EXPECT_DOUBLE_EQ(cfg.sync_seconds, 0.5);
  EXPECT_DOUBLE_EQ(cfg.learn.lease_seconds, 6);
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"retriver": "bm25"})", "retriver"},
           {R"({"limits": {"max_k": 0}})", "limits.max_k"},
           {R"({"dense_micro_batch": 0})", "dense_micro_batch"},
           {R"({"dense_micro_batch": 5000})", "dense_micro_batch"},
           {R"({"dense_micro_batch": "16"})", "dense_micro_batch"},
           {R"({"limits": {"max_kk": 3}})", "limits.max_kk"},
           {R"({"tenants": {"acme": {"retriever": 3}}})", "tenants.acme.retriever"},
           {R"j({"retriever": "rerank(bm25)"})j", "retriever"},
           {R"({"retrievers": ["bm25", 3]})", "retrievers[1]"},
           {R"({"agents": {"../x": {}}})", "agents.../x"},
           {R"({"agents": {"qa": {"task": "no-such-task"}}})", "agents.qa.task"},
           {R"({"agents": {"qa": {"llm": "x"}}})", "agents.qa.llm"},
           {R"({"tenants": {"acme": {"agents": {"qa": {"retriever": ""}}}}})", "tenants.acme.agents.qa.retriever"},
           {R"({"learn": {"method": "rspg-post"}})", "learn.method"},
           {R"({"learn": {"pool": "bm25"}})", "learn.pool"},
           {R"({"learn": {"pool": ["bm25"]}})", "learn.pool"},
           {R"({"learn": {"pool": ["bm25", " bm25"]}})", "learn.pool"},
           {R"({"learn": {"pool": ["bm25", ""]}})", "learn.pool"},
           {R"({"learn": {"selector_k": 0}})", "learn.selector_k"},
           {R"({"sync_seconds": -1})", "sync_seconds"},
           {R"({"sync_seconds": "1"})", "sync_seconds"},
           {R"({"learn": {"lease_seconds": 0}})", "learn.lease_seconds"},
           {R"({"learn": {"lease_secs": 5}})", "learn.lease_secs"},
           {R"({"personal": {"encoder": "enc", "threshold": 1.5}})", "personal.threshold"},
           {R"({"personal": {"encoder": "enc", "threshold": "0.5"}})", "personal.threshold"},
           {R"({"personal": {"threshold": 0.5}})", "personal.threshold"},
           {R"({"personal": {"encoder": ""}})", "personal.encoder"},
           {R"({"personal": {"encodr": "enc"}})", "personal.encodr"},
           {R"({"personal": 0.5})", "personal"},
           {R"({"change_log_keep": -1})", "change_log_keep"},
           {R"({"change_log_keep": "10"})", "change_log_keep"},
           {R"({"corpus_stage_background": "yes"})", "corpus_stage_background"},
           {R"({"corpus_stage_background": 1})", "corpus_stage_background"}}) {
    try {
      serve::read_config(write(text));
      ADD_FAILURE() << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  EXPECT_DOUBLE_EQ(serve::read_config(write(R"({"personal": {"encoder": "enc"}})")).personal.threshold, 0.5);  // paper 004's
  // A bad spec stops the service at start.
  serve::ServeConfig bad;
  bad.retriever = "bm26";
  auto st = store::open_sqlite(dir.path / "s.db");
  EXPECT_THROW(serve::Service(*st, bad), UsageError);
  // So does a personal encoder whose scores are not cosines, or that is not there.
  const auto refused = [&](const std::string& encoder, const std::string& says) {
    serve::ServeConfig c;
    c.personal.encoder = encoder;
    try {
      serve::Service service(*st, c);
      ADD_FAILURE() << encoder << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused((dir.path / "absent").string(), "not a folder");
  std::filesystem::create_directories(dir.path / "dot");
  refused((dir.path / "dot").string(), "cannot read");
  std::ofstream(dir.path / "dot" / "modules.json")
      << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])";
  refused((dir.path / "dot").string(), "does not L2-normalise");
}

namespace {

// Cosine similarity of the two texts' sets of words: a similarity whose values the test
// can work out, standing in for personal.encoder's (a dense retriever over a normalising
// encoder; the CLI test Learning.ServeAdmitsPersonalDocumentsAboveTheThreshold runs that one).
struct WordCosine final : retrieval::Retriever {
  std::string name() const override { return "word-cosine"; }

 protected:
  Ranking do_rank(const retrieval::Query& q, std::span<const Document> docs, std::size_t k) const override {
    const auto words = [](const std::string& t) {
      std::set<std::string> w;
      std::istringstream in(t);
      for (std::string x; in >> x;) w.insert(x);
      return w;
    };
    const auto qw = words(q.text);
    std::vector<std::pair<double, std::size_t>> scored;
    for (std::size_t i = 0; i < docs.size(); ++i) {
      const auto dw = words(docs[i].text);
      std::size_t both = 0;
      for (const auto& x : dw) both += qw.count(x);
      scored.push_back({qw.empty() || dw.empty() ? 0.0 : both / std::sqrt(double(qw.size()) * double(dw.size())), i});
    }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    Ranking r;
    for (std::size_t i = 0; i < std::min(k, scored.size()); ++i) {
      r.indices.push_back(scored[i].second);
      r.scores.push_back(scored[i].first);
    }
    return r;
  }
};

}  // namespace

// Paper 004's retrieval for a user with personal feedback: the shared corpus plus those of
// the user's documents whose similarity to the query reaches personal.threshold (0.5). A
// call over the user's documents alone keeps all of them; another user gets none.
TEST(Serve, PersonalDocumentsBesideTheCorpusMustReachTheSimilarityThreshold) {
  serve::ServeConfig cfg;
  cfg.personal.threshold = 0.5;
  Fixture f(cfg);
  f.service->set_personal_similarity(std::make_shared<WordCosine>());
  auto a = f.client(f.key_a);
  ASSERT_EQ(call(a, "POST", "/v1/corpus/documents",
                 docs({{"c1", "zstd compresses archives quickly"},
                       {"c2", "gzip compresses files"},
                       {"c3", "tomato plants need sun"}})).status, 200);
  // cosines with the query "zstd compression level for backups": p-high 3/sqrt(5*4) = 0.67,
  // p-low 1/sqrt(5*4) = 0.22, p-none 0
  ASSERT_EQ(call(a, "PUT", "/v1/users/ann/documents",
                 docs({{"p-high", "zstd compression level preferred"},
                       {"p-low", "zstd is what I use"},
                       {"p-none", "my garden has tomato plants"}})).status, 200);
  const auto retrieve = [&](const std::string& user, json extra = json::object()) {
    json body = {{"user", user}, {"query", "zstd compression level for backups"}, {"k", 20}};
    for (const auto& [k, v] : extra.items()) body[k] = v;
    const auto r = call(f.client(f.key_a), "POST", "/v1/retrieve", body);
    EXPECT_EQ(r.status, 200) << r.body.dump();
    return ids(r);
  };
  // (the corpus's first stage, BM25, finds c1 alone)
  EXPECT_EQ(retrieve("ann"), (std::set<std::string>{"p-high", "c1"}));
  EXPECT_EQ(retrieve("bob"), (std::set<std::string>{"c1"}));
  // The user's documents alone: no threshold.
  EXPECT_EQ(retrieve("ann", {{"sources", json::array({"user"})}}), (std::set<std::string>{"p-high", "p-low", "p-none"}));
  const auto metrics = f.client("").Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("attune_personal_documents_admitted_total 1\n"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("attune_personal_documents_below_threshold_total 2\n"), std::string::npos);

  // A threshold of 0.2 admits p-low too; without a similarity every document is a candidate.
  f.stop();
  cfg.personal.threshold = 0.2;
  f.start(cfg);
  f.service->set_personal_similarity(std::make_shared<WordCosine>());
  EXPECT_EQ(retrieve("ann"), (std::set<std::string>{"p-high", "p-low", "c1"}));
  f.stop();
  f.start(serve::ServeConfig{});
  EXPECT_EQ(retrieve("ann"), (std::set<std::string>{"p-high", "p-low", "p-none", "c1"}));
}

namespace {

// A learner whose answer the test sets; it records what it was given, and can hold a round
// open until the test lets it finish.
// The service measures what it answers on the held-back requests itself: with feed() below,
// "recency" ranks the useful d3 first (1.0), and bm25 ranks d0 first (0.0).
struct FakeLearner : serve::Learner {
  std::string spec = "recency";
  std::vector<serve::LearnRound> rounds;
  std::function<void()> during;
  serve::LearnOutcome learn(const serve::LearnRound& r) override {
    rounds.push_back(r);
    if (during) during();
    return {spec, "fake"};
  }
};

// Puts 4 documents for each of n users and sends, for each, a retrieve of k = 4 and a
// utility for every served document (1 for "d3" of the user, 0 for the others): bm25 ranks
// d0 first, the only one that says "note", and recency d3, the newest.
// The users first..first+n-1 as above: documents put and retrieved through `serving`, the
// utilities sent through `rating` (with replicas, any replica takes feedback on any one's request).
void feed_users(httplib::Client& serving, httplib::Client& rating, int first, int n, const std::string& agent = "",
                const std::string& retriever = "") {
  for (int i = first; i < first + n; ++i) {
    const std::string u = "u" + std::to_string(i);
    json d = json::array();
    for (int j = 0; j < 4; ++j)
      d.push_back({{"id", "d" + std::to_string(j)},
                   {"text", (j ? "memo " : "note ") + std::to_string(j) + " of " + u},
                   {"date", "2026-01-0" + std::to_string(j + 1)}});
    ASSERT_EQ(call(serving, "PUT", "/v1/users/" + u + "/documents", json{{"documents", d}}).status, 200);
    json q{{"user", u}, {"query", "note"}, {"k", 4}};
    if (!agent.empty()) q["agent"] = agent;
    if (!retriever.empty()) q["retriever"] = retriever;
    const auto r = call(serving, "POST", "/v1/retrieve", q);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    json utils = json::object();
    for (const auto& doc : r.body["documents"]) utils[doc["id"].get<std::string>()] = doc["id"] == "d3" ? 1.0 : 0.0;
    ASSERT_EQ(call(rating, "POST", "/v1/feedback", json{{"request_id", r.body["request_id"]}, {"utilities", utils}}).status, 200);
  }
}

void feed(Fixture& f, int first, int n, const std::string& agent = "", const std::string& retriever = "") {
  auto a = f.client(f.key_a);
  feed_users(a, a, first, n, agent, retriever);
}

}  // namespace

TEST(Serve, LearningPromotesOnlyABetterModelKeepsServingMeanwhileAndSurvivesARestart) {
  serve::ServeConfig cfg;
  cfg.learn.on = true;
  cfg.learn.min_new_feedback = 100;
  cfg.learn.dev_fraction = 0.3;
  Fixture f(cfg);
  cfg.learn.dir = (f.dir.path / "models").string();
  f.stop();
  f.start(cfg);
  FakeLearner learner;
  feed(f, 0, 20);  // 80 records: not enough for a round
  EXPECT_TRUE(f.service->learn_step(learner).empty());
  feed(f, 20, 20);  // 160
  // While the round trains, requests are answered by the current version.
  learner.during = [&] {
    const auto r = call(f.client(f.key_a), "POST", "/v1/retrieve", json{{"user", "u1"}, {"query", "note"}});
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body["model_version"], "bm25@v1");
  };
  auto reps = f.service->learn_step(learner);
  ASSERT_EQ(reps.size(), 1u);
  ASSERT_EQ(learner.rounds.size(), 1u);
  const auto& round = learner.rounds[0];
  EXPECT_EQ(round.train.size() + round.dev.size(), 40u);
  EXPECT_GT(round.dev.size(), 4u);
  EXPECT_EQ(round.train[0].docs.size(), 4u);
  EXPECT_EQ(round.base, "bm25");
  EXPECT_EQ(round.version, 2u);
  EXPECT_TRUE(reps[0].promoted) << reps[0].report;
  EXPECT_EQ(reps[0].model_version, "recency@v2");
  const auto r = call(f.client(f.key_a), "POST", "/v1/retrieve", json{{"user", "u1"}, {"query", "note"}});
  EXPECT_EQ(r.body["model_version"], "recency@v2");
  EXPECT_DOUBLE_EQ(reps[0].served_dev_top1, 0.0);
  EXPECT_DOUBLE_EQ(reps[0].new_dev_top1, 1.0);
  EXPECT_NE(f.server->metrics().find("attune_model_version{tenant=\"1\",agent=\"\"} 2"), std::string::npos) << f.server->metrics();
  EXPECT_NE(f.server->metrics().find("attune_model_promotions_total 1"), std::string::npos);
  // The next round, with a model no better than what is served on the held-back queries, is not promoted.
  feed(f, 40, 30);
  learner.during = nullptr;
  // bm25 puts d0 first: 0.0 on every held-back request, never above the served order. (This
  // was "random", which put d3 first often enough to beat a held-back set served mostly by
  // bm25@v1 now and then: a flaky check.)
  learner.spec = "bm25";
  reps = f.service->learn_step(learner);
  ASSERT_EQ(reps.size(), 1u);
  EXPECT_FALSE(reps[0].promoted);
  EXPECT_EQ(reps[0].model_version, "recency@v2");
  // A restarted server serves the last promoted version.
  f.stop();
  f.start(cfg);
  EXPECT_EQ(call(f.client(f.key_a), "POST", "/v1/retrieve", json{{"user", "u1"}, {"query", "note"}}).body["model_version"],
            "recency@v2");
  EXPECT_EQ(call(f.client(f.key_b), "POST", "/v1/retrieve", json{{"user", "u1"}, {"query", "note"}}).body["model_version"],
            "bm25@v1");  // the other tenant learnt nothing
}

// Agents (paper 002): each has its own retriever, model version and learning; a call may
// name a spec the config allows, and is then served by it, with nothing learnt from it.
TEST(Serve, AgentsHaveTheirOwnRetrieverVersionAndLearningAndACallMayNameAnAllowedSpec) {
  serve::ServeConfig cfg;
  cfg.agents["writer"] = {"recency", "", ""};
  cfg.agents["qa-bot"] = {"", "qa", "reader75q"};
  cfg.tenants["globex"].agents["qa-bot"] = {"random", "", ""};  // globex's own qa-bot
  cfg.retrievers = {"recency", "rrf(bm25, recency)"};
  cfg.learn.on = true;
  cfg.learn.min_new_feedback = 100;
  cfg.learn.dev_fraction = 0.3;
  Fixture f(cfg);
  auto a = f.client(f.key_a);
  auto b = f.client(f.key_b);
  ASSERT_EQ(call(a, "PUT", "/v1/users/ann/documents", docs({{"a1", "parser notes"}, {"a2", "parser fix"}, {"a3", "other"}})).status,
            200);
  const auto retrieve = [&](httplib::Client& c, json body) {
    body["user"] = "ann";
    body["query"] = "parser";
    return call(c, "POST", "/v1/retrieve", body);
  };
  EXPECT_EQ(retrieve(a, json::object()).body["model_version"], "bm25@v1");
  EXPECT_EQ(retrieve(a, {{"agent", "writer"}}).body["model_version"], "recency@v1");
  EXPECT_EQ(retrieve(a, {{"agent", "qa-bot"}}).body["model_version"], "bm25@v1");
  EXPECT_EQ(retrieve(b, {{"agent", "qa-bot"}}).body["model_version"], "random@v1");
  // An agent that is not declared, and a spec the config does not allow, are refused by name.
  auto r = retrieve(a, {{"agent", "nobody"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["field"], "agent");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("qa-bot, writer"), std::string::npos) << r.body.dump();
  for (const char* spec : {"dense:/etc", "bm25", "rrf(bm25"}) {
    r = retrieve(a, {{"retriever", spec}});
    EXPECT_EQ(r.status, 400) << spec;
    EXPECT_EQ(r.body["error"]["field"], "retriever") << r.body.dump();
  }
  // An allowed spec, written any way that parses to it.
  r = retrieve(a, {{"retriever", "rrf( bm25 ,recency )"}, {"agent", "writer"}});
  EXPECT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["model_version"], "rrf(bm25,recency)@request");
  // The agent's task is the call's: output feedback is scored with qa's metric.
  r = retrieve(a, {{"agent", "qa-bot"}});
  const auto fb = call(a, "POST", "/v1/feedback",
                       json{{"request_id", r.body["request_id"]}, {"output", "the parser"}, {"reference", "the parser"}});
  EXPECT_EQ(fb.status, 200) << fb.body.dump();
  EXPECT_EQ(f.st->request_get(*f.st->tenant_find("acme"), r.body["request_id"])->agent, "qa-bot");

  // Learning: feedback of qa-bot trains qa-bot alone, and requests served by a named spec are left out.
  feed(f, 0, 40, "qa-bot");
  feed(f, 40, 40, "qa-bot", "recency");
  FakeLearner learner;
  auto reps = f.service->learn_step(learner);
  ASSERT_EQ(reps.size(), 1u);
  ASSERT_EQ(learner.rounds.size(), 1u);
  EXPECT_EQ(learner.rounds[0].agent, "qa-bot");
  EXPECT_EQ(learner.rounds[0].task, "qa");
  EXPECT_EQ(learner.rounds[0].model, "reader75q");
  EXPECT_EQ(learner.rounds[0].train.size() + learner.rounds[0].dev.size(), 40u);
  EXPECT_NE(learner.rounds[0].out.string().find("/qa-bot/v2"), std::string::npos) << learner.rounds[0].out;
  EXPECT_TRUE(reps[0].promoted) << reps[0].report;
  EXPECT_EQ(retrieve(a, {{"agent", "qa-bot"}}).body["model_version"], "recency@v2");
  EXPECT_EQ(retrieve(a, json::object()).body["model_version"], "bm25@v1");
  EXPECT_EQ(retrieve(b, {{"agent", "qa-bot"}}).body["model_version"], "random@v1");
  const std::string m = f.server->metrics();
  EXPECT_NE(m.find("attune_model_version{tenant=\"1\",agent=\"qa-bot\"} 2"), std::string::npos) << m;
  EXPECT_NE(m.find("attune_model_version{tenant=\"1\",agent=\"\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("attune_feedback_backlog{tenant=\"1\"} 0"), std::string::npos) << m;
  // A slot part-way to its threshold at one round is trained as soon as it gets there, though
  // the tenant has fewer new records than min_new_feedback: 80 of writer's, then 20 more.
  feed(f, 80, 20, "writer");
  EXPECT_NE(f.server->metrics().find("attune_feedback_backlog{tenant=\"1\"} 80"), std::string::npos) << f.server->metrics();
  feed(f, 100, 20, "qa-bot");  // 80 of qa-bot's: read, but neither slot has 100 new
  EXPECT_TRUE(f.service->learn_step(learner).empty());
  feed(f, 120, 5, "writer");   // 20 more of writer's: 100
  reps = f.service->learn_step(learner);
  ASSERT_EQ(reps.size(), 1u);
  EXPECT_EQ(reps[0].agent, "writer");
  EXPECT_EQ(learner.rounds.back().train.size() + learner.rounds.back().dev.size(), 25u);
  // A restart serves each agent its last promoted version.
  f.stop();
  f.start(cfg);
  auto a2 = f.client(f.key_a);
  EXPECT_EQ(retrieve(a2, {{"agent", "qa-bot"}}).body["model_version"], "recency@v2");
  EXPECT_EQ(retrieve(a2, {{"agent", "writer"}}).body["model_version"], "recency@v1");  // recency beat nothing: not promoted
}

// User feedback (paper 004 §2.3) through the API, with a curator whose rule is planted and
// known (feedback/user_feedback.h): the 40/40/20 simulation of correct-shared,
// correct-personal and incorrect feedback. Counted where each class ends: incorrect
// feedback never reaches the shared corpus, a user's personal feedback is served to that
// user only, and a curator whose verdicts never parse files nothing.
TEST(Serve, UserFeedbackIsFiledSharedPersonalOrNowhereAndIncorrectNeverReachesTheCorpus) {
  serve::ServeConfig cfg;
  cfg.user_feedback.llm = "planted:curator";
  Fixture f(cfg);
  f.service->set_curator(std::make_shared<feedback::PlantedCurator>());
  auto a = f.client(f.key_a);
  // The shared corpus: ten packages, each "NAME: description".
  const std::vector<std::pair<std::string, std::string>> pkgs = {
      {"zstdtool", "compresses archives with zstandard at very high speeds using multiple threads"},
      {"gridcalc", "spreadsheet calculator for terminals supporting formulas charts and macros"},
      {"netprobe", "measures network latency between hosts and reports jitter statistics"},
      {"fontsmith", "editor for outline fonts with kerning tables and glyph previews"},
      {"logsift", "filters system journals by pattern and summarises recurring failures"},
      {"mapweave", "renders vector street maps from openstreetmap extracts offline"},
      {"tunebox", "plays music collections with gapless playback and replaygain support"},
      {"pixelmend", "repairs damaged photographs by inpainting scratches and stains"},
      {"quillnote", "takes structured notes in markdown with backlinks and tags"},
      {"cronwatch", "monitors scheduled jobs and alerts when they fail or overrun"}};
  json corpus = json::array();
  for (const auto& [name, text] : pkgs) corpus.push_back({{"id", name}, {"text", name + ": " + text}});
  ASSERT_EQ(call(a, "POST", "/v1/corpus/documents", json{{"documents", corpus}}).status, 200);

  // 40% correct facts (a package's own description), 40% preferences, 20% incorrect facts
  // (a package named with another's description).
  struct Case {
    std::string kind, user, said;
  };
  std::vector<Case> cases;
  for (int i = 0; i < 4; ++i)
    cases.push_back({"correct-shared", "ann", pkgs[i].first + " " + pkgs[i].second});
  for (int i = 0; i < 4; ++i)
    cases.push_back({"correct-personal", "bob", "I prefer " + pkgs[i + 4].first + " for my daily work at home"});
  for (int i = 0; i < 2; ++i)
    cases.push_back({"incorrect", "ann", pkgs[i + 8].first + " " + pkgs[(i + 2) % 10].second});
  std::map<std::string, std::map<std::string, int>> ended;  // class -> filing -> count
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const json body = {{"user", cases[i].user},
                       {"messages", json::array({{{"role", "assistant"}, {"content", "How can I help?"}},
                                                 {{"role", "user"}, {"content", cases[i].said}}})}};
    const auto r = call(a, "POST", "/v1/conversations/c" + std::to_string(i) + "/feedback", body);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    ++ended[cases[i].kind][r.body["filing"].get<std::string>()];
    if (r.body["filing"] == "shared" || r.body["filing"] == "personal") {
      EXPECT_EQ(r.body["document_id"], "uf-c" + std::to_string(i));
    }
  }
  EXPECT_EQ(ended["correct-shared"]["shared"], 4) << json(ended).dump();
  EXPECT_EQ(ended["correct-personal"]["personal"], 4) << json(ended).dump();
  EXPECT_EQ(ended["incorrect"]["rejected"], 2) << json(ended).dump();
  EXPECT_EQ(ended["incorrect"]["shared"], 0) << json(ended).dump();

  // Shared facts are served to everyone of the tenant; bob's preference to bob only.
  const auto search = [&](const std::string& user, const std::string& query) {
    return ids(call(a, "POST", "/v1/retrieve", json{{"user", user}, {"query", query}, {"k", 20}}));
  };
  EXPECT_TRUE(search("carl", "zstdtool compresses archives").count("uf-c0"));
  EXPECT_TRUE(search("bob", "prefer logsift daily work").count("uf-c4"));
  EXPECT_FALSE(search("ann", "prefer logsift daily work").count("uf-c4"));
  EXPECT_FALSE(search("carl", "quillnote gridcalc spreadsheet").count("uf-c8"));  // rejected: nowhere
  // Another tenant sees none of it.
  auto b = f.client(f.key_b);
  EXPECT_TRUE(ids(call(b, "POST", "/v1/retrieve", json{{"user", "bob"}, {"query", "zstdtool prefer logsift"}, {"k", 20}})).empty());

  // A conversation with nothing asserted; bad bodies; the counters.
  auto r = call(a, "POST", "/v1/conversations/c9/feedback", json{{"user", "ann"}, {"conversation", "user: thanks!"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["filing"], "no_information");
  EXPECT_EQ(r.body["document_id"], "");
  r = call(a, "POST", "/v1/conversations/c10/feedback", json{{"user", "ann"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["field"], "conversation") << r.body.dump();
  r = call(a, "POST", "/v1/conversations/c10/feedback",
           json{{"user", "ann"}, {"messages", json::array({{{"role", "robot"}, {"content", "x"}}})}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["field"], "messages") << r.body.dump();
  const auto metrics = f.client("").Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("attune_user_feedback_total{filing=\"shared\"} 4"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("attune_user_feedback_total{filing=\"rejected\"} 2"), std::string::npos);

  // A curator whose verdicts never parse files nothing; one that errs once is asked again.
  f.service->set_curator(std::make_shared<feedback::PlantedCurator>(feedback::PlantedCurator::Malformed::Always));
  r = call(a, "POST", "/v1/conversations/c11/feedback",
           json{{"user", "ann"}, {"conversation", "user: " + pkgs[5].first + " " + pkgs[5].second}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["filing"], "failed");
  EXPECT_FALSE(search("carl", pkgs[5].first + " street maps").count("uf-c11"));
  f.service->set_curator(std::make_shared<feedback::PlantedCurator>(feedback::PlantedCurator::Malformed::First));
  r = call(a, "POST", "/v1/conversations/c12/feedback",
           json{{"user", "ann"}, {"conversation", "user: " + pkgs[5].first + " " + pkgs[5].second}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["filing"], "shared");
  EXPECT_EQ(r.body["model_calls"], 4);  // summary, knowledge, a malformed verdict, the repaired one
  // Off without a curator: 503.
  f.service->set_curator(nullptr);
  EXPECT_EQ(call(a, "POST", "/v1/conversations/c13/feedback", json{{"user", "ann"}, {"conversation", "user: a b c d"}}).status,
            503);
}

// Replicas: two servers on one store (here two connections to one SQLite file, as two
// processes on one machine would have; the PostgreSQL instance below runs the same check).
namespace {

struct Replica {
  std::unique_ptr<store::Store> st;
  std::unique_ptr<serve::Service> service;
  std::unique_ptr<serve::HttpServer> server;
  Replica(const std::string& spec, const serve::ServeConfig& cfg) {
    st = store::open_store(spec);
    service = std::make_unique<serve::Service>(*st, cfg);
    serve::HttpOptions o;
    o.port = 0;
    server = std::make_unique<serve::HttpServer>(*service, o);
    server->start();
  }
  httplib::Client client(const std::string& key) const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_default_headers({{"Authorization", "Bearer " + key}});
    return c;
  }
};

void feed_replicas(Replica& serving, Replica& rating, const std::string& key, int first, int n) {
  auto s = serving.client(key), f = rating.client(key);
  feed_users(s, f, first, n);
}

// Polls `ok` for up to 10 s (the replicas sync every 0.2 s).
bool eventually(const std::function<bool()>& ok) {
  for (int i = 0; i < 200; ++i) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ok();
}

// Tenant "acme" in the store `spec`, and a new API key of it.
std::string tenant_with_key(const std::string& spec) {
  auto admin = store::open_store(spec);
  const auto t = admin->tenant_create("acme");
  const std::string key = serve::new_api_key();
  admin->key_add(t, serve::key_prefix(key), serve::key_hash(key));
  return key;
}

void replicas_share_documents_models_and_one_learner(const std::string& spec, const fs::path& models) {
  const std::string key = tenant_with_key(spec);
  serve::ServeConfig cfg;
  cfg.sync_seconds = 0.2;
  cfg.learn.min_new_feedback = 100;
  cfg.learn.dev_fraction = 0.3;
  cfg.learn.lease_seconds = 2;
  cfg.learn.dir = models.string();
  auto a = std::make_unique<Replica>(spec, cfg);
  Replica b(spec, cfg);
  const auto search = [&](Replica& r, const std::string& user, const std::string& query) {
    return ids(call(r.client(key), "POST", "/v1/retrieve", json{{"user", user}, {"query", query}, {"k", 10}}));
  };
  // Both replicas have loaded the tenant (a retrieve loads it) before the changes below.
  EXPECT_TRUE(search(*a, "ann", "x").empty());
  EXPECT_TRUE(search(b, "ann", "x").empty());

  // A document added through one replica is retrieved through the other; so is a removal.
  ASSERT_EQ(call(a->client(key), "PUT", "/v1/users/ann/documents", docs({{"a1", "gift ideas for my sister"}})).status, 200);
  ASSERT_EQ(call(b.client(key), "POST", "/v1/corpus/documents", docs({{"c1", "gift wrapping services nearby"}})).status, 200);
  EXPECT_TRUE(eventually([&] { return search(b, "ann", "gift").count("a1") == 1; }));
  EXPECT_TRUE(eventually([&] { return search(*a, "ann", "gift").count("c1") == 1; }));
  ASSERT_EQ(call(a->client(key), "DELETE", "/v1/users/ann/documents/a1").status, 200);
  EXPECT_TRUE(eventually([&] { return search(b, "ann", "gift").count("a1") == 0; }));
  EXPECT_TRUE(search(b, "bob", "gift").count("c1"));  // the corpus, never ann's documents
  EXPECT_FALSE(search(b, "bob", "gift").count("a1"));

  // Feedback through both: one replica (the lease holder) learns it, once.
  feed_replicas(*a, b, key, 0, 20);
  feed_replicas(b, *a, key, 20, 20);  // 160 "doc" records, served and rated on both
  FakeLearner la, lb;
  EXPECT_EQ(a->st->tenant_list().at(0).feedback, 160u);
  const auto ra = a->service->learn_step(la);  // a takes the lease (nobody held it)
  EXPECT_TRUE(a->service->counts().learner_lease);
  const auto rb = b.service->learn_step(lb);   // b does not: a holds it
  ASSERT_EQ(la.rounds.size(), 1u) << ra.size() << " reports; " << (ra.empty() ? "" : ra[0].report);
  EXPECT_EQ(lb.rounds.size(), 0u);
  EXPECT_TRUE(rb.empty());
  EXPECT_EQ(la.rounds[0].train.size() + la.rounds[0].dev.size(), 40u);  // every request, whichever replica served it
  ASSERT_EQ(ra.size(), 1u);
  EXPECT_TRUE(ra[0].promoted) << ra[0].report;
  // The other replica serves the promoted version.
  EXPECT_TRUE(eventually([&] {
    return call(b.client(key), "POST", "/v1/retrieve", json{{"user", "u1"}, {"query", "note"}}).body["model_version"] ==
           "recency@v2";
  }));
  EXPECT_EQ(a->service->learn_step(la).size(), 0u);  // nothing new: no second round of the same feedback

  // The learner's replica dies (no clean stop: its lease is left to expire).
  ASSERT_TRUE(a->service->renew_learner_lease());
  const auto killed = std::chrono::steady_clock::now();
  a->service->stop_background(false);
  EXPECT_TRUE(b.service->learn_step(lb).empty());  // a's lease has not expired yet
  EXPECT_FALSE(b.service->counts().learner_lease);
  feed_replicas(b, b, key, 40, 20);  // 240 records: 80 new since the round, fewer than 100
  std::this_thread::sleep_until(killed + std::chrono::milliseconds(2300));
  EXPECT_TRUE(b.service->learn_step(lb).empty());
  EXPECT_TRUE(lb.rounds.empty()) << "b took over but relearnt feedback a had learnt: 80 new records are below 100";
  EXPECT_TRUE(b.service->counts().learner_lease);
  feed_replicas(b, b, key, 60, 10);  // 280: 120 new
  const auto rb2 = b.service->learn_step(lb);
  ASSERT_EQ(lb.rounds.size(), 1u);
  EXPECT_EQ(lb.rounds[0].version, 3u);  // after a's v2
  EXPECT_EQ(lb.rounds[0].train.size() + lb.rounds[0].dev.size(), 70u);  // all the feedback, none lost
  a.reset();  // its destructor gives up nothing: b holds the lease
  EXPECT_TRUE(b.service->renew_learner_lease());
}

}  // namespace

// A replica that has not synced yet may store a user's BM25 statistics from documents
// another replica already removed; its own sync of the removal removes them again, so
// nothing of a deleted document stays in the store.
TEST(Serve, ALaggingReplicasStoredStatisticsGoWhenItSyncsTheRemoval) {
  TempDir dir;
  const std::string spec = (dir.path / "serve.db").string();
  const std::string key = tenant_with_key(spec);
  serve::ServeConfig cfg;
  cfg.sync_seconds = 0;  // the test syncs by hand
  Replica a(spec, cfg), b(spec, cfg);
  const json q = {{"user", "ann"}, {"query", "secret note"}, {"k", 10}, {"sources", {"user"}}};
  EXPECT_TRUE(ids(call(b.client(key), "POST", "/v1/retrieve", q)).empty());  // b loads the tenant at counter 0
  ASSERT_EQ(call(a.client(key), "PUT", "/v1/users/ann/documents/n1", json{{"text", "secret plan"}}).status, 200);
  ASSERT_EQ(call(a.client(key), "PUT", "/v1/users/ann/documents/n2", json{{"text", "public note"}}).status, 200);
  EXPECT_EQ(b.service->sync(), 2u);
  ASSERT_EQ(call(a.client(key), "DELETE", "/v1/users/ann/documents/n1").status, 200);
  const auto stats = store::profile_stats_blob_key(1, "ann");
  EXPECT_FALSE(b.st->blob_get(stats).has_value());
  // b still holds n1 and writes statistics that contain it.
  EXPECT_EQ(ids(call(b.client(key), "POST", "/v1/retrieve", q)), (std::set<std::string>{"n1", "n2"}));
  ASSERT_TRUE(b.st->blob_get(stats).has_value());
  EXPECT_NE(b.st->blob_get(stats)->find("secret"), std::string::npos);
  EXPECT_EQ(b.service->sync(), 1u);
  EXPECT_FALSE(b.st->blob_get(stats).has_value());
  EXPECT_EQ(ids(call(b.client(key), "POST", "/v1/retrieve", q)), std::set<std::string>{"n2"});
  EXPECT_EQ(b.st->blob_get(stats)->find("secret"), std::string::npos);
}

// The change log stays bounded (change_log_keep): a replica's sync prunes it, and a replica
// that fell behind the pruned part loads the tenant's documents again, so it ends with the
// store's state, removals included.
TEST(Serve, AReplicaBehindAPrunedChangeLogLoadsTheTenantAgain) {
  TempDir dir;
  const std::string spec = (dir.path / "serve.db").string();
  const std::string key = tenant_with_key(spec);
  serve::ServeConfig cfg;
  cfg.sync_seconds = 0;  // the test syncs by hand
  cfg.change_log_keep = 2;
  Replica a(spec, cfg), b(spec, cfg);
  const auto search = [&](Replica& r, const std::string& user) {
    return ids(call(r.client(key), "POST", "/v1/retrieve", json{{"user", user}, {"query", "note"}, {"k", 10}}));
  };
  EXPECT_TRUE(search(a, "ann").empty());
  EXPECT_TRUE(search(b, "ann").empty());  // b has loaded the tenant at counter 0
  for (int i = 1; i <= 5; ++i)
    ASSERT_EQ(call(a.client(key), "PUT", "/v1/users/ann/documents/n" + std::to_string(i), json{{"text", "note " + std::to_string(i)}}).status, 200);
  ASSERT_EQ(call(a.client(key), "DELETE", "/v1/users/ann/documents/n1").status, 200);  // counter 6
  a.service->sync();  // prunes the log to its last 2 writes: counters 1-4 are gone
  EXPECT_EQ(a.service->counts().pruned_changes, 4u);
  EXPECT_EQ(a.st->document_changes_floor(1), 4u);
  EXPECT_EQ(a.service->counts().replica_reloads, 0u);  // a made the changes itself
  // b missed counters 1-4: replaying 5-6 alone would lose n2-n4. It loads everything again.
  ::testing::internal::CaptureStderr();
  b.service->sync();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("loaded its documents again"), std::string::npos) << err;
  EXPECT_EQ(b.service->counts().replica_reloads, 1u);
  EXPECT_EQ(search(b, "ann"), (std::set<std::string>{"n2", "n3", "n4", "n5"}));
  // From there on it follows the log as usual.
  ASSERT_EQ(call(a.client(key), "PUT", "/v1/users/ann/documents/n6", json{{"text", "note 6"}}).status, 200);
  EXPECT_EQ(b.service->sync(), 1u);
  EXPECT_EQ(search(b, "ann"), (std::set<std::string>{"n2", "n3", "n4", "n5", "n6"}));
  EXPECT_EQ(b.service->counts().replica_reloads, 1u);
  // With change_log_keep 0 nothing is pruned.
  cfg.change_log_keep = 0;
  Replica c(spec, cfg);
  EXPECT_TRUE(search(c, "ann").size() == 5u);
  c.service->sync();
  EXPECT_EQ(c.service->counts().pruned_changes, 0u);
}

TEST(Serve, TwoReplicasOnOneSqliteFileShareDocumentsModelsAndOneLearner) {
  TempDir dir;
  replicas_share_documents_models_and_one_learner((dir.path / "serve.db").string(), dir.path / "models");
}

TEST(Serve, TwoReplicasOnOnePostgresqlShareDocumentsModelsAndOneLearner) {
  const auto db = fixtures::postgres_database();
  if (!db) GTEST_SKIP() << fixtures::kNoPostgres;
  TempDir dir;
  replicas_share_documents_models_and_one_learner(db->url(), dir.path / "models");
}

namespace {

// A corpus first stage kind of the test's own, "held:X": its build waits until the test
// releases it (or its `cancelled` answers true, polled every millisecond), then answers a
// query with the corpus's passages last first (an order BM25 would not give). The retriever
// kind of the same name keeps its candidates' order.
struct HeldStage {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int started = 0, cancelled = 0, built = 0;
};
HeldStage& held() {
  static HeldStage h;
  return h;
}
class InOrder final : public retrieval::Retriever {
 public:
  std::string name() const override { return "held"; }

 protected:
  Ranking do_rank(const retrieval::Query&, std::span<const Document> c, std::size_t) const override {
    Ranking r;
    for (std::size_t i = 0; i < c.size(); ++i) {
      r.indices.push_back(i);
      r.scores.push_back(static_cast<double>(c.size() - i));
    }
    return r;
  }
};
class LastFirst final : public retrieval::CorpusFirstStage {
 public:
  explicit LastFirst(std::size_t n) : n_(n) {}
  std::vector<std::pair<std::size_t, double>> search(const std::string&, std::size_t n) const override {
    std::vector<std::pair<std::size_t, double>> out;
    for (std::size_t i = 0; i < std::min(n, n_); ++i) out.emplace_back(n_ - 1 - i, 1.0 / (1.0 + static_cast<double>(i)));
    return out;
  }
  std::size_t passages_embedded() const override { return n_; }

 private:
  std::size_t n_;
};
void register_held() {
  retrieval::register_retriever_kind("held", [](std::string_view, std::uint64_t) { return std::make_unique<InOrder>(); });
  retrieval::register_first_stage("held", [](std::string_view, const std::vector<std::string>& texts, store::BlobStore*,
                                             const retrieval::StageCancelled& cancelled)
                                              -> std::unique_ptr<retrieval::CorpusFirstStage> {
    auto& h = held();
    std::unique_lock lock(h.mu);
    ++h.started;
    h.cv.notify_all();
    while (!h.release) {
      if (cancelled && cancelled()) {
        ++h.cancelled;
        h.cv.notify_all();
        throw retrieval::FirstStageCancelled();
      }
      h.cv.wait_for(lock, std::chrono::milliseconds(1));
    }
    ++h.built;
    h.cv.notify_all();
    return std::make_unique<LastFirst>(texts.size());
  });
}
// The stage tests' corpus: two passages hold "package", the third does not.
json three_passages() {
  return docs({{"p1", "apt pins a package version"}, {"p2", "dpkg unpacks a package"}, {"p3", "systemd starts units"}});
}
// The held kind registered, its counters zeroed, its builds held or not.
HeldStage& fresh_held(bool release) {
  register_held();
  auto& h = held();
  std::lock_guard lock(h.mu);
  h.release = release;
  h.started = h.cancelled = h.built = 0;
  return h;
}
// Waits (at most 20 s) until `done` holds for the held stage's counters.
bool wait_held(const std::function<bool(const HeldStage&)>& done) {
  auto& h = held();
  std::unique_lock lock(h.mu);
  return h.cv.wait_for(lock, std::chrono::seconds(20), [&] { return done(h); });
}

}  // namespace

// A corpus first stage (dense:DIR's kind) is built in the background: at a tenant's load and
// after each corpus change, while queries are answered at once with BM25's candidates, and
// say so ("corpus_first_stage": "bm25"); once it is built, queries use it and name it. A
// change during a build cancels that build (its corpus is stale) and asks for the new one; a
// stopping server cancels the build under way instead of waiting for it. With
// corpus_stage_background false, the first query builds it and waits.
TEST(Serve, ACorpusFirstStageIsBuiltInTheBackgroundWhileQueriesGetBm25AndSaySo) {
  auto& h = fresh_held(/*release=*/false);
  serve::ServeConfig cfg;
  cfg.retriever = "held:x";
  Fixture f(cfg);
  auto a = f.client(f.key_a);
  ASSERT_EQ(call(a, "POST", "/v1/corpus/documents", three_passages()).status, 200);
  ASSERT_TRUE(wait_held([](const HeldStage& s) { return s.started == 1; })) << "no build was started by the corpus change";
  const json q = {{"user", "ann"}, {"query", "package"}, {"k", 3}};
  auto r = call(a, "POST", "/v1/retrieve", q);  // answered while the build is held
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["corpus_first_stage"], "bm25") << r.body.dump();
  EXPECT_EQ(ids(r), (std::set<std::string>{"p1", "p2"}));  // BM25's candidates: those with "package"
  // A change while the build is held: that build is cancelled, the new corpus's is asked for.
  ASSERT_EQ(call(a, "POST", "/v1/corpus/documents", docs({{"p4", "a package of its own"}})).status, 200);
  ASSERT_TRUE(wait_held([](const HeldStage& s) { return s.cancelled == 1 && s.started == 2; }))
      << "started " << h.started << ", cancelled " << h.cancelled;
  {
    std::lock_guard lock(h.mu);
    h.release = true;
  }
  ASSERT_TRUE(wait_held([](const HeldStage& s) { return s.built == 1; }));
  const auto built = [&] { return f.service->counts().corpus_stages_built == 1; };
  for (int i = 0; i < 2000 && !built(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(built());
  EXPECT_EQ(f.service->counts().corpus_stage_builds_cancelled, 1u);
  r = call(a, "POST", "/v1/retrieve", q);
  EXPECT_EQ(r.body["corpus_first_stage"], "held:x") << r.body.dump();
  ASSERT_EQ(r.body["documents"].size(), 3u) << r.body.dump();
  EXPECT_EQ(r.body["documents"][0]["id"], "p4");  // the stage's order: the last passage first
  EXPECT_EQ(r.body["documents"][1]["id"], "p3");
  // A personal-only call searches no corpus and names no first stage.
  ASSERT_EQ(call(a, "PUT", "/v1/users/ann/documents", docs({{"d1", "my package notes"}})).status, 200);
  r = call(a, "POST", "/v1/retrieve", json{{"user", "ann"}, {"query", "package"}, {"k", 3}, {"sources", {"user"}}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_FALSE(r.body.contains("corpus_first_stage")) << r.body.dump();
  const auto metrics = a.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("attune_corpus_stage_builds_cancelled_total 1\n"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("attune_corpus_stage_builds_failed_total 0\n"), std::string::npos);
  // Stopping while a build is held: the build is cancelled, the stop does not wait for it.
  {
    std::lock_guard lock(h.mu);
    h.release = false;
  }
  ASSERT_EQ(call(a, "POST", "/v1/corpus/documents", docs({{"p5", "one more"}})).status, 200);
  ASSERT_TRUE(wait_held([](const HeldStage& s) { return s.started == 3; }));
  const auto t0 = std::chrono::steady_clock::now();
  f.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(h.cancelled, 2);
  // Built by the first query instead, when the config says so.
  {
    std::lock_guard lock(h.mu);
    h.release = true;
  }
  serve::ServeConfig here = cfg;
  here.corpus_stage_background = false;
  f.start(here);
  auto a2 = f.client(f.key_a);
  r = call(a2, "POST", "/v1/retrieve", q);
  EXPECT_EQ(r.body["corpus_first_stage"], "held:x") << r.body.dump();
  EXPECT_EQ(f.service->counts().corpus_stages_built, 1u);
  EXPECT_EQ(h.started, 4);
}

// A spec that reranks a first stage's retriever searches the corpus with that stage: a
// learned model's folder that expands to rerank(held:x,L,K:DIR) (what serve's ROPG learner
// promotes), and rerank(held:x,L,R) named by a call. Any other spec keeps BM25's candidates.
TEST(Serve, ASpecThatReranksAStagesRetrieverSearchesTheCorpusWithThatStage) {
  auto& h = fresh_held(/*release=*/true);
  TempDir models;
  const auto folder = models.path / "learned";
  fs::create_directories(folder);
  std::ofstream(folder / "attune_model.json") << R"({"kind": "held", "rerank": {"initial": "held:x", "top_l": 2}})";
  serve::ServeConfig cfg;
  cfg.retriever = folder.string();
  cfg.retrievers = {"rerank(held:x, 3, bm25)", "bm25"};
  Fixture f(cfg);
  auto a = f.client(f.key_a);
  ASSERT_EQ(call(a, "POST", "/v1/corpus/documents", three_passages()).status, 200);
  ASSERT_TRUE(wait_held([](const HeldStage& s) { return s.built == 1; })) << "the folder's stage was not built";
  const auto built = [&] { return f.service->counts().corpus_stages_built == 1; };
  for (int i = 0; i < 2000 && !built(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(built());
  json q = {{"user", "ann"}, {"query", "package"}, {"k", 3}};
  auto r = call(a, "POST", "/v1/retrieve", q);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["corpus_first_stage"], "held:x") << r.body.dump();
  // The stage's order (the last passage first), its first 2 kept: p3 has no "package", so
  // BM25's candidates would not hold it.
  ASSERT_EQ(r.body["documents"].size(), 2u) << r.body.dump();
  EXPECT_EQ(r.body["documents"][0]["id"], "p3");
  EXPECT_EQ(r.body["documents"][1]["id"], "p2");
  q["retriever"] = "rerank(held:x, 3, bm25)";
  r = call(a, "POST", "/v1/retrieve", q);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["corpus_first_stage"], "held:x") << r.body.dump();
  EXPECT_EQ(ids(r), (std::set<std::string>{"p1", "p2", "p3"}));
  q["retriever"] = "bm25";
  r = call(a, "POST", "/v1/retrieve", q);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["corpus_first_stage"], "bm25") << r.body.dump();
  EXPECT_EQ(ids(r), (std::set<std::string>{"p1", "p2"}));
  EXPECT_EQ(h.started, 1) << "one stage serves both specs";
}
