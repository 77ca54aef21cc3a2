#pragma once
// An OpenAI-compatible HTTP server for any attune LanguageModel (reference, planted:...,
// local:DIR): `attune serve-llm`, and the loopback reader of the learning checks, so the
// `openai:` client, its retries, deadlines and cache are exercised against a reader whose
// preferences are known. Endpoints:
//   POST /v1/completions       {"model", "prompt": string | [string, ...], "max_tokens",
//                               "temperature", "top_p", "seed", "best_of", "n": 1}
//   POST /v1/chat/completions  {"model", "messages": [..., {"role": "user", "content"}]}
//                               (the last message's content is the prompt)
//   GET  /v1/models
// Requests are answered one at a time (a model is not assumed thread-safe). A bad request
// gets a 400 with {"error": {"message": ...}} naming the field; a request for another
// model name a 404. Prompt log-probabilities (`echo` with `logprobs`) are refused with a
// 400: a LanguageModel scores a whole target after a prompt, not the tokens of one text,
// and a per-token split would be a different number.
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "attune/llm/language_model.h"

namespace attune::llm {

struct ServeOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 0;                     // 0: any free port (OpenAIServer::port() says which)
  std::string model_name;           // the name clients put in "model" (empty: the model's id)
  std::size_t max_tokens_cap = 4096;  // a request asking for more is refused
  // Seconds each model call takes at least (held while answering, so the server answers at
  // most 1/latency requests a second): a stand-in for a slower model, for benchmarks and
  // tests of clients that balance several servers. 0 = as fast as the model.
  double latency = 0;
};

class OpenAIServer {
 public:
  // Binds at once: UsageError when the address cannot be bound.
  OpenAIServer(LanguageModel& model, ServeOptions o);
  ~OpenAIServer();
  OpenAIServer(const OpenAIServer&) = delete;
  OpenAIServer& operator=(const OpenAIServer&) = delete;

  int port() const { return port_; }
  const std::string& model_name() const { return name_; }
  // The `openai:` spec of this server: openai:http://HOST:PORT/v1#NAME.
  std::string spec() const;
  void start();  // serves on a background thread
  void run();    // serves on this thread until stop()
  void stop();
  std::size_t requests() const { return requests_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ServeOptions o_;
  std::string name_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<std::size_t> requests_{0};
};

}  // namespace attune::llm
