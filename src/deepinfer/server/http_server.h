// The HTTP side of `deepinfer serve`: one Boost.Asio io_context, async sessions (no thread per
// connection), routes to the protocol translation in protocol.h. Beast stays inside the .cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/engine.h"

namespace deepinfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: any free port (see HttpServer::port())
  std::string api_key;   // empty: no auth
  std::string model_name = "deepinfer";
  size_t max_body_bytes = 8 << 20;
  int64_t max_model_len = 65536;      // the engine's; chat's default max_tokens fills it
  double request_timeout_s = 0;       // 0: none; else a request still running is aborted
  int64_t max_waiting_requests = -1;  // -1: no limit; else 429 once this many wait
  std::string access_log = "-";       // "-": stderr, "": off, else a file (JSON lines)
};

class HttpServer {
 public:
  // Binds and listens; /health answers 503 until set_engine().
  static StatusOr<std::unique_ptr<HttpServer>> create(const ServerOptions& options);
  virtual ~HttpServer() = default;

  // Thread-safe. The engine must outlive run().
  virtual void set_engine(Engine* engine) = 0;
  // Serves until stop(); call from one thread.
  virtual void run() = 0;
  // Thread-safe. Stops at once (open requests are dropped).
  virtual void stop() = 0;
  // Thread-safe. Graceful: stops accepting, lets running requests finish for up to `grace_s`,
  // then cancels the rest and stops run() once their final events are written.
  virtual void shutdown(double grace_s) = 0;
  virtual uint16_t port() const = 0;
};

}  // namespace deepinfer::server
