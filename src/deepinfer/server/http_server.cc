#include "deepinfer/server/http_server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <cstdio>

#include "deepinfer/server/server_state.h"
#include "deepinfer/server/session.h"

namespace deepinfer::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// Descriptors kept back from --max-connections' default: model files, the log, the engine's.
constexpr int64_t kReservedFds = 64;

int64_t default_max_connections() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 4096;
  return std::max<int64_t>(1, static_cast<int64_t>(rl.rlim_cur) - kReservedFds);
}

class BeastServer final : public HttpServer {
 public:
  BeastServer() : acceptor_(ioc_), accept_timer_(ioc_), drain_timer_(ioc_) {}

  ~BeastServer() override {
    prep_.join();  // idempotent; run() may never have been called
    fetch_.join();
    if (spare_fd_ >= 0) ::close(spare_fd_);
  }

  Status listen(const ServerOptions& options) {
    state_.options = options;
    if (state_.options.model_names.empty()) state_.options.model_names = {"deepinfer"};
    if (state_.options.max_connections <= 0)
      state_.options.max_connections = default_max_connections();
    state_.limits = {options.max_header_bytes, options.max_url_bytes, options.max_body_bytes};
    state_.ioc = &ioc_;
    state_.prep = &prep_;
    state_.fetch = &fetch_;
    ASSIGN_OR_RETURN(state_.log, AccessLog::open(options.access_log));
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(options.host, ec);
    if (ec) return invalid_argument("--host: '" + options.host + "' is not an IP address");
    tcp::endpoint ep(addr, options.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return failed_precondition("cannot listen on " + options.host + ":" +
                                 std::to_string(options.port) + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    return start_disagg();
  }

  // --role: prefill and both park states for decode workers and listen for their fetches.
  Status start_disagg() {
    const ServerOptions& o = state_.options;
    if (o.role != "both" && o.role != "prefill" && o.role != "decode")
      return invalid_argument("--role must be both, prefill or decode, got '" + o.role + "'");
    if (o.role == "decode") return ok_status();
    state_.handoffs = std::make_shared<disagg::HandoffStore>(o.handoffs);
    ASSIGN_OR_RETURN(state_.transfer, disagg::TransferServer::start(o.transfer, state_.handoffs));
    state_.transfer_host = o.transfer_advertise_host;
    if (state_.transfer_host.empty()) state_.transfer_host = o.transfer.host;
    // A wildcard bind is no address to hand out: loopback, unless --disagg-advertise-host says.
    if (state_.transfer_host.empty() || state_.transfer_host == "0.0.0.0" ||
        state_.transfer_host == "::")
      state_.transfer_host = "127.0.0.1";
    std::fprintf(stderr,
                 "deepinfer serve: role %s, state transfer (%s) on %s:%d (advertised as %s)\n",
                 o.role.c_str(), o.transfer.transport.c_str(), o.transfer.host.c_str(),
                 state_.transfer->port(), state_.transfer_host.c_str());
    return ok_status();
  }

  void set_engine(Engine* engine) override { state_.engine.store(engine); }

  // No exception may end the server: one that escapes a handler is logged and serving goes on.
  void run() override {
    accept();
    for (;;) {
      try {
        ioc_.run();
        break;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "deepinfer serve: internal error escaped a handler: %s\n", e.what());
      }
    }
    // Prep tasks may still hold the engine: they finish before the caller frees it.
    prep_.join();
    fetch_.join();
  }

  void stop() override { ioc_.stop(); }

  void shutdown(double grace_s) override {
    asio::post(ioc_, [this, grace_s] {
      if (state_.draining) return;
      state_.draining = true;
      boost::system::error_code ec;
      acceptor_.close(ec);
      accept_timer_.cancel();
      drain_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(grace_s));
      poll_drain();
    });
  }

  uint16_t port() const override { return port_; }

 private:
  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (!acceptor_.is_open()) return;
      if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
          ec.value() == ENFILE) {
        return out_of_descriptors();
      }
      accept_backoff_ms_ = 0;
      if (!ec) {
        if (state_.connections >= state_.options.max_connections)
          refuse(std::move(socket));
        else
          std::make_shared<Session>(std::move(socket), &state_)->start();
      }
      accept();
    });
  }

  // EMFILE/ENFILE: the pending connection stays in the backlog and accept would fail again at
  // once (a busy loop). Use the spare descriptor to take that one connection and close it (the
  // client sees a reset rather than a hang), then wait, doubling up to 1 s, for sessions to end.
  void out_of_descriptors() {
    if (spare_fd_ >= 0) {
      ::close(spare_fd_);
      spare_fd_ = -1;
      boost::system::error_code ec;
      tcp::socket s(ioc_);
      acceptor_.accept(s, ec);
      if (!ec) s.close(ec);
      spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    accept_backoff_ms_ = std::clamp(accept_backoff_ms_ * 2, 10, 1000);
    if (!warned_fds_) {
      std::fprintf(stderr,
                   "deepinfer serve: out of file descriptors (%lld open connections); "
                   "backing off (raise ulimit -n or lower --max-connections)\n",
                   static_cast<long long>(state_.connections));
      warned_fds_ = true;
    }
    accept_timer_.expires_after(std::chrono::milliseconds(accept_backoff_ms_));
    accept_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec && acceptor_.is_open()) accept();
    });
  }

  // Over --max-connections: a short 503 and close, so the client knows at once.
  void refuse(tcp::socket socket) {
    auto s = std::make_shared<tcp::socket>(std::move(socket));
    static const std::string kBody =
        "{\"error\":{\"message\":\"too many connections (--max-connections)\",\"type\":"
        "\"server_error\",\"param\":null,\"code\":\"too_many_connections\"}}";
    static const std::string kResponse =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        "Connection: close\r\nContent-Length: " +
        std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
    state_.metrics.on_http_status(503);
    asio::async_write(*s, asio::buffer(kResponse), [s](boost::system::error_code, size_t) {
      boost::system::error_code ec;
      s->shutdown(tcp::socket::shutdown_both, ec);
      s->close(ec);
    });
  }

  // Done once no response is in progress; past the grace period the rest are cancelled, and
  // their abort events get a short while to be written.
  void poll_drain() {
    const auto now = Clock::now();
    if (state_.metrics.busy == 0 && state_.metrics.in_flight == 0) return ioc_.stop();
    if (now >= drain_deadline_) {
      if (cancelled_all_) return ioc_.stop();
      cancelled_all_ = true;
      for (auto& [id, weak] : state_.live)
        if (auto s = weak.lock()) s->cancel();
      drain_deadline_ = now + std::chrono::seconds(2);
    }
    drain_timer_.expires_after(std::chrono::milliseconds(20));
    drain_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) poll_drain();
    });
  }

  asio::io_context ioc_{1};
  asio::thread_pool prep_{2};
  // Decode phases' state fetches wait on the network (up to --disagg-io-timeout per attempt):
  // their own threads, so a silent prefill worker never holds up parsing.
  asio::thread_pool fetch_{8};
  tcp::acceptor acceptor_;
  asio::steady_timer accept_timer_, drain_timer_;
  Clock::time_point drain_deadline_;
  bool cancelled_all_ = false, warned_fds_ = false;
  int accept_backoff_ms_ = 0;
  int spare_fd_ = -1;
  uint16_t port_ = 0;
  ServerState state_;
};

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::create(const ServerOptions& options) {
  try {
    auto server = std::make_unique<BeastServer>();
    Status st = server->listen(options);
    if (!st.ok()) return st;
    return std::unique_ptr<HttpServer>(std::move(server));
  } catch (const std::exception& e) {
    return internal_error(std::string("server setup: ") + e.what());
  }
}

}  // namespace deepinfer::server
