// The OpenAI-compatible server (llm/openai_server.h): attune's own `openai:` client gets
// the served model's answers; bad requests are refused with the status and a message.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/llm/openai.h"
#include "attune/llm/openai_server.h"
#include "attune/llm/planted.h"

namespace attune::llm {
namespace {

using nlohmann::json;

TEST(OpenAIServer, ServesAModelToTheOpenAIClientAndRefusesWhatItCannotHonour) {
  PlantedReader reader(parse_planted_spec("planted:first"));
  OpenAIServer server(reader, {});
  server.start();
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.model_name(), "planted:first:v5");
  const std::string p1 = "\"fix the parser\" is the title for \"x\" . q", p2 = "\"add tests\" is the title for \"y\" . q";

  // attune's own client, through the spec the server names.
  auto client = make_openai_model(server.spec());
  std::vector<Prompt> ps = {{p1}, {p2}};
  GenerateOptions g;
  g.max_new_tokens = 2;
  const auto out = client->generate(ps, g);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].text, "fix the");
  EXPECT_EQ(out[1].text, "add tests");

  httplib::Client c("127.0.0.1", server.port());
  auto post = [&](const std::string& path, const json& body) { return c.Post(path, body.dump(), "application/json"); };
  // A batch of prompts in one request: one choice per prompt, in order.
  auto r = post("/v1/completions", {{"prompt", {p2, p1}}, {"max_tokens", 8}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], "add tests");
  EXPECT_EQ(j["choices"][1]["text"], "fix the parser");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  // Chat: the last message's content is the prompt.
  r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", p1}}}}, {"max_tokens", 8}});
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], "fix the parser");
  r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], "planted:first:v5");

  auto refused = [&](const std::string& path, const std::string& body, int status, const std::string& says) {
    auto res = c.Post(path, body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << body << " -> " << res->body;
    const auto e = json::parse(res->body);
    EXPECT_NE(e["error"]["message"].get<std::string>().find(says), std::string::npos) << res->body;
  };
  refused("/v1/completions", "not json", 400, "not JSON");
  refused("/v1/completions", "{}", 400, "\"prompt\" is missing");
  refused("/v1/completions", R"({"prompt": []})", 400, "non-empty array");
  refused("/v1/completions", R"({"prompt": ["a", 3]})", 400, "\"prompt\"[1]");
  refused("/v1/completions", R"({"prompt": "a", "model": "gpt-4"})", 404, "not served here");
  refused("/v1/completions", R"({"prompt": "a", "n": 2})", 400, "\"n\"");
  refused("/v1/completions", R"({"prompt": "a", "max_tokens": -1})", 400, "max_tokens");
  refused("/v1/completions", R"({"prompt": "a", "max_tokens": 100000})", 400, "max_tokens");
  refused("/v1/completions", R"({"prompt": "a", "temperature": "hot"})", 400, "temperature");
  refused("/v1/chat/completions", R"({"messages": []})", 400, "messages");
  // Prompt log-probabilities are not served, and the client says so.
  refused("/v1/completions", R"({"prompt": "a", "echo": true, "logprobs": 1, "max_tokens": 1})", 400, "log-probabilities");
  std::vector<ScoreRequest> sr = {{"a", "b"}};
  EXPECT_THROW(client->score(sr), Error);
  EXPECT_GE(server.requests(), 14u);
  server.stop();
  server.stop();  // idempotent
  // An address that is not this machine's is refused at once.
  ServeOptions elsewhere;
  elsewhere.host = "192.0.2.1";  // TEST-NET-1
  EXPECT_THROW(OpenAIServer(reader, elsewhere), UsageError);
}

}  // namespace
}  // namespace attune::llm
