#pragma once
// The HTTP transport of `attune serve` (cpp-httplib behind a pimpl): every route, its JSON
// parsing into service.h's typed requests, authentication (Authorization: Bearer KEY), the
// limits of ServeConfig::limits and the Prometheus metrics. Handlers never throw: errors
// become {"error": {"status", "field", "message"}} with the status of service.h's ApiError
// rules. The endpoints are described in docs/openapi.json (served at /openapi.json).
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "attune/serve/service.h"

namespace attune::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8080;                  // 0: any free port (HttpServer::port() says which)
  std::string openapi;              // the OpenAPI document served at /openapi.json ("" = 404)
  // More Prometheus text for /metrics, appended at each scrape (attune serve adds its
  // neural counters: the dense query micro-batches). Must be thread-safe.
  std::function<std::string()> extra_metrics;
};

class HttpServer {
 public:
  // Binds at once: UsageError when the address cannot be bound.
  HttpServer(Service& service, HttpOptions o);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  void start();  // serves on a background thread
  // Stops accepting, lets the requests in flight finish, and returns when they have.
  void stop();
  // The Prometheus text of GET /metrics.
  std::string metrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace attune::serve
