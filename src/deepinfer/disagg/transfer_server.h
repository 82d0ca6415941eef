// A prefill worker's state-transfer listener: decode workers connect (TCP, or UCX) and fetch the
// handoffs parked in a HandoffStore (transfer_wire.h gives the protocol). One thread accepts;
// each connection gets its own thread, every wait bounded by io_timeout_s, so a stalled or
// vanished decode worker holds nothing for long.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "deepinfer/base/status.h"
#include "deepinfer/disagg/handoff_store.h"
#include "deepinfer/disagg/transfer_channel.h"
#include "deepinfer/disagg/ucx_channel.h"

namespace deepinfer::disagg {

struct TransferServerOptions {
  std::string host = "127.0.0.1";  // --disagg-host: the address to bind
  std::string transport = "tcp";   // --disagg-transport: tcp | ucx
  int port = 0;                    // --disagg-port (0: any free port)
  int64_t chunk_bytes = int64_t{4} << 20;
  double io_timeout_s = 10;
  int max_connections = 64;  // beyond: refused (closed) until one ends
  // Fault injection for tests (--debug-corrupt-transfer-chunk): flip one bit of this chunk the
  // first time it is sent after its checksum was taken, as a bad link would. -1: off.
  int64_t corrupt_chunk = -1;
};

struct TransferServerStats {
  int64_t fetches = 0, completed = 0, unknown = 0, resent_chunks = 0, bytes_sent = 0;
  int64_t failed = 0;  // connections that ended on an I/O error or timeout
};

class TransferServer {
 public:
  // Binds and listens; errors name the flag and the address.
  static StatusOr<std::unique_ptr<TransferServer>> start(TransferServerOptions o,
                                                         std::shared_ptr<HandoffStore> store);
  ~TransferServer();  // stops accepting and joins every connection thread
  int port() const { return port_; }
  TransferServerStats stats() const;

 private:
  TransferServer(TransferServerOptions o, std::shared_ptr<HandoffStore> store);
  void accept_loop();
  // A connection thread: opens its channel (a UCX accept runs on that thread), then serves it.
  void spawn(std::function<std::unique_ptr<Channel>()> open);
  void serve(Channel& ch);
  // Answers a FETCH with h (null: unknown or expired).
  Status serve_fetch(Channel& ch, const std::shared_ptr<const Handoff>& h, bool* done);

  TransferServerOptions o_;
  std::shared_ptr<HandoffStore> store_;
  int listen_fd_ = -1;                // tcp
  std::unique_ptr<UcxListener> ucx_;  // ucx
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> active_{0};
  std::atomic<bool> corrupted_{false};
  mutable std::mutex mu_;
  TransferServerStats stats_;
  struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> ended;
  };
  void reap(bool all);
  std::list<Connection> connections_;  // joined once ended (and all at stop); acceptor only
  std::thread acceptor_;
};

}  // namespace deepinfer::disagg
