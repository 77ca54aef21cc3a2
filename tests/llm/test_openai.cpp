// The openai: backend against a loopback server that answers like vLLM.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/llm/openai.h"

using namespace attune;
using nlohmann::json;

namespace {

// vLLM-like tokens: a space joins the word after it, words are cut into pieces of at most
// 5 code points. Offsets are in code points, as OpenAI / vLLM report text_offset.
struct Token {
  std::string text;
  std::size_t offset;
};

std::vector<Token> tokenize(const std::string& s) {
  std::vector<Token> out;
  std::size_t i = 0, cp_index = 0;
  std::string cur;
  std::size_t cur_start = 0, cur_len = 0;
  auto flush = [&] {
    if (!cur.empty()) out.push_back({cur, cur_start});
    cur.clear();
    cur_len = 0;
  };
  while (i < s.size()) {
    std::uint32_t cp;
    const std::size_t n = utf8_decode(s, i, cp);
    const bool space = cp == ' ';
    if (space || cur_len == 5) flush();
    if (cur.empty()) cur_start = cp_index;
    cur.append(s, i, n);
    ++cur_len;
    i += n;
    ++cp_index;
  }
  flush();
  return out;
}

// Token i (0-based) of an echoed prompt has log-probability -(i + 1) / 4; token 0 has none.
double token_logprob(std::size_t i) { return -(static_cast<double>(i) + 1) / 4; }

class FakeServer {
 public:
  enum class Mode {
    normal, garbage, no_logprobs, no_offsets, unauthorized, no_choices,
    trickle,           // a valid 38-byte answer, one byte every 50 ms
    endless,           // a chunked 200 that never ends
    positive_logprob,  // echo whose target token has log-probability +0.5
    repeated_offset,   // two non-empty tokens at one offset
    wrong_echo,        // echoes a text other than the one sent
  };
  std::atomic<int> fail_429{0}, fail_500{0};
  std::atomic<int> delay_ms{0};
  std::atomic<Mode> mode{Mode::normal};
  std::atomic<int> in_flight{0}, max_in_flight{0}, hits{0};
  std::mutex mu;
  std::string last_auth;
  json last_body;

  FakeServer() {
    svr_.set_keep_alive_timeout(1);
    svr_.set_tcp_nodelay(true);
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); };
    svr_.Post("/v1/completions", handler);
    svr_.Post("/v1/chat/completions", handler);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    svr_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::string spec(const std::string& settings = "") const {
    return "openai:http://127.0.0.1:" + std::to_string(port_) + "/v1#tiny-model" + (settings.empty() ? "" : "?" + settings);
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    const int now = ++in_flight;
    int seen = max_in_flight.load();
    while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
    }
    ++hits;
    {
      std::lock_guard<std::mutex> lock(mu);
      last_auth = req.get_header_value("Authorization");
      last_body = json::parse(req.body);
    }
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    respond(req, res);
    --in_flight;
  }

  void respond(const httplib::Request& req, httplib::Response& res) {
    if (fail_429 > 0) {
      --fail_429;
      res.status = 429;
      res.set_header("Retry-After", "0.2");
      res.set_content(R"({"error":{"message":"slow down"}})", "application/json");
      return;
    }
    if (fail_500 > 0) {
      --fail_500;
      res.status = 500;
      res.set_content(R"({"error":{"message":"engine hiccup"}})", "application/json");
      return;
    }
    switch (mode.load()) {
      case Mode::garbage:
        res.set_content("<html>gateway</html>", "text/html");
        return;
      case Mode::unauthorized:
        res.status = 401;
        res.set_content(R"({"error":{"message":"invalid api key"}})", "application/json");
        return;
      case Mode::no_choices:
        res.set_content(R"({"object":"text_completion"})", "application/json");
        return;
      case Mode::trickle:
        res.set_chunked_content_provider("application/json", [](std::size_t offset, httplib::DataSink& sink) {
          static const std::string body = R"({"choices":[{"text":"slow but sure"}]})";
          if (offset >= body.size()) {
            sink.done();
            return true;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          return sink.write(body.data() + offset, 1);
        });
        return;
      case Mode::endless:
        res.set_chunked_content_provider("application/json", [](std::size_t, httplib::DataSink& sink) {
          static const std::string chunk(1 << 16, 'x');
          return sink.write(chunk.data(), chunk.size());
        });
        return;
      default:
        break;
    }
    const json body = json::parse(req.body);
    json choice;
    if (req.path == "/v1/chat/completions") {
      choice = {{"index", 0},
                {"message", {{"role", "assistant"}, {"content", "chat:" + body["messages"][0]["content"].get<std::string>()}}},
                {"finish_reason", "stop"}};
      res.set_content(json({{"choices", {choice}}, {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 2}}}}).dump(),
                      "application/json");
      return;
    }
    const std::string prompt = body["prompt"].get<std::string>();
    if (!body.value("echo", false)) {
      choice = {{"index", 0}, {"text", "gen:" + prompt}, {"logprobs", nullptr}, {"finish_reason", "length"}};
      res.set_content(json({{"choices", {choice}}, {"usage", {{"prompt_tokens", 3}, {"completion_tokens", 4}}}}).dump(),
                      "application/json");
      return;
    }
    // echo + logprobs: the prompt's tokens, then one generated token.
    auto toks = tokenize(prompt);
    json tokens = json::array(), lps = json::array(), offs = json::array(), top = json::array();
    for (std::size_t i = 0; i < toks.size(); ++i) {
      tokens.push_back(toks[i].text);
      lps.push_back(i == 0 ? json(nullptr) : json(token_logprob(i)));
      offs.push_back(toks[i].offset);
      top.push_back(i == 0 ? json(nullptr) : json({{toks[i].text, token_logprob(i)}}));
    }
    tokens.push_back(".");
    lps.push_back(-9.0);
    offs.push_back(utf8_code_points_of(prompt));
    top.push_back({{".", -9.0}});
    if (mode == Mode::positive_logprob) lps[lps.size() - 2] = 0.5;
    if (mode == Mode::repeated_offset && offs.size() > 2) offs[offs.size() - 2] = offs[offs.size() - 3];
    std::string echoed = prompt + ".";
    if (mode == Mode::wrong_echo) echoed = "something else entirely.";
    json logprobs = {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", top}};
    if (mode != Mode::no_offsets) logprobs["text_offset"] = offs;
    choice = {{"index", 0}, {"text", echoed}, {"finish_reason", "length"}};
    if (mode != Mode::no_logprobs) choice["logprobs"] = logprobs;
    res.set_content(json({{"choices", {choice}},
                          {"usage", {{"prompt_tokens", toks.size()}, {"completion_tokens", 1}}}})
                        .dump(),
                    "application/json");
  }
  static std::size_t utf8_code_points_of(const std::string& s) { return llm::utf8_code_points(s); }

  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

double counter(const llm::LanguageModel& m, const std::string& name) {
  for (auto& [k, v] : m.counters())
    if (k == name) return v;
  ADD_FAILURE() << "no counter " << name;
  return -1;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A port that nothing listens on any more.
int dead_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

class OpenAI : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("ATTUNE_API_KEY"); }
  FakeServer server;
};

}  // namespace

TEST(OpenAISpec, ParsesUrlModelAndSettings) {
  auto o = llm::parse_openai_spec("openai:http://127.0.0.1:8000/v1/#Qwen/Qwen2-7B");
  EXPECT_EQ(o.base_url, "http://127.0.0.1:8000/v1");
  EXPECT_EQ(o.model, "Qwen/Qwen2-7B");
  EXPECT_FALSE(o.chat);
  EXPECT_EQ(o.concurrency, 8u);
  EXPECT_EQ(o.timeout, 60);
  EXPECT_EQ(o.retries, 5);
  EXPECT_EQ(o.backoff, 0.5);
  o = llm::parse_openai_spec("openai:https://api.example.com/v1#m?api=chat&concurrency=3&timeout=2.5&retries=0&backoff=0.01");
  EXPECT_EQ(o.base_url, "https://api.example.com/v1");
  EXPECT_TRUE(o.chat);
  EXPECT_EQ(o.concurrency, 3u);
  EXPECT_EQ(o.timeout, 2.5);
  EXPECT_EQ(o.retries, 0);
  EXPECT_EQ(o.backoff, 0.01);
  EXPECT_EQ(llm::parse_openai_spec("openai:http://host#m").base_url, "http://host");
}

TEST(OpenAISpec, ErrorsNameTheBadPart) {
  auto usage = [](const std::string& spec) {
    try {
      llm::parse_openai_spec(spec);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no usage error)");
  };
  EXPECT_NE(usage("openai:http://h:8000/v1").find("'#'"), std::string::npos);
  EXPECT_NE(usage("openai:http://h:8000/v1#").find("no model"), std::string::npos);
  EXPECT_NE(usage("openai:http://h:8000/v1#?api=chat").find("no model"), std::string::npos);
  EXPECT_NE(usage("openai:ftp://h/v1#m").find("http:// or https://"), std::string::npos);
  EXPECT_NE(usage("openai:h:8000/v1#m").find("http:// or https://"), std::string::npos);
  EXPECT_NE(usage("openai:http://#m").find("no host"), std::string::npos);
  EXPECT_NE(usage("openai:http://h:80x/v1#m").find("bad port"), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?colour=red").find("unknown setting \"colour\""), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?concurrency=many").find("concurrency=\"many\""), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?concurrency=0").find("concurrency=0"), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?timeout=-1").find("timeout=-1"), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?timeout=1s").find("timeout=\"1s\""), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?retries=2.5").find("retries=\"2.5\""), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?api=rest").find("api=\"rest\""), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?api").find("key=value"), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?api=chat&api=chat").find("twice"), std::string::npos);
  EXPECT_NE(usage("openai:http://h/v1#m?").find("empty setting"), std::string::npos);
}

TEST(OpenAISpec, IdNamesModelUrlAndApiOnly) {
  llm::OpenAIModel a(llm::parse_openai_spec("openai:http://127.0.0.1:9/v1#m?concurrency=2&timeout=5"));
  llm::OpenAIModel b(llm::parse_openai_spec("openai:http://127.0.0.1:9/v1/#m"));
  llm::OpenAIModel c(llm::parse_openai_spec("openai:http://127.0.0.1:9/v1#m?api=chat"));
  EXPECT_EQ(a.info().id, "openai:http://127.0.0.1:9/v1#m?api=completions");
  EXPECT_EQ(a.info().id, b.info().id);
  EXPECT_NE(a.info().id, c.info().id);
  auto https = llm::parse_openai_spec("openai:https://api.example.com/v1#m");
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  EXPECT_NO_THROW(llm::OpenAIModel{https});  // Debian's cpp-httplib has OpenSSL (no request is made)
#else
  EXPECT_THROW(llm::OpenAIModel{https}, UsageError);
#endif
}

TEST(OpenAIText, CodePoints) {
  EXPECT_EQ(llm::utf8_code_points(""), 0u);
  EXPECT_EQ(llm::utf8_code_points("café → "), 7u);
  EXPECT_EQ(std::string("café → ").size(), 10u);
}

TEST_F(OpenAI, CompletionsGenerate) {
  auto m = llm::make_openai_model(server.spec());
  std::vector<llm::Prompt> ps = {{"hello"}, {"café →"}};
  llm::GenerateOptions g;
  g.max_new_tokens = 7;
  auto out = m->generate(ps, g);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].text, "gen:hello");
  EXPECT_EQ(out[1].text, "gen:café →");
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_EQ(server.last_body["model"], "tiny-model");
  EXPECT_EQ(server.last_body["max_tokens"], 7);
  EXPECT_EQ(server.last_body["temperature"], 0.0);
  EXPECT_EQ(server.last_body["n"], 1);
  EXPECT_FALSE(server.last_body.contains("use_beam_search"));
  EXPECT_EQ(server.last_auth, "");  // no key, no header
  EXPECT_EQ(counter(*m, "requests"), 2);
  EXPECT_EQ(counter(*m, "prompt_tokens"), 6);
  EXPECT_EQ(counter(*m, "completion_tokens"), 8);
  EXPECT_EQ(counter(*m, "retries"), 0);
}

TEST_F(OpenAI, ChatGenerateAndBeams) {
  auto m = llm::make_openai_model(server.spec("api=chat"));
  std::vector<llm::Prompt> ps = {{"hi there"}};
  llm::GenerateOptions g;
  g.beams = 4;
  EXPECT_EQ(m->generate(ps, g).at(0).text, "chat:hi there");
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_EQ(server.last_body["messages"][0]["role"], "user");
  EXPECT_EQ(server.last_body["use_beam_search"], true);
  EXPECT_EQ(server.last_body["best_of"], 4);
  EXPECT_EQ(server.last_body["temperature"], 0.0);
}

TEST_F(OpenAI, ScoreByCodePointOffsetsEqualsTheHandSum) {
  auto m = llm::make_openai_model(server.spec());
  // "café →" + " le lait": tokens "café"(0, no logprob) " →"(1) " le"(2) " lait"(3), then
  // the generated "." The prompt is 6 code points but 9 bytes: the target's tokens are 2, 3.
  std::vector<llm::ScoreRequest> reqs = {{"café →", " le lait"}};
  auto s = m->score(reqs);
  EXPECT_DOUBLE_EQ(s.at(0), token_logprob(2) + token_logprob(3));
  EXPECT_EQ(counter(*m, "straddling_tokens"), 0);
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_EQ(server.last_body["prompt"], "café → le lait");
  EXPECT_EQ(server.last_body["echo"], true);
  EXPECT_EQ(server.last_body["temperature"], 0.0);
}

TEST_F(OpenAI, StraddlingTokenCountsForTheTarget) {
  auto m = llm::make_openai_model(server.spec());
  // "café → " + "le lait": the token " le" starts on the prompt's trailing space.
  std::vector<llm::ScoreRequest> reqs = {{"café → ", "le lait"}, {"a b", "cdefgh"}};
  auto s = m->score(reqs);
  EXPECT_DOUBLE_EQ(s.at(0), token_logprob(2) + token_logprob(3));
  // "a b" + "cdefgh" = "a", " bcde", "fgh": " bcde" straddles, "fgh" is in the target.
  EXPECT_DOUBLE_EQ(s.at(1), token_logprob(1) + token_logprob(2));
  EXPECT_EQ(counter(*m, "straddling_tokens"), 2);
}

TEST_F(OpenAI, EmptyTargetScoresZeroWithoutARequest) {
  auto m = llm::make_openai_model(server.spec());
  std::vector<llm::ScoreRequest> reqs = {{"anything", ""}};
  EXPECT_EQ(m->score(reqs).at(0), 0.0);
  EXPECT_EQ(server.hits.load(), 0);
}

TEST_F(OpenAI, EmptyPromptHasNoFirstTokenProbability) {
  auto m = llm::make_openai_model(server.spec());
  std::vector<llm::ScoreRequest> reqs = {{"", "hello world"}};
  const auto e = error_of([&] { m->score(reqs); });
  EXPECT_NE(e.find("no probability for the first token"), std::string::npos) << e;
  EXPECT_NE(e.find("non-empty prompt"), std::string::npos) << e;
  EXPECT_EQ(counter(*m, "failures"), 1);
}

TEST_F(OpenAI, TooManyRequestsThenSuccessHonoursRetryAfter) {
  server.fail_429 = 1;  // Retry-After: 0.2
  auto m = llm::make_openai_model(server.spec("backoff=0.001"));
  std::vector<llm::Prompt> ps = {{"x"}};
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(m->generate(ps, {}).at(0).text, "gen:x");
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(dt, 0.19);
  EXPECT_EQ(counter(*m, "retries"), 1);
  EXPECT_EQ(counter(*m, "requests"), 2);
  EXPECT_NEAR(counter(*m, "backoff_seconds"), 0.2, 1e-9);
}

TEST_F(OpenAI, ServerErrorsTwiceThenSuccess) {
  server.fail_500 = 2;
  auto m = llm::make_openai_model(server.spec("backoff=0.001"));
  std::vector<llm::ScoreRequest> reqs = {{"café →", " le lait"}};
  EXPECT_DOUBLE_EQ(m->score(reqs).at(0), token_logprob(2) + token_logprob(3));
  EXPECT_EQ(counter(*m, "retries"), 2);
  EXPECT_EQ(counter(*m, "requests"), 3);
  EXPECT_EQ(counter(*m, "failures"), 0);
}

TEST_F(OpenAI, ServerErrorsUntilTheLastRetry) {
  server.fail_500 = 100;
  auto m = llm::make_openai_model(server.spec("backoff=0.001&retries=2"));
  std::vector<llm::Prompt> ps = {{"x"}};
  const auto e = error_of([&] { m->generate(ps, {}); });
  EXPECT_NE(e.find("/v1/completions"), std::string::npos) << e;
  EXPECT_NE(e.find("HTTP 500"), std::string::npos) << e;
  EXPECT_NE(e.find("engine hiccup"), std::string::npos) << e;
  EXPECT_NE(e.find("3 attempts"), std::string::npos) << e;
  EXPECT_EQ(counter(*m, "failures"), 1);
}

TEST(OpenAIConnection, RefusedIsRetriedThenAnError) {
  const int port = dead_port();
  auto m = llm::make_openai_model("openai:http://127.0.0.1:" + std::to_string(port) + "/v1#m?retries=2&backoff=0.001");
  std::vector<llm::Prompt> ps = {{"x"}};
  const auto e = error_of([&] { m->generate(ps, {}); });
  EXPECT_NE(e.find("http://127.0.0.1:" + std::to_string(port) + "/v1/completions"), std::string::npos) << e;
  EXPECT_NE(e.find("3 attempts"), std::string::npos) << e;
  EXPECT_EQ(counter(*m, "requests"), 3);
  EXPECT_EQ(counter(*m, "retries"), 2);
}

TEST_F(OpenAI, SlowAnswersTimeOutAreRetriedThenAnError) {
  server.delay_ms = 400;
  auto m = llm::make_openai_model(server.spec("timeout=0.1&retries=1&backoff=0.001"));
  std::vector<llm::Prompt> ps = {{"x"}};
  const auto t0 = std::chrono::steady_clock::now();
  const auto e = error_of([&] { m->generate(ps, {}); });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("timeout"), std::string::npos) << e;
  EXPECT_NE(e.find("2 attempts"), std::string::npos) << e;
  EXPECT_LT(dt, 0.39);
  EXPECT_EQ(counter(*m, "timeouts"), 2);
}

TEST_F(OpenAI, GarbageBodyIsAnErrorNamingIt) {
  server.mode = FakeServer::Mode::garbage;
  auto m = llm::make_openai_model(server.spec("backoff=0.001"));
  std::vector<llm::Prompt> ps = {{"x"}};
  const auto e = error_of([&] { m->generate(ps, {}); });
  EXPECT_NE(e.find("not JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("<html>gateway"), std::string::npos) << e;
  server.mode = FakeServer::Mode::no_choices;
  const auto e2 = error_of([&] { m->generate(ps, {}); });
  EXPECT_NE(e2.find("\"choices\""), std::string::npos) << e2;
}

TEST_F(OpenAI, MissingLogprobsCannotScore) {
  auto m = llm::make_openai_model(server.spec());
  std::vector<llm::ScoreRequest> reqs = {{"café →", " le lait"}};
  server.mode = FakeServer::Mode::no_logprobs;
  auto e = error_of([&] { m->score(reqs); });
  EXPECT_NE(e.find("cannot return prompt log-probabilities"), std::string::npos) << e;
  EXPECT_NE(e.find("choices[0].logprobs"), std::string::npos) << e;
  server.mode = FakeServer::Mode::no_offsets;
  e = error_of([&] { m->score(reqs); });
  EXPECT_NE(e.find("cannot return prompt log-probabilities"), std::string::npos) << e;
  EXPECT_NE(e.find("text_offset"), std::string::npos) << e;
}

TEST_F(OpenAI, UnauthorizedIsNotRetried) {
  server.mode = FakeServer::Mode::unauthorized;
  auto m = llm::make_openai_model(server.spec("backoff=0.001"));
  std::vector<llm::Prompt> ps = {{"x"}};
  const auto e = error_of([&] { m->generate(ps, {}); });
  EXPECT_NE(e.find("HTTP 401"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid api key"), std::string::npos) << e;
  EXPECT_NE(e.find("ATTUNE_API_KEY"), std::string::npos) << e;
  EXPECT_EQ(server.hits.load(), 1);
  EXPECT_EQ(counter(*m, "retries"), 0);
}

TEST_F(OpenAI, SendsTheKeyFromTheEnvironment) {
  setenv("ATTUNE_API_KEY", "sk-test-123", 1);
  auto m = llm::make_openai_model(server.spec());
  unsetenv("ATTUNE_API_KEY");
  std::vector<llm::Prompt> ps = {{"x"}};
  m->generate(ps, {});
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_EQ(server.last_auth, "Bearer sk-test-123");
  EXPECT_EQ(m->info().id.find("sk-test"), std::string::npos);
}

TEST_F(OpenAI, ConcurrencyLimitIsSharedByAllThreads) {
  server.delay_ms = 20;
  auto m = llm::make_openai_model(server.spec("concurrency=3"));
  std::vector<llm::Prompt> ps;
  for (int i = 0; i < 20; ++i) ps.push_back({"p" + std::to_string(i)});
  std::vector<llm::Generation> a, b;
  std::thread t1([&] { a = m->generate(ps, {}); });
  std::thread t2([&] { b = m->generate(ps, {}); });
  t1.join();
  t2.join();
  ASSERT_EQ(a.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(a[i].text, "gen:p" + std::to_string(i));
    EXPECT_EQ(b[i].text, a[i].text);
  }
  EXPECT_LE(server.max_in_flight.load(), 3);
  EXPECT_GT(server.max_in_flight.load(), 1);
  EXPECT_EQ(counter(*m, "requests"), 40);
}

TEST_F(OpenAI, TheTimeoutBoundsTheWholeRequestNotEachRead) {
  // 38 bytes at one per 50 ms take 1.9 s; every single read is quick.
  server.mode = FakeServer::Mode::trickle;
  auto m = llm::make_openai_model(server.spec("timeout=0.5&retries=1&backoff=0.001"));
  std::vector<llm::Prompt> ps = {{"x"}};
  const auto t0 = std::chrono::steady_clock::now();
  const auto e = error_of([&] { m->generate(ps, {}); });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("within the timeout of 0.5s"), std::string::npos) << e;
  EXPECT_NE(e.find("2 attempts"), std::string::npos) << e;
  EXPECT_LT(dt, 2.5);
  EXPECT_EQ(counter(*m, "timeouts"), 2);
  // The same answer within a long enough deadline is accepted.
  auto patient = llm::make_openai_model(server.spec("timeout=10"));
  EXPECT_EQ(patient->generate(ps, {})[0].text, "slow but sure");
  EXPECT_EQ(counter(*patient, "timeouts"), 0);
}

TEST_F(OpenAI, AnEndlessAnswerIsCutAtMaxResponseAndNotRetried) {
  server.mode = FakeServer::Mode::endless;
  auto m = llm::make_openai_model(server.spec("max_response=1048576&backoff=0.001"));
  std::vector<llm::Prompt> ps = {{"x"}};
  const auto e = error_of([&] { m->generate(ps, {}); });
  EXPECT_NE(e.find("larger than max_response=1048576 bytes"), std::string::npos) << e;
  EXPECT_EQ(counter(*m, "oversized"), 1);
  EXPECT_EQ(counter(*m, "retries"), 0);
  EXPECT_EQ(server.hits.load(), 1);
  // A normal answer over the limit is refused the same way; under it, accepted.
  server.mode = FakeServer::Mode::normal;
  auto small = llm::make_openai_model(server.spec("max_response=1024"));
  std::vector<llm::Prompt> big = {{std::string(2000, 'a')}};
  EXPECT_NE(error_of([&] { small->generate(big, {}); }).find("max_response=1024"), std::string::npos);
  EXPECT_EQ(small->generate(ps, {})[0].text, "gen:x");
}

TEST(OpenAISpec, MaxResponseIsBounded) {
  EXPECT_EQ(llm::parse_openai_spec("openai:http://h/v1#m").max_response, std::size_t{16} << 20);
  EXPECT_EQ(llm::parse_openai_spec("openai:http://h/v1#m?max_response=4096").max_response, 4096u);
  EXPECT_THROW(llm::parse_openai_spec("openai:http://h/v1#m?max_response=10"), UsageError);
  EXPECT_THROW(llm::parse_openai_spec("openai:http://h/v1#m?max_response=99999999999"), UsageError);
}

TEST_F(OpenAI, ImpossibleLogprobAnswersAreMalformed) {
  auto m = llm::make_openai_model(server.spec("backoff=0.001"));
  std::vector<llm::ScoreRequest> reqs = {{"café au lait avec", " du sucre svp"}};
  const double good = m->score(reqs)[0];
  EXPECT_LT(good, 0);
  server.mode = FakeServer::Mode::positive_logprob;
  auto e = error_of([&] { m->score(reqs); });
  EXPECT_NE(e.find("malformed response"), std::string::npos) << e;
  EXPECT_NE(e.find("a log-probability must be <= 0"), std::string::npos) << e;
  server.mode = FakeServer::Mode::repeated_offset;
  e = error_of([&] { m->score(reqs); });
  EXPECT_NE(e.find("text_offset["), std::string::npos) << e;
  EXPECT_NE(e.find("repeats the offset"), std::string::npos) << e;
  server.mode = FakeServer::Mode::wrong_echo;
  e = error_of([&] { m->score(reqs); });
  EXPECT_NE(e.find("choices[0].text"), std::string::npos) << e;
  EXPECT_NE(e.find("does not begin with the prompt and target"), std::string::npos) << e;
}

TEST_F(OpenAI, UrlPasswordsGoToBasicAuthAndAreNeverPrinted) {
  const std::string spec =
      "openai:http://bob:s3cret@127.0.0.1:" + std::to_string(server.port()) + "/v1#tiny-model";
  auto m = llm::make_openai_model(spec);
  EXPECT_EQ(m->info().id.find("s3cret"), std::string::npos) << m->info().id;
  EXPECT_EQ(m->info().id.find("bob"), std::string::npos) << m->info().id;
  std::vector<llm::Prompt> ps = {{"x"}};
  EXPECT_EQ(m->generate(ps, {})[0].text, "gen:x");
  {
    std::lock_guard<std::mutex> lock(server.mu);
    EXPECT_EQ(server.last_auth, "Basic Ym9iOnMzY3JldA==");  // base64("bob:s3cret")
  }
  server.mode = FakeServer::Mode::unauthorized;
  auto e = error_of([&] { m->generate(ps, {}); });
  EXPECT_NE(e.find("HTTP 401"), std::string::npos) << e;
  EXPECT_EQ(e.find("s3cret"), std::string::npos) << e;
  // Spec errors show the URL with the password masked.
  for (const std::string bad : {"openai:http://bob:s3cret@h:80x/v1#m", "openai:http://bob:s3cret@h/v1#m?colour=red",
                                "openai:http://bob:s3cret@h/v1"}) {
    try {
      llm::parse_openai_spec(bad);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const UsageError& err) {
      EXPECT_EQ(std::string(err.what()).find("s3cret"), std::string::npos) << err.what();
    }
  }
  EXPECT_EQ(llm::redact_url_passwords("see http://u:pw@h:1/v1 and https://a:b@c"), "see http://u:***@h:1/v1 and https://a:***@c");
}

// Several servers of one model: openai:URL1,URL2,...#MODEL.
namespace {

std::string url_of(int port) { return "http://127.0.0.1:" + std::to_string(port) + "/v1"; }

std::vector<llm::Prompt> prompts(int n) {
  std::vector<llm::Prompt> ps;
  for (int i = 0; i < n; ++i) ps.push_back({"p" + std::to_string(i)});
  return ps;
}

}  // namespace

TEST(OpenAISpec, SeveralUrlsAreServersOfOneModel) {
  const auto o = llm::parse_openai_spec("openai:http://a:1/v1/,http://u:secret@b:2/v1#m?concurrency=4");
  ASSERT_EQ(o.endpoints.size(), 2u);
  EXPECT_EQ(o.endpoints[0].base_url, "http://a:1/v1");
  EXPECT_EQ(o.endpoints[1].base_url, "http://b:2/v1");
  EXPECT_EQ(o.endpoints[1].userinfo, "u:secret");
  EXPECT_EQ(o.base_url, "http://a:1/v1");
  EXPECT_EQ(o.model, "m");
  EXPECT_EQ(o.concurrency, 4u);
  // The id lists the servers sorted: their order does not change the cache key; one
  // server's id is what it always was.
  llm::OpenAIModel ab(llm::parse_openai_spec("openai:http://127.0.0.1:9/v1,http://127.0.0.1:8/v1#m"));
  llm::OpenAIModel ba(llm::parse_openai_spec("openai:http://127.0.0.1:8/v1,http://127.0.0.1:9/v1#m"));
  EXPECT_EQ(ab.info().id, "openai:http://127.0.0.1:8/v1,http://127.0.0.1:9/v1#m?api=completions");
  EXPECT_EQ(ab.info().id, ba.info().id);
  for (const auto& [spec, message] : std::vector<std::pair<std::string, std::string>>{
           {"openai:http://a:1/v1,http://a:1/v1/#m", "listed twice"},
           {"openai:http://a:1/v1,#m", "an empty base URL"},
           {"openai:http://a:1/v1,ftp://b/v1#m", "must start with http:// or https://"},
           {"openai:http://a:1/v1,http://b:0/v1#m", "bad port"},
           {"openai:http://a:1/v1,http://@b:2/v1#m", "empty user name"}}) {
    try {
      llm::parse_openai_spec(spec);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << spec << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos);
    }
  }
}

// Least outstanding requests: a server that answers 10 times faster gets most of the work.
TEST(OpenAIEndpoints, TheFasterServerTakesMoreOfTheLoad) {
  FakeServer fast, slow;
  fast.delay_ms = 2;
  slow.delay_ms = 40;
  auto m = llm::make_openai_model("openai:" + url_of(slow.port()) + "," + url_of(fast.port()) + "#tiny-model?concurrency=4");
  const auto out = m->generate(prompts(120), {});
  for (int i = 0; i < 120; ++i) EXPECT_EQ(out[i].text, "gen:p" + std::to_string(i));
  EXPECT_EQ(fast.hits + slow.hits, 120);
  EXPECT_GT(fast.hits.load(), 4 * slow.hits.load()) << "fast " << fast.hits << ", slow " << slow.hits;
  EXPECT_GT(slow.hits.load(), 0) << "the slow server was never used";
  EXPECT_EQ(counter(*m, "endpoint_1_requests"), slow.hits.load());
  EXPECT_EQ(counter(*m, "endpoint_2_requests"), fast.hits.load());
  EXPECT_EQ(counter(*m, "retries"), 0);
}

// Equal servers share the load evenly.
TEST(OpenAIEndpoints, EqualServersShareTheLoad) {
  FakeServer a, b;
  a.delay_ms = b.delay_ms = 5;
  auto m = llm::make_openai_model("openai:" + url_of(a.port()) + "," + url_of(b.port()) + "#tiny-model?concurrency=4");
  m->generate(prompts(100), {});
  EXPECT_EQ(a.hits + b.hits, 100);
  EXPECT_GE(a.hits.load(), 35) << a.hits << " / " << b.hits;
  EXPECT_GE(b.hits.load(), 35) << a.hits << " / " << b.hits;
}

// A dead server delays nothing: its requests go to the live one at once (no backoff
// sleep), it is set aside after its first refusals, and every answer arrives.
TEST(OpenAIEndpoints, ADeadServerIsSetAsideAndSlowsNothing) {
  FakeServer live;
  const int dead = dead_port();
  // backoff=5: a retry that waited would take seconds.
  auto m = llm::make_openai_model("openai:" + url_of(dead) + "," + url_of(live.port()) + "#tiny-model?concurrency=4&backoff=5");
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = m->generate(prompts(200), {});
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(out[i].text, "gen:p" + std::to_string(i));
  EXPECT_EQ(live.hits, 200);
  EXPECT_LT(dt, 4.0) << "a retry waited for the backoff";
  EXPECT_EQ(counter(*m, "backoff_seconds"), 0);
  EXPECT_EQ(counter(*m, "failures"), 0);
  // Set aside for a second after its first refusals: a handful of attempts, not one per prompt.
  EXPECT_GE(counter(*m, "endpoint_1_errors"), 1);
  EXPECT_LE(counter(*m, "endpoint_1_errors"), 8);
  EXPECT_EQ(counter(*m, "endpoint_1_requests"), counter(*m, "endpoint_1_errors"));
}

// A server that errors (5xx) is set aside the same way; one that comes back is used again.
TEST(OpenAIEndpoints, AnErroringServerIsRetriedElsewhereAndUsedAgainOnceBack) {
  FakeServer flaky, steady;
  flaky.fail_500 = 3;
  auto m = llm::make_openai_model("openai:" + url_of(flaky.port()) + "," + url_of(steady.port()) + "#tiny-model?concurrency=1&backoff=5");
  const auto first = m->generate(prompts(6), {});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(first[i].text, "gen:p" + std::to_string(i));
  EXPECT_EQ(counter(*m, "backoff_seconds"), 0);
  EXPECT_GE(counter(*m, "endpoint_1_errors"), 1);
  // After its cool-down (1 s after one failure in a row, 2 s after two) it is asked again.
  flaky.fail_500 = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  const int before = flaky.hits;
  m->generate(prompts(6), {});
  EXPECT_GT(flaky.hits.load(), before) << "the server that came back was not used again";
}

// Every server down: the request waits and fails as with one server, naming the last one tried.
TEST(OpenAIEndpoints, AllServersDownIsAnErrorAfterTheRetries) {
  const int d1 = dead_port(), d2 = dead_port();
  auto m = llm::make_openai_model("openai:" + url_of(d1) + "," + url_of(d2) + "#m?retries=3&backoff=0.001");
  const auto e = error_of([&] { m->generate(prompts(1), {}); });
  EXPECT_NE(e.find("4 attempts"), std::string::npos) << e;
  EXPECT_EQ(counter(*m, "requests"), 4);
  EXPECT_EQ(counter(*m, "endpoint_1_requests") + counter(*m, "endpoint_2_requests"), 4);
  EXPECT_GE(counter(*m, "endpoint_1_requests"), 1);
  EXPECT_GE(counter(*m, "endpoint_2_requests"), 1);
}
