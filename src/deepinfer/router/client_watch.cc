#include "deepinfer/router/client_watch.h"

#include <sys/socket.h>

#include <cerrno>

namespace deepinfer::router {

ClientWatch::ClientWatch(beast::tcp_stream& client, std::function<void()> on_gone)
    : client_(client), state_(std::make_shared<State>()) {
  state_->on_gone = std::move(on_gone);
  arm(client_.socket(), state_);
}

ClientWatch::~ClientWatch() {
  state_->done = true;
  // Nothing else is pending on the client's socket while the router waits on a worker.
  boost::system::error_code ec;
  client_.socket().cancel(ec);
}

void ClientWatch::arm(tcp::socket& socket, std::shared_ptr<State> state) {
  socket.async_wait(tcp::socket::wait_read, [&socket, state](boost::system::error_code ec) {
    if (state->done) return;  // the watch ended (the socket may be gone with it)
    bool left = static_cast<bool>(ec);
    if (!left) {
      char c;
      const ssize_t n = ::recv(socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;  // a pipelined request: the client is there; stop watching
      left = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    if (!left) return arm(socket, state);
    state->gone = true;
    if (state->on_gone) state->on_gone();
  });
}

}  // namespace deepinfer::router
