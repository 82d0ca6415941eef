#include "deepinfer/router/health_checker.h"

#include "deepinfer/router/upstream.h"

namespace deepinfer::router {

namespace {

asio::awaitable<void> check_one(RouterState& state, size_t i) {
  WorkerState& w = state.pool[i];
  w.check_in_flight = true;
  auto ex = co_await asio::this_coro::executor;
  Status st = co_await probe_health(ex, w.url, state.options.health_timeout_s);
  w.check_in_flight = false;
  state.pool.record_check(i, st.ok(), st.message());
}

}  // namespace

asio::awaitable<void> health_loop(RouterState& state, const bool& stop) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  while (!stop) {
    for (size_t i = 0; i < state.pool.size(); ++i)
      if (!state.pool[i].check_in_flight) asio::co_spawn(ex, check_one(state, i), asio::detached);
    timer.expires_after(seconds(state.options.health_interval_s));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace deepinfer::router
