#include "deepinfer/router/router_server.h"

#include <csignal>
#include <cstdio>

#include "deepinfer/router/asio_includes.h"
#include "deepinfer/router/health_checker.h"
#include "deepinfer/router/proxy_session.h"

namespace deepinfer::router {

RouterState::RouterState(RouterOptions o) : options(std::move(o)) {
  const auto& op = options;
  if (!op.pd) {
    pools.push_back(
        std::make_unique<WorkerPool>("worker", op.workers, make_policy(op.policy, op.seed)));
    return;
  }
  // Distinct seeds: the two sides' random draws are independent.
  pools.push_back(std::make_unique<WorkerPool>(
      "prefill", op.prefill, make_policy(op.prefill_policy, op.seed, /*prefill=*/true)));
  pools.push_back(std::make_unique<WorkerPool>("decode", op.decode,
                                               make_policy(op.decode_policy, op.seed + 1)));
}

size_t RouterState::num_healthy() const {
  size_t n = 0;
  for (const auto& p : pools) n += p->num_healthy();
  return n;
}

void RouterState::join(const Registration& r, Clock::time_point now) {
  if (!options.pd) {
    workers().join(r.url, r.ttl_s, now);
    return;
  }
  if (r.role != "decode") prefill().join(r.url, r.ttl_s, now);
  if (r.role != "prefill") decode().join(r.url, r.ttl_s, now);
}

bool RouterState::leave(const WorkerUrl& url) {
  bool any = false;
  for (auto& p : pools) any = p->leave(url) || any;
  return any;
}

std::vector<const WorkerPool*> RouterState::pool_views() const {
  std::vector<const WorkerPool*> out;
  for (const auto& p : pools) out.push_back(p.get());
  return out;
}

namespace {

// A coroutine's escaped exception is logged, not lost (asio::detached would drop it).
void log_exception(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "deepinfer router: connection ended by an exception: %s\n", x.what());
  }
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, RouterState& state) {
  auto ex = co_await asio::this_coro::executor;
  double backoff_s = 0.01;
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (!acceptor.is_open()) co_return;  // draining
    if (ec) {
      // Out of descriptors: back off instead of spinning on a pending connection.
      asio::steady_timer wait(ex, seconds(backoff_s));
      co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      backoff_s = std::min(backoff_s * 2, 1.0);
      continue;
    }
    backoff_s = 0.01;
    asio::co_spawn(ex, serve_connection(std::move(socket), state), log_exception);
  }
}

// Stops once nothing is in flight, or the grace period is over.
asio::awaitable<void> drain(asio::io_context& io, RouterState& state) {
  auto ex = co_await asio::this_coro::executor;
  auto deadline = std::chrono::steady_clock::now() + seconds(state.options.shutdown_grace_s);
  asio::steady_timer tick(ex);
  while (state.counters.in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
    tick.expires_after(std::chrono::milliseconds(20));
    boost::system::error_code ec;
    co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (state.counters.in_flight > 0)
    std::fprintf(stderr, "deepinfer router: grace over, %lld request(s) cut\n",
                 static_cast<long long>(state.counters.in_flight));
  io.stop();
}

}  // namespace

Status run_router(const RouterOptions& options) {
  asio::io_context io(1);
  RouterState state(options);
  std::signal(SIGPIPE, SIG_IGN);

  tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  auto where = "--host " + options.host + " --port " + std::to_string(options.port) + ": ";
  auto address = asio::ip::make_address(options.host, ec);
  if (ec) return invalid_argument(where + "not an IP address");
  tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return invalid_argument(where + "cannot listen: " + ec.message());

  bool stop_checks = false;
  asio::co_spawn(io, accept_loop(acceptor, state), log_exception);
  asio::co_spawn(io, health_loop(state, stop_checks), log_exception);
  if (options.allow_register) asio::co_spawn(io, expiry_loop(state, stop_checks), log_exception);

  asio::signal_set signals(io, SIGTERM, SIGINT);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& e, int sig) {
        if (e) return;
        if (state.draining) {  // a second signal: at once
          io.stop();
          return;
        }
        std::fprintf(stderr, "deepinfer router: signal %d, draining (grace %.1f s)\n", sig,
                     options.shutdown_grace_s);
        state.draining = true;
        stop_checks = true;
        boost::system::error_code ignored;
        acceptor.close(ignored);
        asio::co_spawn(io, drain(io, state), log_exception);
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);

  std::string layout = options.pd
                           ? std::to_string(options.prefill.size()) + " prefill worker(s) (" +
                                 std::string(policy_name(options.prefill_policy)) + "), " +
                                 std::to_string(options.decode.size()) + " decode worker(s) (" +
                                 std::string(policy_name(options.decode_policy)) + ")"
                           : std::to_string(options.workers.size()) + " worker(s), policy " +
                                 std::string(policy_name(options.policy));
  std::fprintf(stderr, "deepinfer router: listening on http://%s:%d, %s%s, health every %.1f s\n",
               options.host.c_str(), static_cast<int>(acceptor.local_endpoint().port()),
               layout.c_str(), options.allow_register ? ", registration open" : "",
               options.health_interval_s);
  io.run();
  return ok_status();
}

}  // namespace deepinfer::router
