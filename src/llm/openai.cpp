#include "attune/llm/openai.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <signal.h>
#include <thread>
#include <vector>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/core/strings.h"
#include "attune/llm/generate_check.h"

namespace attune::llm {

using nlohmann::json;

std::size_t utf8_code_points(std::string_view s) {
  std::size_t n = 0;
  std::uint32_t cp;
  for (std::size_t i = 0; i < s.size(); ++n) i += utf8_decode(s, i, cp);
  return n;
}

// ---------------------------------------------------------------------------------------
// The spec

namespace {

double parse_number(std::string_view v, const std::string& key, const std::string& where) {
  const std::string s(v);
  char* end = nullptr;
  const double x = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || std::isspace(static_cast<unsigned char>(s[0])))
    throw UsageError(where + "setting " + key + "=\"" + s + "\" is not a number");
  return x;
}

long parse_integer(std::string_view v, const std::string& key, const std::string& where) {
  long x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size())
    throw UsageError(where + "setting " + key + "=\"" + std::string(v) + "\" is not an integer");
  return x;
}

}  // namespace

std::string redact_url_passwords(std::string_view text) {
  std::string out(text);
  for (std::size_t from = 0;;) {
    const auto scheme = out.find("://", from);
    if (scheme == std::string::npos) break;
    const std::size_t start = scheme + 3;
    const std::size_t end = out.find_first_of("/?#", start);
    const std::string_view authority = std::string_view(out).substr(start, end == std::string::npos ? std::string::npos : end - start);
    const auto at = authority.rfind('@');
    const auto colon = authority.find(':');
    if (at != std::string_view::npos && colon != std::string_view::npos && colon < at) {
      out.replace(start + colon + 1, at - colon - 1, "***");
      from = start + colon + 4;
    } else {
      from = start;
    }
  }
  return out;
}

namespace {

// One BASE_URL of the spec: http(s)://[USER:PASSWORD@]HOST[:PORT][/PATH]. The userinfo goes to
// basic auth; the URL kept (and every message) has none.
OpenAIEndpoint parse_base_url(std::string_view url_in, const std::string& where) {
  OpenAIEndpoint e;
  std::string stripped(url_in);
  if (const auto scheme = stripped.find("://"); scheme != std::string::npos) {
    const std::size_t start = scheme + 3;
    const std::size_t end = std::min(stripped.find_first_of("/?#", start), stripped.size());
    const auto at = stripped.rfind('@', end - 1);
    if (end > start && at != std::string::npos && at >= start) {
      e.userinfo = stripped.substr(start, at - start);
      if (e.userinfo.empty()) throw UsageError(where + "empty user name before '@' in the base URL");
      stripped.erase(start, at - start + 1);
    }
  }
  const std::string_view url = stripped;
  if (url.empty()) throw UsageError(where + "an empty base URL (expected openai:BASE_URL[,BASE_URL...]#MODEL)");
  std::string_view after;
  if (starts_with(url, "http://")) {
    after = url.substr(7);
  } else if (starts_with(url, "https://")) {
    after = url.substr(8);
  } else {
    throw UsageError(where + "base URL \"" + std::string(url) + "\" must start with http:// or https://");
  }
  const std::string_view authority = after.substr(0, after.find('/'));
  std::string_view host = authority, port;
  if (starts_with(authority, "[")) {  // [IPv6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos)
      throw UsageError(where + "base URL \"" + std::string(url) + "\": unclosed '[' in the host");
    host = authority.substr(0, close + 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw UsageError(where + "base URL \"" + std::string(url) + "\": bad host");
      port = authority.substr(close + 2);
    }
  } else if (const auto colon = authority.find(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) throw UsageError(where + "base URL \"" + std::string(url) + "\": empty port");
  }
  if (host.empty() || host == "[]") throw UsageError(where + "base URL \"" + std::string(url) + "\" has no host");
  if (!port.empty() || authority.find(':') != std::string_view::npos) {
    long p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || p < 1 || p > 65535)
      throw UsageError(where + "base URL \"" + std::string(url) + "\": bad port \"" + std::string(port) + "\"");
  }
  if (url.find_first_of("? \t") != std::string_view::npos)
    throw UsageError(where + "base URL \"" + std::string(url) + "\" may not contain a query or spaces");
  e.base_url = std::string(url);
  while (!e.base_url.empty() && e.base_url.back() == '/') e.base_url.pop_back();
  return e;
}

}  // namespace

OpenAIOptions parse_openai_spec(std::string_view spec_in) {
  const std::string where = "language model \"" + redact_url_passwords(spec_in) + "\": ";
  OpenAIOptions o;
  std::string_view s = spec_in;
  if (starts_with(s, "openai:")) s.remove_prefix(7);
  const auto hash = s.find('#');
  if (hash == std::string_view::npos)
    throw UsageError(where + "expected openai:BASE_URL#MODEL (no '#' before the model name)");
  std::string_view urls = s.substr(0, hash), rest = s.substr(hash + 1);
  const auto q = rest.find('?');
  o.model = std::string(rest.substr(0, q));
  if (o.model.empty()) throw UsageError(where + "no model name after '#' (expected openai:BASE_URL#MODEL)");

  // BASE_URL[,BASE_URL...]: servers of the same model.
  std::set<std::string> distinct;
  for (;;) {
    const auto comma = urls.find(',');
    auto e = parse_base_url(urls.substr(0, comma), where);
    if (!distinct.insert(e.base_url).second)
      throw UsageError(where + "base URL \"" + e.base_url + "\" is listed twice");
    o.endpoints.push_back(std::move(e));
    if (comma == std::string_view::npos) break;
    urls.remove_prefix(comma + 1);
  }
  o.base_url = o.endpoints.front().base_url;
  o.userinfo = o.endpoints.front().userinfo;

  if (q != std::string_view::npos) {
    std::string_view settings = rest.substr(q + 1);
    std::set<std::string> seen;
    for (;;) {
      const auto amp = settings.find('&');
      const std::string_view kv = settings.substr(0, amp);
      const auto eq = kv.find('=');
      if (kv.empty()) throw UsageError(where + "empty setting after '?' or '&'");
      if (eq == std::string_view::npos)
        throw UsageError(where + "setting \"" + std::string(kv) + "\" is not key=value");
      const std::string key(kv.substr(0, eq));
      const std::string_view value = kv.substr(eq + 1);
      if (!seen.insert(key).second) throw UsageError(where + "setting " + key + " given twice");
      if (key == "api") {
        if (value == "chat") o.chat = true;
        else if (value == "completions") o.chat = false;
        else throw UsageError(where + "setting api=\"" + std::string(value) + "\" (expected chat or completions)");
      } else if (key == "concurrency") {
        const long c = parse_integer(value, key, where);
        if (c < 1 || c > 1024) throw UsageError(where + "setting concurrency=" + std::string(value) + " must be in 1..1024");
        o.concurrency = static_cast<std::size_t>(c);
      } else if (key == "timeout") {
        o.timeout = parse_number(value, key, where);
        if (!(o.timeout > 0)) throw UsageError(where + "setting timeout=" + std::string(value) + " must be > 0 seconds");
      } else if (key == "retries") {
        const long r = parse_integer(value, key, where);
        if (r < 0 || r > 100) throw UsageError(where + "setting retries=" + std::string(value) + " must be in 0..100");
        o.retries = static_cast<int>(r);
      } else if (key == "max_response") {
        const long m = parse_integer(value, key, where);
        if (m < 1024 || m > (1L << 30))
          throw UsageError(where + "setting max_response=" + std::string(value) + " must be in 1024..1073741824 bytes");
        o.max_response = static_cast<std::size_t>(m);
      } else if (key == "backoff") {
        o.backoff = parse_number(value, key, where);
        if (o.backoff < 0) throw UsageError(where + "setting backoff=" + std::string(value) + " must be >= 0 seconds");
      } else {
        throw UsageError(where + "unknown setting \"" + key +
                         "\" (expected api, concurrency, timeout, max_response, retries or backoff)");
      }
      if (amp == std::string_view::npos) break;
      settings = settings.substr(amp + 1);
    }
  }
  return o;
}

std::unique_ptr<OpenAIModel> make_openai_model(std::string_view spec) {
  auto o = parse_openai_spec(spec);
  if (const char* key = std::getenv("ATTUNE_API_KEY")) o.api_key = key;
  return std::make_unique<OpenAIModel>(std::move(o));
}

// ---------------------------------------------------------------------------------------
// The client

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string snippet(const std::string& body) {
  std::string s = body.substr(0, 200);
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (body.size() > 200) s += "...";
  return s.empty() ? "(empty body)" : "\"" + s + "\"";
}

// The server's own words from an error body: {"error": {"message"}} (OpenAI, vLLM),
// {"error": "..."}, {"message"}, {"detail"} (FastAPI), else the body's first characters.
std::string server_message(const std::string& body) {
  try {
    const json j = json::parse(body);
    if (j.is_object()) {
      if (j.contains("error")) {
        const auto& e = j["error"];
        if (e.is_string()) return e.get<std::string>();
        if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
      }
      for (const char* k : {"message", "detail"})
        if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
      if (j.contains("detail")) return j["detail"].dump();
    }
  } catch (const json::exception&) {
  }
  return snippet(body);
}

}  // namespace

namespace {

// Whole-request deadlines: a socket timeout bounds each read, not the request, so a server
// that trickles one byte at a time could hold a request forever. One thread watches the
// attempts in flight and shuts the socket of any past its deadline (Client::stop is meant
// to be called from another thread); the blocked request then returns an error.
class Deadlines {
 public:
  ~Deadlines() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t arm(httplib::Client* c, Clock::time_point deadline) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    const std::uint64_t id = ++next_;
    live_.emplace(id, Entry{deadline, c, false});
    cv_.notify_all();
    return id;
  }
  // Forgets the attempt; true when its deadline fired (the socket was shut).
  bool disarm(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    const bool fired = it != live_.end() && it->second.fired;
    if (it != live_.end()) live_.erase(it);
    return fired;
  }

 private:
  struct Entry {
    Clock::time_point deadline;
    httplib::Client* client;
    bool fired;
  };
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!quit_) {
      auto next = Clock::time_point::max();
      const auto now = Clock::now();
      for (auto& [id, e] : live_) {
        if (e.fired) continue;
        if (e.deadline <= now) {
          e.fired = true;
          e.client->stop();  // disarm() waits for mu_, so the client outlives this call
        } else {
          next = std::min(next, e.deadline);
        }
      }
      if (next == Clock::time_point::max()) cv_.wait(lock);
      else cv_.wait_until(lock, next);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, Entry> live_;
  std::uint64_t next_ = 0;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace

struct OpenAIModel::Impl {
  OpenAIOptions o;

  // One server of the model; its state (but the counters) under `mu`.
  struct Endpoint {
    std::string base_url;
    std::string host;    // scheme://host[:port]
    std::string prefix;  // the base URL's path ("/v1"), no trailing '/'
    std::string userinfo;
    std::vector<std::unique_ptr<httplib::Client>> idle;  // keep-alive connections
    std::size_t outstanding = 0;
    int failures_in_a_row = 0;
    Clock::time_point back_at{};  // set aside until then after a failure
    std::atomic<std::uint64_t> requests{0}, errors{0};
  };
  std::vector<std::unique_ptr<Endpoint>> endpoints;

  // Concurrency slots, shared by all threads and endpoints.
  std::mutex mu;
  std::condition_variable cv;
  std::size_t in_use = 0;
  std::size_t turn = 0;  // where the search for the least loaded endpoint starts (ties rotate)

  std::mutex rng_mu;
  std::mt19937_64 rng{0x6f70656e6169ULL};

  std::atomic<std::uint64_t> requests{0}, retries{0}, failures{0}, timeouts{0}, oversized{0}, prompt_tokens{0},
      completion_tokens{0}, straddling{0};
  Deadlines deadlines;  // declared after the pool: destroyed (joined) before the clients
  std::atomic<double> request_seconds{0}, backoff_seconds{0}, queue_seconds{0};

  // An attempt's endpoint and connection.
  struct Lease {
    Endpoint* endpoint = nullptr;
    std::unique_ptr<httplib::Client> client;
  };

  // Under `mu`: the available endpoint with the fewest requests outstanding, the search
  // starting one further each time (so ties rotate); when every one is set aside, the one
  // back first.
  Endpoint* pick() {
    const auto now = Clock::now();
    const std::size_t n = endpoints.size();
    Endpoint* best = nullptr;
    for (std::size_t k = 0; k < n; ++k) {
      Endpoint* e = endpoints[(turn + k) % n].get();
      if (e->back_at > now) continue;
      if (!best || e->outstanding < best->outstanding) best = e;
    }
    if (!best)
      for (const auto& e : endpoints)
        if (!best || e->back_at < best->back_at) best = e.get();
    turn = (turn + 1) % n;
    return best;
  }

  Lease acquire() {
    const auto t0 = Clock::now();
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return in_use < o.concurrency; });
    ++in_use;
    queue_seconds.fetch_add(seconds_since(t0));
    Lease l;
    l.endpoint = pick();
    ++l.endpoint->outstanding;
    if (!l.endpoint->idle.empty()) {
      l.client = std::move(l.endpoint->idle.back());
      l.endpoint->idle.pop_back();
      return l;
    }
    lock.unlock();
    auto c = std::make_unique<httplib::Client>(l.endpoint->host);
    const auto t = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(o.timeout));
    c->set_connection_timeout(t);
    c->set_read_timeout(t);
    c->set_write_timeout(t);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);  // headers and body go in separate writes: no Nagle delay
    const std::string& user = l.endpoint->userinfo;
    if (!user.empty()) {
      const auto colon = user.find(':');
      c->set_basic_auth(user.substr(0, colon), colon == std::string::npos ? "" : user.substr(colon + 1));
    }
    l.client = std::move(c);
    return l;
  }
  // keep = false drops the connection (after an error its state is unknown).
  void release(Lease& l, bool keep) {
    {
      std::lock_guard<std::mutex> lock(mu);
      --in_use;
      --l.endpoint->outstanding;
      if (keep && l.client) l.endpoint->idle.push_back(std::move(l.client));
    }
    l.client.reset();
    cv.notify_one();
  }
  // After an attempt: a success ends the endpoint's cool-down; a failure of the server
  // (not of the request) sets it aside, with several endpoints, for `retry_after` seconds
  // when the server said, else 1 s doubling with each failure in a row, at most 30 s.
  void settle(Endpoint* e, bool ok, double retry_after) {
    std::lock_guard<std::mutex> lock(mu);
    if (ok) {
      e->failures_in_a_row = 0;
      e->back_at = {};
      return;
    }
    ++e->errors;
    if (endpoints.size() == 1) return;  // one server: the backoff below is the whole policy
    const int f = ++e->failures_in_a_row;
    const double cool = retry_after >= 0 ? retry_after : std::min(30.0, std::ldexp(1.0, std::min(f - 1, 5)));
    e->back_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cool));
  }
  // Whether an endpoint is available now (a retry can go there without waiting).
  bool any_available() {
    std::lock_guard<std::mutex> lock(mu);
    const auto now = Clock::now();
    for (const auto& e : endpoints)
      if (e->back_at <= now) return true;
    return false;
  }

  double jitter(int retry) {
    const double ceiling = std::min(o.backoff_cap, o.backoff * std::ldexp(1.0, std::min(retry, 60)));
    std::lock_guard<std::mutex> lock(rng_mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng) * ceiling;
  }

  // POSTs body to BASE_URL + endpoint with retries; the parsed JSON of a 2xx answer, and in
  // `served_by` the base URL of the server that gave it.
  json post(const std::string& endpoint, const json& body, std::string& served_by) {
    const std::string payload = body.dump(-1, ' ', false, json::error_handler_t::replace);
    httplib::Headers headers;
    if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
    std::string last;
    for (int attempt = 0;; ++attempt) {
      auto lease = acquire();
      Endpoint* ep = lease.endpoint;
      const std::string url = ep->base_url + endpoint, path = ep->prefix + endpoint;
      auto& client = lease.client;
      ++requests;
      ++ep->requests;
      const auto t0 = Clock::now();
      httplib::Request req;
      req.method = "POST";
      req.path = path;
      req.headers = headers;
      req.body = payload;
      req.set_header("Content-Type", "application/json");
      std::string received;
      bool too_large = false;
      const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout));
      req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        if (received.size() + n > o.max_response) {
          too_large = true;
          return false;
        }
        received.append(data, n);
        return Clock::now() < deadline;
      };
      const std::uint64_t watch = deadlines.arm(client.get(), deadline);
      auto res = client->send(req);
      const bool expired = deadlines.disarm(watch) || Clock::now() >= deadline;
      const double dt = seconds_since(t0);
      request_seconds.fetch_add(dt);
      double retry_after = -1;
      bool retryable = true;
      if (too_large) {
        release(lease, false);
        ++oversized;
        throw Error(url + ": the answer is larger than max_response=" + std::to_string(o.max_response) +
                    " bytes (raise it in the spec: ...?max_response=BYTES)");
      }
      if (!res || expired) {
        release(lease, false);
        const auto err = res ? httplib::Error::Read : res.error();
        const bool timed_out = expired || err == httplib::Error::ConnectionTimeout ||
                               ((err == httplib::Error::Read || err == httplib::Error::Write) && dt >= 0.9 * o.timeout);
        if (timed_out) {
          ++timeouts;
          char buf[96];
          std::snprintf(buf, sizeof buf, "no complete answer within the timeout of %gs", o.timeout);
          last = buf;
        } else {
          last = httplib::to_string(err);
        }
        retryable = timed_out || err == httplib::Error::Connection || err == httplib::Error::Read ||
                    err == httplib::Error::Write || err == httplib::Error::ConnectionTimeout ||
                    err == httplib::Error::Unknown || err == httplib::Error::SSLConnection;
      } else {
        const int status = res->status;
        std::string text = std::move(received);
        const std::string ra = res->get_header_value("Retry-After");
        release(lease, true);
        if (status >= 200 && status < 300) {
          settle(ep, true, -1);
          served_by = ep->base_url;
          try {
            return json::parse(text);
          } catch (const json::exception&) {
            throw Error(url + ": the response is not JSON: " + snippet(text));
          }
        }
        last = "HTTP " + std::to_string(status) + ": " + server_message(text);
        if (status == 429 || status >= 500) {
          if (!ra.empty()) {
            char* end = nullptr;
            const double v = std::strtod(ra.c_str(), &end);
            if (end == ra.c_str() + ra.size() && std::isfinite(v) && v >= 0) retry_after = std::min(v, 600.0);
          }
        } else {
          if (status == 401 || status == 403)
            last += o.api_key.empty() ? " (the server wants an API key: set ATTUNE_API_KEY)"
                                      : " (check the key in ATTUNE_API_KEY)";
          throw Error(url + ": " + last);
        }
      }
      if (retryable) settle(ep, false, retry_after);
      if (!retryable || attempt >= o.retries)
        throw Error(url + ": " + last + " (" + std::to_string(attempt + 1) + (attempt ? " attempts)" : " attempt)"));
      ++retries;
      if (endpoints.size() > 1 && any_available()) continue;  // another server takes it at once
      const double delay = retry_after >= 0 ? retry_after : jitter(attempt);
      backoff_seconds.fetch_add(delay);
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    }
  }

  // Runs one call; counts it in `failures` when it throws.
  template <class F>
  auto counting_failures(F&& f) {
    try {
      return f();
    } catch (...) {
      ++failures;
      throw;
    }
  }

  // `url`: the server's base URL and the endpoint that answered.
  [[noreturn]] void malformed(const std::string& url, const std::string& field, const std::string& what) {
    throw Error(url + ": malformed response: field \"" + field + "\" " + what);
  }

  void count_usage(const json& r) {
    if (!r.is_object() || !r.contains("usage") || !r["usage"].is_object()) return;
    const auto& u = r["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_unsigned())
      prompt_tokens += u["prompt_tokens"].get<std::uint64_t>();
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_unsigned())
      completion_tokens += u["completion_tokens"].get<std::uint64_t>();
  }

  const json& first_choice(const std::string& url, const json& r) {
    if (!r.is_object()) malformed(url, "(top level)", "is not an object");
    if (!r.contains("choices")) malformed(url, "choices", "is missing");
    const auto& c = r["choices"];
    if (!c.is_array() || c.empty()) malformed(url, "choices", "is not a non-empty array");
    if (!c[0].is_object()) malformed(url, "choices[0]", "is not an object");
    return c[0];
  }

  std::string generate_one(const std::string& text, const GenerateOptions& g) {
    json body = {{"model", o.model}, {"max_tokens", g.max_new_tokens}, {"n", 1}};
    if (g.beams > 1) {  // vLLM's beam search extension
      body["use_beam_search"] = true;
      body["best_of"] = g.beams;
      body["temperature"] = 0.0;
      body["top_p"] = 1.0;
    } else {
      body["temperature"] = g.temperature;
      body["top_p"] = g.temperature > 0 ? g.top_p : 1.0;
      if (g.temperature > 0) body["seed"] = g.seed;
    }
    const std::string endpoint = o.chat ? "/chat/completions" : "/completions";
    if (o.chat)
      body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
    else
      body["prompt"] = text;
    std::string served;
    const json r = post(endpoint, body, served);
    const std::string at = served + endpoint;
    count_usage(r);
    const auto& c = first_choice(at, r);
    if (o.chat) {
      if (!c.contains("message") || !c["message"].is_object()) malformed(at, "choices[0].message", "is missing");
      const auto& m = c["message"];
      if (!m.contains("content") || !m["content"].is_string())
        malformed(at, "choices[0].message.content", "is missing or not a string");
      return m["content"].get<std::string>();
    }
    if (!c.contains("text") || !c["text"].is_string()) malformed(at, "choices[0].text", "is missing or not a string");
    return c["text"].get<std::string>();
  }

  double score_one(const ScoreRequest& req) {
    if (req.target.empty()) return 0.0;
    const std::string endpoint = "/completions";
    const json body = {{"model", o.model}, {"prompt", req.prompt + req.target}, {"echo", true}, {"logprobs", 1},
                       {"max_tokens", 1}, {"temperature", 0.0}, {"n", 1}};
    std::string served;
    const json r = post(endpoint, body, served);
    const std::string at = served + endpoint;
    count_usage(r);
    const auto& c = first_choice(at, r);
    auto cannot = [&](const std::string& field) {
      return Error(at +
                   ": the server cannot return prompt log-probabilities (echo+logprobs, as vLLM serves them): field \"" +
                   field + "\" is missing or null");
    };
    if (!c.contains("logprobs") || c["logprobs"].is_null()) throw cannot("choices[0].logprobs");
    const auto& lp = c["logprobs"];
    if (!lp.is_object()) malformed(at, "choices[0].logprobs", "is not an object");
    for (const char* f : {"token_logprobs", "text_offset"})
      if (!lp.contains(f) || lp[f].is_null()) throw cannot(std::string("choices[0].logprobs.") + f);
    const auto& lps = lp["token_logprobs"];
    const auto& offs = lp["text_offset"];
    if (!lps.is_array()) malformed(at, "choices[0].logprobs.token_logprobs", "is not an array");
    if (!offs.is_array()) malformed(at, "choices[0].logprobs.text_offset", "is not an array");
    if (lps.size() != offs.size())
      malformed(at, "choices[0].logprobs.text_offset", "has " + std::to_string(offs.size()) +
                                                                  " entries but token_logprobs has " +
                                                                  std::to_string(lps.size()));
    const std::size_t P = utf8_code_points(req.prompt);
    const std::size_t T = P + utf8_code_points(req.target);
    // The echoed text must be what was sent: choices[0].text (prompt + target + the one
    // generated token), else the tokens' texts joined.
    const json* toks = lp.contains("tokens") && lp["tokens"].is_array() ? &lp["tokens"] : nullptr;
    if (toks && toks->size() != lps.size())
      malformed(at, "choices[0].logprobs.tokens", "has " + std::to_string(toks->size()) +
                                                            " entries but token_logprobs has " + std::to_string(lps.size()));
    const std::string sent = req.prompt + req.target;
    if (c.contains("text") && c["text"].is_string()) {
      if (!starts_with(c["text"].get_ref<const std::string&>(), sent))
        malformed(at, "choices[0].text", "does not begin with the prompt and target that were sent (is echo ignored?)");
    } else if (toks) {
      std::string joined;
      for (const auto& t : *toks) {
        if (!t.is_string()) malformed(at, "choices[0].logprobs.tokens", "holds a non-string token");
        joined += t.get<std::string>();
        if (joined.size() >= sent.size()) break;
      }
      if (!starts_with(joined, sent))
        malformed(at, "choices[0].logprobs.tokens", "do not spell the prompt and target that were sent");
    }
    std::vector<std::size_t> off(offs.size());
    for (std::size_t i = 0; i < offs.size(); ++i) {
      const std::string field = "choices[0].logprobs.text_offset[" + std::to_string(i) + "]";
      if (!offs[i].is_number_integer() || offs[i].get<long long>() < 0)
        malformed(at, field, "is not a non-negative integer");
      off[i] = offs[i].get<std::size_t>();
      if (i && off[i] < off[i - 1]) malformed(at, field, "decreases");
      // Two tokens at one offset: only a text-less piece (a byte-fallback fragment) may
      // share its successor's offset.
      if (i && off[i] == off[i - 1]) {
        const bool empty_piece = toks && (*toks)[i - 1].is_string() && (*toks)[i - 1].get_ref<const std::string&>().empty();
        if (!empty_piece && !(i == 1 && lps[0].is_null()))
          malformed(at, field, "repeats the offset of token " + std::to_string(i - 1));
      }
      if (off[i] > T + 1024) malformed(at, field, "lies past the end of the echoed text");
    }
    for (std::size_t i = 0; i < lps.size(); ++i)
      if (lps[i].is_number() && !(lps[i].get<double>() <= 0.0))
        malformed(at, "choices[0].logprobs.token_logprobs[" + std::to_string(i) + "]",
                  "is " + lps[i].dump() + ": a log-probability must be <= 0");
    double total = 0;
    std::size_t counted = 0, straddles = 0;
    for (std::size_t i = 0; i < off.size() && off[i] < T; ++i) {
      const std::size_t start = off[i];
      const std::size_t end = std::min(T, i + 1 < off.size() ? off[i + 1] : T);
      if (start < P && end <= P) continue;  // a prompt token
      const std::string field = "choices[0].logprobs.token_logprobs[" + std::to_string(i) + "]";
      if (lps[i].is_null()) {
        if (i == 0 && end == start) continue;  // a text-less first token (BOS): no probability, no text
        if (i == 0 || start == 0)
          throw Error(at +
                      ": the server gives no probability for the first token of a text, so score needs a non-empty "
                      "prompt");
        throw cannot(field);
      }
      if (!lps[i].is_number()) malformed(at, field, "is not a number");
      if (start < P) ++straddles;
      total += lps[i].get<double>();
      ++counted;
    }
    if (counted == 0)
      throw Error(at +
                  ": no echoed token lies in the target (choices[0].logprobs.text_offset does not cover the prompt "
                  "text; does the server echo the prompt?)");
    straddling += straddles;
    return total;
  }
};

OpenAIModel::OpenAIModel(OpenAIOptions opts) : opts_(std::move(opts)), impl_(std::make_unique<Impl>()) {
  if (opts_.endpoints.empty()) opts_.endpoints.push_back({opts_.base_url, opts_.userinfo});
  impl_->o = opts_;
  if (opts_.concurrency == 0) impl_->o.concurrency = 1;
  for (const auto& e : opts_.endpoints) {
    const bool https = starts_with(e.base_url, "https://");
    if (!https && !starts_with(e.base_url, "http://"))
      throw UsageError("openai base URL \"" + e.base_url + "\" must start with http:// or https://");
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
    if (https)
      throw UsageError("openai base URL \"" + e.base_url +
                       "\": https is not supported by this build (cpp-httplib without OpenSSL); use http://");
#endif
    auto ep = std::make_unique<Impl::Endpoint>();
    ep->base_url = e.base_url;
    ep->userinfo = e.userinfo;
    const std::size_t scheme_end = e.base_url.find("://") + 3;
    const std::size_t slash = e.base_url.find('/', scheme_end);
    ep->host = e.base_url.substr(0, slash);
    ep->prefix = slash == std::string::npos ? "" : e.base_url.substr(slash);
    httplib::Client probe(ep->host);
    if (!probe.is_valid()) throw UsageError("openai base URL \"" + e.base_url + "\": cannot use this host");
    impl_->endpoints.push_back(std::move(ep));
  }
  // cpp-httplib's client writes with plain send(): a server that closes a keep-alive
  // connection would kill the process with SIGPIPE. Ignore it unless someone handles it.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
}

OpenAIModel::~OpenAIModel() = default;

std::vector<Generation> OpenAIModel::generate(std::span<const Prompt> prompts, const GenerateOptions& g) {
  refuse_constrained_decoding(g, "an openai: model");
  std::vector<Generation> out(prompts.size());
  parallel_for(prompts.size(), opts_.concurrency,
               [&](std::size_t i) { out[i].text = impl_->counting_failures([&] { return impl_->generate_one(prompts[i].text, g); }); });
  return out;
}

std::vector<double> OpenAIModel::score(std::span<const ScoreRequest> requests) {
  std::vector<double> out(requests.size());
  parallel_for(requests.size(), opts_.concurrency, [&](std::size_t i) {
    out[i] = impl_->counting_failures([&] { return impl_->score_one(requests[i]); });
  });
  return out;
}

ModelInfo OpenAIModel::info() const {
  // Replicas of one model give the same answers: the id names them all, sorted, so the
  // order they are listed in does not change the cache key (one server: its URL, as always).
  std::vector<std::string> urls;
  for (const auto& e : opts_.endpoints) urls.push_back(e.base_url);
  if (urls.empty()) urls.push_back(opts_.base_url);
  std::sort(urls.begin(), urls.end());
  std::string joined;
  for (const auto& u : urls) joined += (joined.empty() ? "" : ",") + u;
  return {"openai:" + joined + "#" + opts_.model + "?api=" + (opts_.chat ? "chat" : "completions")};
}

std::vector<std::pair<std::string, double>> OpenAIModel::counters() const {
  const Impl& m = *impl_;
  std::vector<std::pair<std::string, double>> out = {{"requests", static_cast<double>(m.requests)},
          {"retries", static_cast<double>(m.retries)},
          {"failures", static_cast<double>(m.failures)},
          {"timeouts", static_cast<double>(m.timeouts)},
          {"oversized", static_cast<double>(m.oversized)},
          {"prompt_tokens", static_cast<double>(m.prompt_tokens)},
          {"completion_tokens", static_cast<double>(m.completion_tokens)},
          {"straddling_tokens", static_cast<double>(m.straddling)},
          {"request_seconds", m.request_seconds.load()},
          {"backoff_seconds", m.backoff_seconds.load()},
          {"queue_seconds", m.queue_seconds.load()}};
  if (m.endpoints.size() > 1)
    for (std::size_t i = 0; i < m.endpoints.size(); ++i) {
      const std::string n = "endpoint_" + std::to_string(i + 1);
      out.emplace_back(n + "_requests", static_cast<double>(m.endpoints[i]->requests));
      out.emplace_back(n + "_errors", static_cast<double>(m.endpoints[i]->errors));
    }
  return out;
}

}  // namespace attune::llm
