// attune serve: personalized retrieval over HTTP for the tenants of a store (serve/http.h,
// docs/serve.md). Runs until SIGINT or SIGTERM, then lets the requests in flight finish.
#include <csignal>
#include <cstdio>
#include <pthread.h>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/serve/http.h"
#include "attune/serve/openapi.h"
#include "attune/store/store.h"
#include "common.h"

namespace attune::cli {

void add_serve(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("serve", "serve personalized retrieval over HTTP (docs/serve.md): /v1/retrieve, "
                                          "/v1/feedback, users' documents, the tenant's corpus, /v1/rerank, /search, "
                                          "/metrics; tenants and keys from `attune tenant`");
  auto r = std::make_shared<RunOptions>();
  auto config = std::make_shared<std::string>();
  auto http = std::make_shared<serve::HttpOptions>();
  auto port_file = std::make_shared<std::string>();
  cmd->add_option("--store", r->store, "the store: tenants, keys, documents, requests and feedback")->capture_default_str();
  cmd->add_option("--config", *config, "the deployment's JSON config: retriever spec per tenant, limits (docs/serve.md); "
                                       "default: bm25 for every tenant and the default limits");
  cmd->add_option("--host", http->host, "address to listen on (loopback by default)")->capture_default_str();
  cmd->add_option("--port", http->port, "port to listen on (0 = any free port; see --port-file)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--port-file", *port_file, "write the port listened on to this file once listening");
  cmd->add_flag("--quiet", r->quiet, "no start and stop lines on stderr");
  cmd->callback([=, &rc] {
    const serve::ServeConfig cfg = config->empty() ? serve::ServeConfig{} : serve::read_config(*config);
    auto st = store::open_sqlite(r->store_file());
    serve::Service service(*st, cfg);
    http->openapi = serve::openapi_document();
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // the server's threads inherit the mask
    serve::HttpServer server(service, *http);
    server.start();
    if (!port_file->empty()) write_file_atomic(*port_file, std::to_string(server.port()) + "\n");
    if (!r->quiet)
      std::fprintf(stderr, "serve: http://%s:%d (store %s, retriever %s, %zu tenants); Ctrl-C stops\n", http->host.c_str(),
                   server.port(), r->store.c_str(), cfg.retriever.c_str(), st->tenant_list().size());
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();  // drains the requests in flight
    if (!r->quiet) {
      const auto c = service.counts();
      std::fprintf(stderr, "serve: stopped (%s) after %llu retrievals and %llu feedback records\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<unsigned long long>(c.retrieves),
                   static_cast<unsigned long long>(c.feedback_records));
    }
    rc = 0;
  });
}

}  // namespace attune::cli
