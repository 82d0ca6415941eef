#include "deepinfer/router/health_checker.h"

#include "deepinfer/router/load_report.h"
#include "deepinfer/router/upstream.h"

namespace deepinfer::router {

namespace {

asio::awaitable<void> check_one(RouterState& state, WorkerPool& pool, size_t i) {
  WorkerState& w = pool[i];  // a deque element: stays put while the pool grows
  w.check_in_flight = true;
  auto ex = co_await asio::this_coro::executor;
  double timeout = state.options.health_timeout_s;
  auto health = co_await get_small(ex, w.url, "/health", timeout);
  Status st = health.ok() ? ok_status() : health.status();
  if (st.ok() && health->status != 200)
    st = internal_error("GET /health answered " + std::to_string(health->status));
  if (st.ok()) {
    auto load = co_await get_small(ex, w.url, "/load", timeout);
    if (load.ok() && load->status == 200) {
      Status parsed = parse_load_report(load->body, w.load);
      if (!parsed.ok() && w.load.load_known) {
        std::fprintf(stderr, "deepinfer router: %s: %s\n", w.url.text.c_str(),
                     parsed.message().c_str());
        w.load.load_known = false;
      }
    } else {
      w.load.load_known = false;
    }
  }
  w.check_in_flight = false;
  if (w.present) pool.record_check(i, st.ok(), st.message());
}

}  // namespace

asio::awaitable<void> health_loop(RouterState& state, const bool& stop) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  while (!stop) {
    for (auto& pool : state.pools)
      for (size_t i = 0; i < pool->size(); ++i)
        if ((*pool)[i].present && !(*pool)[i].check_in_flight)
          asio::co_spawn(ex, check_one(state, *pool, i), asio::detached);
    timer.expires_after(seconds(state.options.health_interval_s));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> expiry_loop(RouterState& state, const bool& stop) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  while (!stop) {
    for (auto& pool : state.pools) pool->expire(Clock::now());
    timer.expires_after(seconds(kExpirySweepS));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace deepinfer::router
