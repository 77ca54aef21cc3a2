// The HTTP edge of `attune serve` (http.h): routes, parsing into typed requests, auth,
// limits, error statuses and metrics. Nothing below this file sees HTTP or JSON text.
#include "attune/serve/http.h"

#include <httplib.h>

#include <array>
#include <charconv>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "attune/core/strings.h"

namespace attune::serve {

using nlohmann::json;

namespace {

// A field's error: 400 naming the field (ApiError carries other statuses).
[[noreturn]] void bad(const std::string& field, const std::string& why) { throw ApiError(400, field, why); }

// A query parameter that is a whole number from 1 to max; `absent` when the request has none.
std::size_t whole_param(const httplib::Request& req, const std::string& name, std::size_t absent, std::size_t max) {
  if (!req.has_param(name)) return absent;
  const std::string v = req.get_param_value(name);
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n == 0 || n > max)
    bad(name, "\"" + name + "\" must be a whole number from 1 to " + std::to_string(max));
  return n;
}

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& field, const std::string& message) {
  json e = {{"status", status}, {"message", message}};
  if (!field.empty()) e["field"] = field;
  reply(res, status, {{"error", e}});
}

json parse_body(const httplib::Request& req) {
  if (!valid_utf8(req.body)) bad("body", "the request body is not valid UTF-8");
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) bad("body", "the request body is not valid JSON");
  if (!body.is_object()) bad("body", "the request body must be a JSON object");
  return body;
}

// Every string field goes through here: present (when required), a string, within a size.
std::string string_field(const json& j, const std::string& key, const std::string& path, bool required,
                         std::size_t max_bytes, bool allow_empty = false) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) bad(path, "\"" + path + "\" is required");
    return {};
  }
  if (!j[key].is_string()) bad(path, "\"" + path + "\" must be a string");
  std::string s = j[key].get<std::string>();
  if (s.empty() && !allow_empty) bad(path, "\"" + path + "\" must not be empty");
  if (s.size() > max_bytes) bad(path, "\"" + path + "\" is " + std::to_string(s.size()) + " bytes, above the limit of " +
                                          std::to_string(max_bytes));
  return s;
}

// Ids (users, documents) also appear in paths: no control characters, nothing empty.
std::string check_id(std::string s, const std::string& field, const Limits& l) {
  if (s.empty()) bad(field, "\"" + field + "\" must not be empty");
  if (s.size() > l.max_id_bytes)
    bad(field, "\"" + field + "\" is longer than " + std::to_string(l.max_id_bytes) + " bytes");
  if (!valid_utf8(s)) bad(field, "\"" + field + "\" is not valid UTF-8");
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) bad(field, "\"" + field + "\" holds a control character");
  return s;
}

// An optional "date": YYYY-MM-DD (recency ranks by it).
std::string date_field(const json& j, const std::string& path) {
  std::string d = string_field(j, "date", path, false, 10);
  bool ok = d.empty() || (d.size() == 10 && d[4] == '-' && d[7] == '-');
  for (std::size_t i = 0; ok && i < d.size(); ++i)
    if (i != 4 && i != 7 && !std::isdigit(static_cast<unsigned char>(d[i]))) ok = false;
  if (!ok) bad(path, "\"" + path + "\" must be YYYY-MM-DD");
  return d;
}

std::vector<store::ServeDocument> documents_field(const json& body, const Limits& l) {
  if (!body.contains("documents") || !body["documents"].is_array()) bad("documents", "\"documents\" must be an array");
  const auto& arr = body["documents"];
  if (arr.empty()) bad("documents", "\"documents\" is empty");
  if (arr.size() > l.max_documents_per_call)
    bad("documents", std::to_string(arr.size()) + " documents in one call, above the limit of " +
                         std::to_string(l.max_documents_per_call));
  std::vector<store::ServeDocument> out;
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string p = "documents[" + std::to_string(i) + "]";
    if (!arr[i].is_object()) bad(p, "\"" + p + "\" must be an object {\"id\", \"text\"}");
    store::ServeDocument d;
    d.id = check_id(string_field(arr[i], "id", p + ".id", true, l.max_id_bytes), p + ".id", l);
    d.text = string_field(arr[i], "text", p + ".text", true, l.max_document_bytes);
    d.date = date_field(arr[i], p + ".date");
    if (!seen.emplace(d.id, i).second)
      bad(p + ".id", "document id " + d.id + " appears twice in this call (also documents[" + std::to_string(seen[d.id]) +
                         "])");
    out.push_back(std::move(d));
  }
  return out;
}

// Prometheus latency buckets, seconds.
constexpr std::array<double, 11> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};

struct Histogram {
  std::array<std::uint64_t, kBuckets.size()> counts{};
  std::uint64_t count = 0;
  double sum = 0;
  void add(double s) {
    for (std::size_t i = 0; i < kBuckets.size(); ++i)
      if (s <= kBuckets[i]) ++counts[i];
    ++count;
    sum += s;
  }
};

thread_local std::chrono::steady_clock::time_point t_request_start;

}  // namespace

struct HttpServer::Impl {
  Service& service;
  HttpOptions opts;
  httplib::Server svr;
  std::atomic<bool> listen_returned{false};
  mutable std::mutex metrics_mu;
  std::map<std::pair<std::string, int>, std::uint64_t> requests;  // (route, status) -> count
  std::map<std::string, Histogram> latency;                       // route -> histogram
  std::mutex rate_mu;
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point last;
  };
  std::unordered_map<std::string, Bucket> buckets;  // key hash -> bucket

  Impl(Service& s, HttpOptions o) : service(s), opts(std::move(o)) {}

  // The tenant of the request's key, or a 401; a 429 when the key is over its rate.
  TenantId authenticate(const httplib::Request& req) {
    const std::string h = req.get_header_value("Authorization");
    if (h.empty()) throw ApiError(401, "Authorization", "no API key: send \"Authorization: Bearer KEY\"");
    if (h.rfind("Bearer ", 0) != 0) throw ApiError(401, "Authorization", "expected \"Authorization: Bearer KEY\"");
    const std::string key = h.substr(7);
    const auto tenant = service.authenticate(key);
    if (!tenant) throw ApiError(401, "Authorization", "unknown or revoked API key");
    const auto& l = service.config().limits;
    if (l.requests_per_second > 0) {
      const double cap = l.burst > 0 ? l.burst : std::max(1.0, l.requests_per_second);
      const auto now = std::chrono::steady_clock::now();
      std::lock_guard lock(rate_mu);
      auto [it, fresh] = buckets.try_emplace(key_hash(key));
      auto& b = it->second;
      if (fresh) {
        b.tokens = cap;
      } else {
        b.tokens = std::min(cap, b.tokens + l.requests_per_second * std::chrono::duration<double>(now - b.last).count());
      }
      b.last = now;
      if (b.tokens < 1) throw ApiError(429, "", "this API key is over its limit of " +
                                                    json(l.requests_per_second).dump() + " requests a second");
      b.tokens -= 1;
    }
    return *tenant;
  }

  void record(const std::string& route, int status) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_request_start).count();
    std::lock_guard lock(metrics_mu);
    ++requests[{route, status}];
    latency[route].add(s);
  }

  // Wraps a handler: times it, turns every exception into a JSON error, counts the status.
  template <class F>
  httplib::Server::Handler guarded(std::string route, F body) {
    return [this, route, body](const httplib::Request& req, httplib::Response& res) {
      t_request_start = std::chrono::steady_clock::now();
      try {
        body(req, res);
      } catch (const ApiError& e) {
        reply_error(res, e.status(), e.field(), e.what());
      } catch (const PrivacyError& e) {
        std::fprintf(stderr, "serve: refused by the privacy check (a bug, please report it): %s\n", e.what());
        reply_error(res, 403, "", e.what());
      } catch (const UsageError& e) {
        const auto* f = dynamic_cast<const NamesField*>(&e);
        reply_error(res, 400, f ? f->field() : "", e.what());
      } catch (const InputError& e) {
        reply_error(res, 422, "", e.what());
      } catch (const std::exception& e) {
        reply_error(res, 500, "", e.what());
      }
      record(route, res.status);
    };
  }

  void routes() {
    const Limits& l = service.config().limits;
    svr.set_payload_max_length(l.max_body_bytes);
    svr.set_tcp_nodelay(true);
    svr.set_keep_alive_timeout(2);
    svr.set_keep_alive_max_count(1000);  // requests per connection before it is closed (httplib's default: 5)
    // httplib answers some errors itself (404 for no route, 413 for a large body): give them a JSON body.
    svr.set_error_handler([&l](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413)
        reply_error(res, 413, "body", "the request body is above the limit of " + std::to_string(l.max_body_bytes) + " bytes");
      else if (res.status == 404)
        reply_error(res, 404, "", "no endpoint " + req.method + " " + req.path + " (see /openapi.json)");
      else
        reply_error(res, res.status, "", "HTTP status " + std::to_string(res.status));
    });

    svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { reply(res, 200, {{"status", "ok"}}); });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    svr.Get("/openapi.json", [this](const httplib::Request&, httplib::Response& res) {
      if (opts.openapi.empty()) return reply_error(res, 404, "", "this server was started without its OpenAPI document");
      res.set_content(opts.openapi, "application/json");
    });

    svr.Post("/v1/retrieve", guarded("retrieve", [this, &l](const httplib::Request& req, httplib::Response& res) {
      const TenantId t = authenticate(req);
      const json body = parse_body(req);
      RetrieveRequest r;
      r.user = check_id(string_field(body, "user", "user", true, l.max_id_bytes), "user", l);
      r.query = string_field(body, "query", "query", true, l.max_query_bytes);
      r.task = string_field(body, "task", "task", false, 64);
      r.agent = string_field(body, "agent", "agent", false, 64);
      r.retriever = string_field(body, "retriever", "retriever", false, 4096);
      if (body.contains("k") && !body["k"].is_null()) {
        if (!body["k"].is_number_unsigned() || body["k"].get<std::uint64_t>() == 0)
          bad("k", "\"k\" must be a whole number from 1");
        if (body["k"].get<std::uint64_t>() > l.max_k) bad("k", "\"k\" is above the limit of " + std::to_string(l.max_k));
        r.k = static_cast<std::size_t>(body["k"].get<std::uint64_t>());
      }
      if (body.contains("sources") && !body["sources"].is_null()) {
        if (!body["sources"].is_array()) bad("sources", "\"sources\" must be an array of \"user\" and \"corpus\"");
        r.personal = r.corpus = false;
        for (const auto& s : body["sources"]) {
          if (s == "user") r.personal = true;
          else if (s == "corpus") r.corpus = true;
          else bad("sources", "\"sources\" takes \"user\" and \"corpus\"");
        }
      }
      if (!r.task.empty()) {
        static const std::vector<std::string> kTasks = {"lamp1", "lamp2", "lamp3", "lamp4", "lamp5", "lamp6", "lamp7",
                                                        "commit_subject", "commit_area", "commit_pick", "qa",
                                                        "factcheck", "slot"};
        if (std::find(kTasks.begin(), kTasks.end(), r.task) == kTasks.end())
          bad("task", "unknown task \"" + r.task + "\"");
      }
      const auto out = service.retrieve(t, r);
      json docs = json::array();
      for (const auto& d : out.documents)
        docs.push_back({{"id", d.id}, {"text", d.text}, {"score", d.score}, {"source", d.source}});
      json answer = {{"request_id", out.request_id}, {"model_version", out.model_version}, {"documents", docs}};
      if (!out.corpus_first_stage.empty()) answer["corpus_first_stage"] = out.corpus_first_stage;
      reply(res, 200, answer);
    }));

    svr.Post("/v1/feedback", guarded("feedback", [this, &l](const httplib::Request& req, httplib::Response& res) {
      const TenantId t = authenticate(req);
      const json body = parse_body(req);
      FeedbackRequest f;
      f.request_id = string_field(body, "request_id", "request_id", true, 64);
      if (body.contains("utilities") && !body["utilities"].is_null()) {
        const auto& u = body["utilities"];
        if (u.is_object()) {  // {"doc-id": utility, ...}
          for (const auto& [id, v] : u.items()) {
            if (!v.is_number()) bad("utilities." + id, "a utility must be a number");
            f.utilities.push_back({id, v.get<double>(), ""});
          }
        } else if (u.is_array()) {  // [{"id", "utility", "source"?}, ...]
          for (std::size_t i = 0; i < u.size(); ++i) {
            const std::string p = "utilities[" + std::to_string(i) + "]";
            if (!u[i].is_object()) bad(p, "\"" + p + "\" must be an object {\"id\", \"utility\"}");
            DocumentUtility d;
            d.id = string_field(u[i], "id", p + ".id", true, l.max_id_bytes);
            if (!u[i].contains("utility") || !u[i]["utility"].is_number()) bad(p + ".utility", "a utility must be a number");
            d.utility = u[i]["utility"].get<double>();
            d.source = string_field(u[i], "source", p + ".source", false, 8);
            if (!d.source.empty() && d.source != "user" && d.source != "corpus")
              bad(p + ".source", "\"source\" is \"user\" or \"corpus\"");
            f.utilities.push_back(std::move(d));
          }
        } else {
          bad("utilities", "\"utilities\" must be an object {id: utility} or an array [{\"id\", \"utility\"}]");
        }
        if (f.utilities.size() > l.max_documents_per_call)
          bad("utilities", "more utilities than the limit of " + std::to_string(l.max_documents_per_call));
      }
      if (body.contains("reward") && !body["reward"].is_null()) {
        if (!body["reward"].is_number()) bad("reward", "\"reward\" must be a number");
        f.reward = body["reward"].get<double>();
      }
      if (body.contains("output")) f.output = string_field(body, "output", "output", true, l.max_document_bytes, true);
      if (body.contains("reference"))
        f.reference = string_field(body, "reference", "reference", true, l.max_document_bytes, true);
      const std::size_t n = service.feedback(t, f);
      reply(res, 200, {{"request_id", f.request_id}, {"records", n}});
    }));

    const auto put_docs = [this, &l](const httplib::Request& req, httplib::Response& res, const std::string& user) {
      const TenantId t = authenticate(req);
      const auto docs = documents_field(parse_body(req), l);
      service.put_documents(t, user, docs);
      reply(res, 200, {{"documents", docs.size()}});
    };
    svr.Put(R"(/v1/users/([^/]+)/documents)", guarded("user_documents", [=, &l](const httplib::Request& req, httplib::Response& res) {
      put_docs(req, res, check_id(req.matches[1], "user", l));
    }));
    svr.Put(R"(/v1/users/([^/]+)/documents/([^/]+))",
            guarded("user_document", [this, &l](const httplib::Request& req, httplib::Response& res) {
              const TenantId t = authenticate(req);
              const std::string user = check_id(req.matches[1], "user", l);
              const json body = parse_body(req);
              store::ServeDocument d;
              d.id = check_id(req.matches[2], "id", l);
              d.text = string_field(body, "text", "text", true, l.max_document_bytes);
              d.date = date_field(body, "date");
              service.put_documents(t, user, {d});
              reply(res, 200, {{"documents", 1}});
            }));
    svr.Delete(R"(/v1/users/([^/]+)/documents/([^/]+))",
               guarded("user_document", [this, &l](const httplib::Request& req, httplib::Response& res) {
                 const TenantId t = authenticate(req);
                 const std::string user = check_id(req.matches[1], "user", l), id = check_id(req.matches[2], "id", l);
                 if (!service.delete_document(t, user, id))
                   throw ApiError(404, "id", "user " + user + " has no document " + id);
                 reply(res, 200, {{"deleted", id}});
               }));
    svr.Delete(R"(/v1/users/([^/]+))", guarded("user", [this, &l](const httplib::Request& req, httplib::Response& res) {
      const TenantId t = authenticate(req);
      const std::string user = check_id(req.matches[1], "user", l);
      reply(res, 200, {{"deleted", user}, {"rows", service.delete_user(t, user)}});
    }));
    svr.Post("/v1/corpus/documents", guarded("corpus_documents", [=](const httplib::Request& req, httplib::Response& res) {
      put_docs(req, res, "");
    }));
    // Reading back: GET .../documents?after=ID&limit=N pages through the documents in id
    // order; GET .../documents/ID answers one.
    // corpus: the tenant's corpus; else the user of the path's first segment.
    const auto list_docs = [this, &l](const httplib::Request& req, httplib::Response& res, bool corpus) {
      const TenantId t = authenticate(req);
      const std::string user = corpus ? "" : check_id(req.matches[1], "user", l);
      const std::size_t limit = whole_param(req, "limit", 100, l.max_documents_per_call);
      std::string after;
      if (req.has_param("after")) {
        after = req.get_param_value("after");
        if (after.size() > l.max_id_bytes || !valid_utf8(after)) bad("after", "\"after\" must be a document id");
      }
      const auto page = service.list_documents(t, user, after, limit);
      json docs = json::array();
      for (const auto& d : page.documents) {
        json j = {{"id", d.id}, {"text", d.text}};
        if (!d.date.empty()) j["date"] = d.date;
        docs.push_back(std::move(j));
      }
      reply(res, 200, {{"documents", docs}, {"total", page.total},
                       {"next", page.more ? json(page.documents.back().id) : json(nullptr)}});
    };
    const auto get_doc = [this, &l](const httplib::Request& req, httplib::Response& res, bool corpus) {
      const TenantId t = authenticate(req);
      const std::string user = corpus ? "" : check_id(req.matches[1], "user", l);
      const std::string id = check_id(req.matches[corpus ? 1 : 2], "id", l);
      const auto d = service.get_document(t, user, id);
      if (!d) throw ApiError(404, "id", (user.empty() ? std::string("the corpus") : "user " + user) + " has no document " + id);
      json j = {{"id", d->id}, {"text", d->text}};
      if (!d->date.empty()) j["date"] = d->date;
      reply(res, 200, j);
    };
    svr.Get("/v1/corpus/documents", guarded("corpus_documents", [=](const httplib::Request& req, httplib::Response& res) {
      list_docs(req, res, true);
    }));
    svr.Get(R"(/v1/corpus/documents/([^/]+))", guarded("corpus_document", [=](const httplib::Request& req, httplib::Response& res) {
      get_doc(req, res, true);
    }));
    svr.Get(R"(/v1/users/([^/]+)/documents)", guarded("user_documents", [=](const httplib::Request& req, httplib::Response& res) {
      list_docs(req, res, false);
    }));
    svr.Get(R"(/v1/users/([^/]+)/documents/([^/]+))", guarded("user_document", [=](const httplib::Request& req, httplib::Response& res) {
      get_doc(req, res, false);
    }));
    svr.Delete(R"(/v1/corpus/documents/([^/]+))",
               guarded("corpus_document", [this, &l](const httplib::Request& req, httplib::Response& res) {
                 const TenantId t = authenticate(req);
                 const std::string id = check_id(req.matches[1], "id", l);
                 if (!service.delete_document(t, "", id)) throw ApiError(404, "id", "the corpus has no document " + id);
                 reply(res, 200, {{"deleted", id}});
               }));

    // User feedback (paper 004 §2.3): {"user", "messages": [{"role", "content"}]} or {"user",
    // "conversation": "..."} -> {"filing", "document_id", "summary", "evidence", "model_calls"}.
    svr.Post(R"(/v1/conversations/([^/]+)/feedback)",
             guarded("conversation_feedback", [this, &l](const httplib::Request& req, httplib::Response& res) {
               const TenantId t = authenticate(req);
               const std::string id = check_id(req.matches[1], "id", l);
               const json body = parse_body(req);
               const std::string user = check_id(string_field(body, "user", "user", true, l.max_id_bytes), "user", l);
               std::string conversation;
               if (body.contains("messages")) {
                 if (body.contains("conversation")) bad("conversation", "give \"messages\" or \"conversation\", not both");
                 if (!body["messages"].is_array() || body["messages"].empty())
                   bad("messages", "\"messages\" must be a non-empty array of {\"role\", \"content\"}");
                 for (const auto& m : body["messages"]) {
                   if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
                       !m["content"].is_string() || !valid_utf8(m["content"].get<std::string>()))
                     bad("messages", "each message must be {\"role\": \"user\" | \"assistant\", \"content\": text}");
                   const auto role = m["role"].get<std::string>();
                   if (role != "user" && role != "assistant" && role != "system")
                     bad("messages", "a message's role is \"user\", \"assistant\" or \"system\", not \"" + role + "\"");
                   conversation += role + ": " + m["content"].get<std::string>() + "\n";
                 }
               } else {
                 conversation = string_field(body, "conversation", "conversation", true, l.max_body_bytes);
               }
               const auto r = service.conversation_feedback(t, user, id, conversation);
               reply(res, 200, {{"conversation_id", id}, {"filing", r.filing}, {"document_id", r.document_id},
                                {"summary", r.summary}, {"evidence", r.evidence}, {"model_calls", r.model_calls}});
             }));

    // Cohere-style rerank: {"query", "documents": [string | {"text"}], "top_n"?} -> results by relevance.
    svr.Post("/v1/rerank", guarded("rerank", [this, &l](const httplib::Request& req, httplib::Response& res) {
      const TenantId t = authenticate(req);
      const json body = parse_body(req);
      const std::string query = string_field(body, "query", "query", true, l.max_query_bytes);
      if (!body.contains("documents") || !body["documents"].is_array() || body["documents"].empty())
        bad("documents", "\"documents\" must be a non-empty array");
      if (body["documents"].size() > l.max_documents_per_call)
        bad("documents", "more documents than the limit of " + std::to_string(l.max_documents_per_call));
      std::vector<std::string> docs;
      for (std::size_t i = 0; i < body["documents"].size(); ++i) {
        const auto& d = body["documents"][i];
        const std::string p = "documents[" + std::to_string(i) + "]";
        if (d.is_string()) {
          docs.push_back(d.get<std::string>());
          if (docs.back().size() > l.max_document_bytes) bad(p, "\"" + p + "\" is above the document size limit");
        } else if (d.is_object()) {
          docs.push_back(string_field(d, "text", p + ".text", true, l.max_document_bytes));
        } else {
          bad(p, "\"" + p + "\" must be a string or {\"text\"}");
        }
      }
      std::size_t top_n = docs.size();
      if (body.contains("top_n") && !body["top_n"].is_null()) {
        if (!body["top_n"].is_number_unsigned() || body["top_n"].get<std::uint64_t>() == 0)
          bad("top_n", "\"top_n\" must be a whole number from 1");
        top_n = std::min<std::size_t>(top_n, body["top_n"].get<std::uint64_t>());
      }
      json results = json::array();
      for (const auto& [index, score] : service.rerank(t, query, docs, top_n))
        results.push_back({{"index", index}, {"relevance_score", score}});
      reply(res, 200, {{"results", results}, {"model_version", service.model_version(t)}});
    }));

    // ColBERTv2-style search over the tenant's corpus (what DSPy's ColBERTv2 client calls):
    // GET /search?query=...&k=... -> {"topk": [{"text", "pid", "rank", "score", "long_text"}]}.
    svr.Get("/search", guarded("search", [this, &l](const httplib::Request& req, httplib::Response& res) {
      const TenantId t = authenticate(req);
      RetrieveRequest r;
      r.personal = false;  // the corpus only: no user's documents
      if (!req.has_param("query") || req.get_param_value("query").empty()) bad("query", "\"query\" is required");
      r.query = req.get_param_value("query");
      if (r.query.size() > l.max_query_bytes || !valid_utf8(r.query)) bad("query", "\"query\" is too long or not UTF-8");
      r.k = whole_param(req, "k", 10, l.max_k);
      const auto out = service.retrieve(t, r);
      json topk = json::array();
      for (std::size_t i = 0; i < out.documents.size(); ++i)
        topk.push_back({{"text", out.documents[i].text}, {"long_text", out.documents[i].text},
                        {"pid", out.documents[i].id}, {"rank", i + 1}, {"score", out.documents[i].score}});
      reply(res, 200, {{"query", r.query}, {"topk", topk}, {"request_id", out.request_id},
                       {"model_version", out.model_version}});
    }));
  }

  std::string metrics_text() const {
    std::string out;
    char buf[256];
    out += "# HELP attune_requests_total HTTP requests answered, by route and status.\n";
    out += "# TYPE attune_requests_total counter\n";
    std::lock_guard lock(metrics_mu);
    for (const auto& [k, n] : requests) {
      std::snprintf(buf, sizeof buf, "attune_requests_total{route=\"%s\",status=\"%d\"} %llu\n", k.first.c_str(), k.second,
                    static_cast<unsigned long long>(n));
      out += buf;
    }
    out += "# HELP attune_request_seconds Time to answer a request, by route.\n";
    out += "# TYPE attune_request_seconds histogram\n";
    for (const auto& [route, h] : latency) {
      for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        std::snprintf(buf, sizeof buf, "attune_request_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n", route.c_str(),
                      kBuckets[i], static_cast<unsigned long long>(h.counts[i]));
        out += buf;
      }
      std::snprintf(buf, sizeof buf,
                    "attune_request_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
                    "attune_request_seconds_sum{route=\"%s\"} %.9g\nattune_request_seconds_count{route=\"%s\"} %llu\n",
                    route.c_str(), static_cast<unsigned long long>(h.count), route.c_str(), h.sum, route.c_str(),
                    static_cast<unsigned long long>(h.count));
      out += buf;
    }
    const Counts c = service.counts();
    const auto metric = [&out](const char* name, const char* type, const char* help, std::uint64_t v) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
             std::to_string(v) + "\n";
    };
    metric("attune_retrieves_total", "counter", "Retrieve calls answered (/v1/retrieve and /search).", c.retrieves);
    metric("attune_feedback_records_total", "counter", "Feedback records committed.", c.feedback_records);
    metric("attune_learn_rounds_total", "counter", "Learning rounds trained.", c.learn_rounds);
    metric("attune_model_promotions_total", "counter", "Models promoted (each a new model version).", c.promotions);
    metric("attune_replica_synced_changes_total", "counter",
           "Document changes other replicas wrote that this one applied (sync_seconds).", c.synced_changes);
    metric("attune_personal_documents_admitted_total", "counter",
           "User documents ranked beside the corpus because their cosine reached personal.threshold.", c.personal_admitted);
    metric("attune_personal_documents_below_threshold_total", "counter",
           "User documents left out of a ranking beside the corpus: cosine below personal.threshold.", c.personal_below_threshold);
    metric("attune_replica_reloads_total", "counter",
           "Tenants this replica loaded again because the change log was pruned past its place (change_log_keep).",
           c.replica_reloads);
    metric("attune_change_log_pruned_total", "counter", "Rows of the store's document change log this replica pruned.",
           c.pruned_changes);
    metric("attune_profile_stats_loaded_total", "counter",
           "Users' BM25 statistics read back from the store (no document tokenised).", c.profile_stats_loaded);
    metric("attune_profile_stats_built_total", "counter",
           "Users' BM25 statistics built from their documents and written to the store.", c.profile_stats_built);
    metric("attune_corpus_stages_built_total", "counter",
           "Corpus first stages built (dense:DIR over a tenant's corpus, after a start or a corpus change).",
           c.corpus_stages_built);
    metric("attune_corpus_stage_builds_cancelled_total", "counter",
           "Corpus first stage builds given up: the corpus changed meanwhile, or the server stopped.",
           c.corpus_stage_builds_cancelled);
    metric("attune_corpus_stage_builds_failed_total", "counter",
           "Corpus first stage builds that failed (the tenant's queries keep BM25's candidates until its corpus changes).",
           c.corpus_stage_builds_failed);
    metric("attune_corpus_stage_cache_removed_total", "counter",
           "Cached corpus embeddings removed once a new stage no longer read them (passages deleted or changed).",
           c.corpus_stage_cache_removed);
    metric("attune_corpus_passages_embedded_total", "counter",
           "Corpus passages run through an encoder for a first stage (those cached in the store not counted).",
           c.corpus_passages_embedded);
    metric("attune_learner_lease", "gauge", "1 while this replica holds the store's learner lease (it alone learns).",
           c.learner_lease ? 1 : 0);
    metric("attune_tenants_loaded", "gauge", "Tenants whose documents are in memory.", c.tenants_loaded);
    metric("attune_user_documents", "gauge", "Users' documents in memory.", c.documents);
    metric("attune_corpus_documents", "gauge", "Corpus documents in memory.", c.corpus_documents);
    out += "# HELP attune_model_version The model version each loaded tenant serves, by agent (\"\" = calls naming "
           "none; 1 = its configured retriever).\n"
           "# TYPE attune_model_version gauge\n";
    for (const auto& [slot, version] : c.model_versions)
      out += "attune_model_version{tenant=\"" + std::to_string(slot.first) + "\",agent=\"" + slot.second + "\"} " +
             std::to_string(version) + "\n";
    if (!c.backlog.empty()) {
      out += "# HELP attune_feedback_backlog Feedback records of a tenant that no learning round has read yet.\n"
             "# TYPE attune_feedback_backlog gauge\n";
      for (const auto& [tenant, n] : c.backlog)
        out += "attune_feedback_backlog{tenant=\"" + std::to_string(tenant) + "\"} " + std::to_string(n) + "\n";
    }
    out += "# HELP attune_user_feedback_total Conversations curated (POST /v1/conversations/{id}/feedback), by filing.\n"
           "# TYPE attune_user_feedback_total counter\n";
    for (const auto& [filing, n] : service.filings())
      out += "attune_user_feedback_total{filing=\"" + filing + "\"} " + std::to_string(n) + "\n";
    if (opts.extra_metrics) out += opts.extra_metrics();
    return out;
  }
};

HttpServer::HttpServer(Service& service, HttpOptions o) : impl_(std::make_unique<Impl>(service, std::move(o))) {
  impl_->routes();
  auto& svr = impl_->svr;
  const auto& opts = impl_->opts;
  port_ = opts.port == 0 ? svr.bind_to_any_port(opts.host) : (svr.bind_to_port(opts.host, opts.port) ? opts.port : -1);
  if (port_ <= 0)
    throw UsageError("cannot listen on " + opts.host + ":" + std::to_string(opts.port) +
                     " (in use, or not an address of this machine)");
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  if (thread_.joinable()) return;
  impl_->listen_returned = false;
  thread_ = std::thread([this] {
    impl_->svr.listen_after_bind();
    impl_->listen_returned = true;
  });
  // Return once the accept loop runs: a stop() before it starts would be missed by it, and
  // the loop would then wait in accept() for ever.
  while (!impl_->svr.is_running() && !impl_->listen_returned)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::stop() {
  if (impl_) impl_->svr.stop();
  if (thread_.joinable()) thread_.join();
}

std::string HttpServer::metrics() const { return impl_->metrics_text(); }

}  // namespace attune::serve
