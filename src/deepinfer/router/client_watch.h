// While the router waits on a worker for a client's answer (the response head, a non-streamed
// body, PD's phase 1), nothing reads the client's connection, so a client that leaves would go
// unnoticed until the answer is written, and the worker would compute it all for nobody. A
// ClientWatch waits for the client's socket to turn readable meanwhile, without consuming a
// byte: end of stream or an error means the client left, and `on_gone` runs (it closes the
// worker's connection, which cancels the request there). Bytes of a pipelined next request
// stop the watch (the client is plainly still there). The router's io_context is one thread.
#pragma once

#include <functional>
#include <memory>

#include "deepinfer/router/asio_includes.h"

namespace deepinfer::router {

class ClientWatch {
 public:
  ClientWatch(beast::tcp_stream& client, std::function<void()> on_gone);
  // Stops watching: the pending wait is cancelled and on_gone never runs after this.
  ~ClientWatch();
  ClientWatch(const ClientWatch&) = delete;
  ClientWatch& operator=(const ClientWatch&) = delete;

  bool gone() const { return state_->gone; }

 private:
  struct State {
    bool done = false, gone = false;
    std::function<void()> on_gone;
  };
  static void arm(tcp::socket& socket, std::shared_ptr<State> state);
  beast::tcp_stream& client_;
  std::shared_ptr<State> state_;
};

}  // namespace deepinfer::router
