// What every session of one server shares. Touched by the io thread only, except `engine`
// (set by the loader thread) and `prep` (a pool that runs the CPU-heavy part of requests).
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "deepinfer/disagg/handoff_store.h"
#include "deepinfer/disagg/transfer_server.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/server/access_log.h"
#include "deepinfer/server/http_parse.h"
#include "deepinfer/server/http_server.h"
#include "deepinfer/server/metrics.h"

namespace deepinfer::server {

class Session;

struct ServerState {
  ServerOptions options;
  HttpLimits limits;
  std::atomic<Engine*> engine{nullptr};
  Metrics metrics;
  std::unique_ptr<AccessLog> log;
  bool draining = false;
  int64_t connections = 0;  // open sessions
  // Engine request id -> its session, while the request runs (drain cancels them).
  std::unordered_map<std::string, std::weak_ptr<Session>> live;
  // Prefill/decode disaggregation: parked states and the listener decode workers fetch them
  // from (prefill and both roles); the handoff tokens' host; counters (io thread).
  std::shared_ptr<disagg::HandoffStore> handoffs;
  std::unique_ptr<disagg::TransferServer> transfer;
  std::string transfer_host;
  struct DisaggCounters {
    int64_t exported = 0, imported = 0, fallbacks = 0, fetch_failures = 0;
    int64_t fetched_bytes = 0, corrupt_chunks = 0;
    double fetch_seconds = 0;
  } disagg;
  boost::asio::io_context* ioc = nullptr;
  boost::asio::thread_pool* prep = nullptr;
  boost::asio::thread_pool* fetch = nullptr;  // decode phases' state fetches
};

}  // namespace deepinfer::server
