// Feedback collection across several servers of one model (`--llm
// openai:URL1,URL2,...#MODEL`): generations/s through the `openai:` client against 1, 2 and
// 4 loopback `serve-llm` servers (llm/openai_server.h) of a planted reader that answer one
// request at a time, each taking at least 5 ms (ServeOptions::latency, a stand-in for a
// model's time per request), with 16 requests in flight. The `dead` variants add one more
// URL that nothing listens on: per-endpoint failure isolation should keep the rate.
#include <benchmark/benchmark.h>

#include <arpa/inet.h>
#include <memory>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "attune/llm/openai.h"
#include "attune/llm/openai_server.h"
#include "attune/llm/planted.h"

using namespace attune;

namespace {

int dead_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// range(0): live servers; range(1): 1 = one dead URL listed first.
void BM_GenerateAcrossServers(benchmark::State& state) {
  const auto servers = static_cast<std::size_t>(state.range(0));
  const bool dead = state.range(1) != 0;
  std::vector<std::unique_ptr<llm::PlantedReader>> readers;  // one model per server, as replicas have
  std::vector<std::unique_ptr<llm::OpenAIServer>> live;
  std::string urls;
  if (dead) urls = "http://127.0.0.1:" + std::to_string(dead_port()) + "/v1";
  for (std::size_t i = 0; i < servers; ++i) {
    llm::ServeOptions o;
    o.latency = 0.005;
    o.model_name = "planted";
    readers.push_back(std::make_unique<llm::PlantedReader>(llm::parse_planted_spec("planted:gate?word=test")));
    live.push_back(std::make_unique<llm::OpenAIServer>(*readers.back(), o));
    live.back()->start();
    urls += (urls.empty() ? "" : ",") + std::string("http://127.0.0.1:") + std::to_string(live.back()->port()) + "/v1";
  }
  auto model = llm::make_openai_model("openai:" + urls + "#planted?concurrency=16");
  std::vector<llm::Prompt> prompts;
  for (int i = 0; i < 400; ++i) prompts.push_back({"a test prompt number " + std::to_string(i) + " about a test"});
  llm::GenerateOptions g;
  g.max_new_tokens = 16;
  std::size_t done = 0;
  for (auto _ : state) {
    auto out = model->generate(prompts, g);
    benchmark::DoNotOptimize(out.data());
    done += out.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(done));
  for (const auto& [name, value] : model->counters())
    if (name == "retries" || name == "backoff_seconds") state.counters[name] = value;
  for (auto& s : live) s->stop();
}

}  // namespace

BENCHMARK(BM_GenerateAcrossServers)
    ->ArgNames({"servers", "dead"})
    ->Args({1, 0})
    ->Args({2, 0})
    ->Args({4, 0})
    ->Args({1, 1})
    ->Args({4, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
