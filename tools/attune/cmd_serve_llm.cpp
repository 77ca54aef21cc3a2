// attune serve-llm: serves a language model (reference, planted:..., local:DIR) over an
// OpenAI-compatible HTTP API (llm/openai_server.h), so other programs, and attune's own
// `openai:` client, can use it. Runs until SIGINT or SIGTERM.
#include <csignal>
#include <cstdio>
#include <pthread.h>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/llm/openai_server.h"
#include "common.h"

namespace attune::cli {

void add_serve_llm(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("serve-llm",
                                 "serve a language model over an OpenAI-compatible HTTP API (/v1/completions, "
                                 "/v1/chat/completions, /v1/models) until interrupted");
  auto d = std::make_shared<DataOptions>();
  auto r = std::make_shared<RunOptions>();
  auto spec = std::make_shared<std::string>();
  auto so = std::make_shared<llm::ServeOptions>();
  auto port_file = std::make_shared<std::string>();
  so->port = 8000;
  cmd->add_option("--llm", *spec, "the model to serve: reference, planted:PREFERENCE, local:MODEL_DIR")->required();
  cmd->add_option("--host", so->host, "address to listen on (loopback by default)")->capture_default_str();
  cmd->add_option("--port", so->port, "port to listen on (0 = any free port; see --port-file)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--model-name", so->model_name, "the model name clients send (default: the model's id)");
  cmd->add_option("--max-tokens-cap", so->max_tokens_cap, "refuse requests for more new tokens than this")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option_function<double>(
         "--latency-ms", [so](double ms) { so->latency = ms / 1000.0; },
         "answer each request no sooner than this (the server answers one at a time): a stand-in for a slower model, "
         "for benchmarks of clients that balance several servers")
      ->check(CLI::Range(0.0, 60000.0))
      ->default_str("0");
  cmd->add_option("--port-file", *port_file, "write the port listened on to this file once listening");
  d->add(*cmd, false, false);
  r->add(*cmd);
  cmd->callback([=, &rc] {
    if (spec->starts_with("openai:")) throw UsageError("--llm " + *spec + ": serving a remote model would only proxy it");
    std::unique_ptr<tasks::Task> task;
    if (!d->task.empty()) task = load_task(*d);
    auto model = engine::make_llm(*spec, *d, task.get(), r->models());
    // SIGINT/SIGTERM are taken by sigwait below, in this thread: the server's threads block them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    llm::OpenAIServer server(*model, *so);
    server.start();
    if (!port_file->empty()) write_file_atomic(*port_file, std::to_string(server.port()) + "\n");
    if (!r->quiet)
      std::fprintf(stderr, "serve-llm: serving %s as \"%s\" on http://%s:%d/v1 (use it as --llm '%s'); Ctrl-C stops\n",
                   model->info().id.c_str(), server.model_name().c_str(), so->host.c_str(), server.port(),
                   server.spec().c_str());
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
    if (!r->quiet) std::fprintf(stderr, "serve-llm: stopped after %zu requests\n", server.requests());
    rc = 0;
  });
}

}  // namespace attune::cli
