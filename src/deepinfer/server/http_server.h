// The HTTP side of `deepinfer serve`: one Boost.Asio io_context, async sessions (no thread per
// connection), routes to the protocol translation in protocol.h. Beast stays inside the .cc files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/disagg/handoff_store.h"
#include "deepinfer/disagg/transfer_client.h"
#include "deepinfer/disagg/transfer_server.h"
#include "deepinfer/engine/engine.h"

namespace deepinfer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: any free port (see HttpServer::port())
  std::string api_key;   // empty: no auth (then the Host header is checked, see allowed_hosts)
  // --served-model-name: the ids /v1/models lists; the first is the primary one (metrics label).
  std::vector<std::string> model_names = {"deepinfer"};
  size_t max_body_bytes = 8 << 20;
  size_t max_header_bytes = 16 << 10;      // request line + fields; over it: 431
  size_t max_url_bytes = 8 << 10;          // request target; over it: 414
  int64_t max_model_len = 65536;           // the engine's; chat's default max_tokens fills it
  int64_t max_running = 64;                // the engine's --max-num-seqs (running slots)
  double request_timeout_s = 0;            // 0: none; else a request still running is aborted
  int64_t max_waiting_requests = -1;       // -1: no limit; else 429 past this many waiting
  int64_t max_connections = 0;             // 0: from RLIMIT_NOFILE (minus a reserve)
  double keep_alive_timeout_s = 5;         // an idle connection is closed after this
  double read_timeout_s = 30;              // header + body of one request must arrive within this
  std::vector<std::string> allowed_hosts;  // extra Host names accepted without a key; "*": any
  bool metrics_require_key = false;        // /metrics needs the key too
  std::string access_log = "-";            // "-": stderr, "": off, else a file (JSON lines)
  // Prefill/decode disaggregation (--role; disagg/, server/README.md): "both" (default),
  // "prefill" or "decode". Every role answers plain requests too.
  std::string role = "both";
  // prefill and both: where decode workers fetch parked states, and how long/much they wait.
  disagg::TransferServerOptions transfer;
  std::string transfer_advertise_host;  // in handoff tokens; empty: --disagg-host
  disagg::HandoffStoreOptions handoffs;
  disagg::FetchOptions fetch;  // decode and both: fetching a state
  // prefill and both (--disagg-cuda-ipc): states stay in device memory and decode workers on
  // this host map them by CUDA IPC handle; the fetch then carries only the header.
  bool disagg_cuda_ipc = false;

  const std::string& primary_model() const { return model_names.front(); }
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
