// The state transfer over UCX (Debian's libucx, UCP stream API): RDMA where there is a NIC,
// shared memory or TCP on one host, chosen by UCX. One process-wide UCP context; every channel
// has its own worker, progressed only by the thread that uses it, and waits by polling the
// worker's event fd (no spinning). A peer that fails surfaces as an error (peer error handling).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/disagg/transfer_channel.h"

namespace deepinfer::disagg {

// A client connection to a UcxListener at host:port.
StatusOr<std::unique_ptr<Channel>> ucx_connect(const std::string& host, int port, double timeout_s,
                                               const std::string& peer);

// A connection request taken by the listener and not yet accepted: accept() turns it into a
// channel on the calling thread (its own worker), reject() refuses it. One or the other, once.
class UcxPending {
 public:
  UcxPending(void* listener, void* request) : listener_(listener), request_(request) {}
  StatusOr<std::unique_ptr<Channel>> accept(double timeout_s);
  void reject();

 private:
  void* listener_;  // ucp_listener_h
  void* request_;   // ucp_conn_request_h
};

class UcxListener {
 public:
  // Listens on host:port (0: any free port); errors name the flag and the address.
  static StatusOr<std::unique_ptr<UcxListener>> start(const std::string& host, int port);
  ~UcxListener();
  int port() const { return port_; }
  // Progresses the listener (waiting up to timeout_ms for activity) and hands over the
  // connection requests that arrived. Call from one thread.
  std::vector<UcxPending> poll(int timeout_ms);

 private:
  struct Impl;
  explicit UcxListener(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace deepinfer::disagg
