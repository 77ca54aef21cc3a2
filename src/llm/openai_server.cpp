#include "attune/llm/openai_server.h"

#include <httplib.h>

#include <cmath>
#include <chrono>
#include <mutex>
#include <thread>
#include <nlohmann/json.hpp>
#include <limits>
#include <stdexcept>

#include "attune/core/error.h"

namespace attune::llm {

using json = nlohmann::json;

namespace {

// A request the server refuses: the HTTP status and the message the client sees.
struct Refusal : std::runtime_error {
  int status;
  Refusal(int s, const std::string& m) : std::runtime_error(m), status(s) {}
};

void reply_error(httplib::Response& res, int status, const std::string& message, const char* type) {
  res.status = status;
  res.set_content(json({{"error", {{"message", message}, {"type", type}}}}).dump(), "application/json");
}

json parse_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw Refusal(400, "the request body is not JSON");
  if (!body.is_object()) throw Refusal(400, "the request body must be a JSON object");
  return body;
}

double number_field(const json& body, const char* field, double fallback, double lo, double hi) {
  if (!body.contains(field) || body[field].is_null()) return fallback;
  if (!body[field].is_number()) throw Refusal(400, std::string("\"") + field + "\" must be a number");
  const double v = body[field].get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    throw Refusal(400, std::string("\"") + field + "\" = " + body[field].dump() + ": must lie in [" + json(lo).dump() +
                           ", " + json(hi).dump() + "]");
  return v;
}

std::int64_t integer_field(const json& body, const char* field, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  if (!body.contains(field) || body[field].is_null()) return fallback;
  if (!body[field].is_number_integer()) throw Refusal(400, std::string("\"") + field + "\" must be an integer");
  const auto v = body[field].get<std::int64_t>();
  if (v < lo || v > hi)
    throw Refusal(400, std::string("\"") + field + "\" = " + std::to_string(v) + ": must lie in [" + std::to_string(lo) +
                           ", " + std::to_string(hi) + "]");
  return v;
}

}  // namespace

struct OpenAIServer::Impl {
  httplib::Server svr;
  std::mutex model_mu;  // one model call at a time
};

OpenAIServer::OpenAIServer(LanguageModel& model, ServeOptions o)
    : impl_(std::make_unique<Impl>()), o_(std::move(o)) {
  name_ = o_.model_name.empty() ? model.info().id : o_.model_name;
  auto& svr = impl_->svr;
  svr.set_tcp_nodelay(true);
  svr.set_keep_alive_timeout(1);  // seconds an idle connection holds a worker: stop() waits for it
  // A keep-alive connection holds a worker thread while it lasts, so a client with more
  // connections than workers (cpp-httplib's default: 8) would have the rest wait for one to
  // close. Model calls are one at a time anyway; the workers only hold connections.
  svr.new_task_queue = [] { return new httplib::ThreadPool(64); };

  // The options every generation request shares; refuses what the server cannot honour.
  auto generate_options = [this](const json& body) {
    if (body.contains("model") && !body["model"].is_null()) {
      if (!body["model"].is_string()) throw Refusal(400, "\"model\" must be a string");
      if (body["model"].get<std::string>() != name_)
        throw Refusal(404, "model \"" + body["model"].get<std::string>() + "\" is not served here (this server serves \"" +
                               name_ + "\")");
    }
    if (integer_field(body, "n", 1, 1, 1) != 1) throw Refusal(400, "\"n\" must be 1");
    const bool echo = body.value("echo", false);
    if (echo || (body.contains("logprobs") && !body["logprobs"].is_null() && body["logprobs"] != false))
      throw Refusal(400, "log-probabilities (\"echo\"/\"logprobs\") are not served: an attune LanguageModel scores a "
                         "whole target after a prompt, not the tokens of one text");
    GenerateOptions g;
    g.max_new_tokens = static_cast<std::size_t>(
        integer_field(body, "max_tokens", 16, 0, static_cast<std::int64_t>(o_.max_tokens_cap)));
    g.temperature = number_field(body, "temperature", 0.0, 0.0, 2.0);
    g.top_p = number_field(body, "top_p", 1.0, 0.0, 1.0);
    if (g.temperature > 0 && !(g.top_p > 0)) throw Refusal(400, "\"top_p\" must be above 0 when sampling");
    g.seed = static_cast<std::uint64_t>(integer_field(body, "seed", 0, 0, std::numeric_limits<std::int64_t>::max()));
    g.beams = g.temperature > 0 ? 1 : static_cast<int>(integer_field(body, "best_of", 1, 1, 64));
    return g;
  };
  auto run_model = [this, &model](const std::vector<Prompt>& prompts, const GenerateOptions& g) {
    std::lock_guard<std::mutex> lock(impl_->model_mu);
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(o_.latency));
    auto out = model.generate(prompts, g);
    std::this_thread::sleep_until(until);
    return out;
  };
  // Runs `body` and turns refusals and model errors into OpenAI-style error replies.
  auto guarded = [this](auto body) {
    return [this, body](const httplib::Request& req, httplib::Response& res) {
      ++requests_;
      try {
        body(req, res);
      } catch (const Refusal& e) {
        reply_error(res, e.status, e.what(), e.status == 404 ? "not_found_error" : "invalid_request_error");
      } catch (const UsageError& e) {
        reply_error(res, 400, e.what(), "invalid_request_error");
      } catch (const std::exception& e) {
        reply_error(res, 500, e.what(), "server_error");
      }
    };
  };

  svr.Post("/v1/completions", guarded([=, this](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const auto g = generate_options(body);
    if (!body.contains("prompt")) throw Refusal(400, "\"prompt\" is missing");
    std::vector<Prompt> prompts;
    const auto& p = body["prompt"];
    if (p.is_string()) {
      prompts.push_back({p.get<std::string>()});
    } else if (p.is_array() && !p.empty()) {
      for (std::size_t i = 0; i < p.size(); ++i) {
        if (!p[i].is_string()) throw Refusal(400, "\"prompt\"[" + std::to_string(i) + "] must be a string");
        prompts.push_back({p[i].get<std::string>()});
      }
    } else {
      throw Refusal(400, "\"prompt\" must be a string or a non-empty array of strings");
    }
    const auto out = run_model(prompts, g);
    json choices = json::array();
    for (std::size_t i = 0; i < out.size(); ++i)
      choices.push_back({{"index", i}, {"text", out[i].text}, {"logprobs", nullptr}, {"finish_reason", "stop"}});
    res.set_content(json({{"id", "cmpl-" + std::to_string(requests_.load())}, {"object", "text_completion"},
                          {"model", name_}, {"choices", choices}})
                        .dump(),
                    "application/json");
  }));
  svr.Post("/v1/chat/completions", guarded([=, this](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const auto g = generate_options(body);
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
      throw Refusal(400, "\"messages\" must be a non-empty array");
    const auto& last = body["messages"].back();
    if (!last.is_object() || !last.contains("content") || !last["content"].is_string())
      throw Refusal(400, "the last message must have a string \"content\"");
    const auto out = run_model({{last["content"].get<std::string>()}}, g);
    json choice = {{"index", 0}, {"message", {{"role", "assistant"}, {"content", out.at(0).text}}}, {"finish_reason", "stop"}};
    res.set_content(json({{"id", "chatcmpl-" + std::to_string(requests_.load())}, {"object", "chat.completion"},
                          {"model", name_}, {"choices", json::array({choice})}})
                        .dump(),
                    "application/json");
  }));
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(json({{"object", "list"}, {"data", json::array({{{"id", name_}, {"object", "model"}}})}}).dump(),
                    "application/json");
  });

  port_ = o_.port == 0 ? svr.bind_to_any_port(o_.host) : (svr.bind_to_port(o_.host, o_.port) ? o_.port : -1);
  if (port_ <= 0)
    throw UsageError("cannot listen on " + o_.host + ":" + std::to_string(o_.port) + " (in use, or not an address of this machine)");
}

OpenAIServer::~OpenAIServer() { stop(); }

std::string OpenAIServer::spec() const {
  const std::string host = o_.host.find(':') != std::string::npos ? "[" + o_.host + "]" : o_.host;
  return "openai:http://" + host + ":" + std::to_string(port_) + "/v1#" + name_;
}

void OpenAIServer::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { impl_->svr.listen_after_bind(); });
  // bind_to_port already listens: a connection made before the accept loop runs waits in the backlog.
}

void OpenAIServer::run() { impl_->svr.listen_after_bind(); }

void OpenAIServer::stop() {
  if (impl_) impl_->svr.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace attune::llm
