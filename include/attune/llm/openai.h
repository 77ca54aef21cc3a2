#pragma once
// The `openai:BASE_URL#MODEL` backend: a LanguageModel served by an OpenAI-compatible HTTP
// server (vLLM, llama.cpp server, OpenAI, ...). No torch; the HTTP client (cpp-httplib)
// stays out of this header.
//
// Spec: openai:BASE_URL[,BASE_URL...]#MODEL[?key=value&key=value...]
//   BASE_URL     http://[USER:PASSWORD@]HOST[:PORT][/PATH] or https://... (e.g.
//                http://127.0.0.1:8000/v1); requests go to BASE_URL/completions and
//                BASE_URL/chat/completions. USER:PASSWORD is sent as HTTP basic auth and
//                never printed: messages and the model id show the URL without it.
//                Several comma-separated URLs are servers of the same model (replicas):
//                each request goes to the one with the fewest requests outstanding from
//                this model object (ties: the next in turn). An endpoint whose attempt
//                fails (connection error, timeout, 429, 5xx) is set aside for a cool-down,
//                1 s doubling with each failure in a row up to 30 s (or the server's
//                Retry-After), and the request is retried at once on another endpoint:
//                one dead server delays nothing else (one that accepts connections and
//                never answers holds what was sent to it for one timeout). When every endpoint is set
//                aside, a retry waits as with one server and goes to the one back first.
//                A success ends an endpoint's cool-down. The model id (the cache key)
//                lists the URLs sorted, so their order does not matter.
//   MODEL        the server's model name (the request's "model")
//   api          completions (default) | chat — the endpoint generate() uses; score()
//                always uses /completions (echo + logprobs)
//   concurrency  requests in flight at once per model object, shared by all threads (8)
//   timeout      seconds per attempt, a whole-request deadline: connecting, sending and
//                reading the complete answer must finish within it, however the server
//                trickles its bytes (60); an attempt past it counts in `timeouts`
//   max_response largest answer body accepted, in bytes (16777216 = 16 MiB; 1024 ..
//                1073741824): a longer one (endless chunked bodies included) is cut off,
//                counted in `oversized` and is an error, never retried or cached
//   retries      retries after the first attempt on 429, 5xx, connection errors and
//                timeouts (5)
//   backoff      base delay of the exponential backoff in seconds (0.5); the delay before
//                retry r (0-based) is uniform in [0, min(30, backoff * 2^r)] ("full
//                jitter", from a fixed-seed generator), or the server's Retry-After
//                (seconds) when it sends one
// The API key is read from ATTUNE_API_KEY when the model is made and sent as
// "Authorization: Bearer KEY" (no header when unset); it is never printed.
//
// generate(): POST {model, prompt | messages:[{role:user, content}], max_tokens,
// temperature, top_p, n:1} (+ seed when sampling). beams > 1 sends vLLM's beam search
// extension {use_beam_search:true, best_of:beams, temperature:0}; other servers may
// reject it (an Error with the server's message) — use beams 1 with them.
// score(): POST /completions {prompt: prompt+target, echo:true, logprobs:1, max_tokens:1,
// temperature:0} and sums choices[0].logprobs.token_logprobs over the echoed tokens that
// lie in the target, located by text_offset (code points of the echoed text). A token that
// straddles the prompt/target boundary counts for the target (counter straddling_tokens).
// The generated token is ignored. An empty target scores 0 without a request. Answers
// that cannot be true are malformed responses (an Error, not a number): a positive
// log-probability, two tokens at one offset (unless the earlier token's text is empty, as
// for a byte-fallback piece), offsets past the echoed text, or an echoed text
// (choices[0].text, else the concatenated logprobs.tokens) that does not begin with
// prompt + target.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attune/llm/language_model.h"

namespace attune::llm {

// One server of the model.
struct OpenAIEndpoint {
  std::string base_url;  // without a trailing '/' or the userinfo
  std::string userinfo;  // "USER:PASSWORD" from the URL (basic auth); never printed
};

struct OpenAIOptions {
  std::string base_url;  // the first endpoint's, without a trailing '/'
  std::vector<OpenAIEndpoint> endpoints;  // every BASE_URL, in spec order (at least one)
  std::string model;
  bool chat = false;     // api=chat
  std::size_t concurrency = 8;
  double timeout = 60;   // seconds
  int retries = 5;
  double backoff = 0.5;  // seconds
  double backoff_cap = 30;
  std::size_t max_response = std::size_t{16} << 20;  // bytes of one answer body
  std::string userinfo;  // the first endpoint's "USER:PASSWORD" (basic auth); never printed
  std::string api_key;   // from ATTUNE_API_KEY (make_openai_model / parse_openai_spec do not read it)
};

// Parses "openai:BASE_URL#MODEL[?settings]" (the "openai:" prefix is optional). Strict:
// UsageError naming the bad part for a missing '#' or model, a non-http(s) URL, an unknown
// setting or a bad number. Messages show the spec with any password replaced by "***".
OpenAIOptions parse_openai_spec(std::string_view spec);

// `text` with the password of every "scheme://USER:PASSWORD@" replaced by "***".
std::string redact_url_passwords(std::string_view text);

class OpenAIModel final : public LanguageModel {
 public:
  // UsageError for an https URL when cpp-httplib was built without OpenSSL.
  explicit OpenAIModel(OpenAIOptions opts);
  ~OpenAIModel() override;
  std::vector<Generation> generate(std::span<const Prompt> prompts, const GenerateOptions& opts) override;
  std::vector<double> score(std::span<const ScoreRequest> requests) override;
  // "openai:BASE_URL#MODEL?api=API": what changes the answers, not the key or the limits.
  ModelInfo info() const override;
  // requests, retries, failures, timeouts, oversized, prompt_tokens, completion_tokens,
  // straddling_tokens, request_seconds, backoff_seconds, queue_seconds; with several
  // endpoints also endpoint_N_requests and endpoint_N_errors (N from 1, in spec order).
  std::vector<std::pair<std::string, double>> counters() const override;
  const OpenAIOptions& options() const { return opts_; }

  struct Impl;

 private:
  OpenAIOptions opts_;
  std::unique_ptr<Impl> impl_;
};

// parse_openai_spec + the key from ATTUNE_API_KEY.
std::unique_ptr<OpenAIModel> make_openai_model(std::string_view spec);

// Number of Unicode code points in UTF-8 text (an invalid byte counts as one).
std::size_t utf8_code_points(std::string_view s);

}  // namespace attune::llm
