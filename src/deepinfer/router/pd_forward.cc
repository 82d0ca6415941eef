#include "deepinfer/router/pd_forward.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

namespace deepinfer::router {

StatusOr<HandoffAnswer> parse_handoff(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || j.value("object", "") != "deepinfer.prefill_handoff")
    return invalid_argument(
        "phase 1 answer is not a deepinfer.prefill_handoff (is the worker a PD-capable build?)");
  if (!j.contains("handoff")) return invalid_argument("phase 1 answer has no 'handoff'");
  HandoffAnswer out;
  if (j["handoff"].is_null()) {
    out.reason =
        j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>() : "";
    return out;
  }
  if (!j["handoff"].is_string() || j["handoff"].get_ref<const std::string&>().empty())
    return invalid_argument("phase 1 'handoff' must be a non-empty string or null");
  // The token travels in a header: only printable ASCII may go there.
  for (unsigned char c : j["handoff"].get_ref<const std::string&>())
    if (c < 0x21 || c > 0x7e)
      return invalid_argument("phase 1 'handoff' must be printable ASCII without spaces");
  out.token = j["handoff"].get<std::string>();
  return out;
}

namespace {

// The pool's pick among workers this request has not tried, else among any available (a retried
// pair prefers fresh workers but may reuse one when there is no other).
std::optional<size_t> pick_preferring_untried(WorkerPool& pool, std::string_view text,
                                              std::vector<bool>& tried) {
  auto got = pool.pick(text, tried);
  if (!got) got = pool.pick(text, {});
  if (!got) return std::nullopt;
  if (tried.size() <= got->worker) tried.resize(got->worker + 1, false);
  return got->worker;
}

struct Phase1 {
  enum Kind { kToken, kNoHandoff, kAnswered, kFailed, kClientGone } kind = kFailed;
  std::string token;
  std::string why;
  bool keep_alive = false;  // kAnswered
};

// Phase 1 on prefill worker `p`. A 4xx is the client's answer (passed on); any other failure is
// the pair's, to retry.
asio::awaitable<Phase1> prefill_phase(beast::tcp_stream& client, bool keep_alive,
                                      ForwardRequest req, int64_t prompt_tokens, size_t p,
                                      RouterState& state, RequestTimer& timer) {
  WorkerPool& pool = state.prefill();
  WorkerState& worker = pool[p];
  req.headers.emplace_back(kDisaggHeader, "prefill");
  Attempt counted(worker, prompt_tokens);
  UpstreamCall call(co_await asio::this_coro::executor);
  struct AddWait {
    RequestTimer& t;
    UpstreamCall& c;
    ~AddWait() { t.waited_s += c.waited_s(); }
  } add_wait{timer, call};
  // Phase 1's answer comes once the prefill is done: a client that leaves meanwhile closes the
  // prefill worker's connection (which cancels it there), and no phase 2 follows.
  const Phase1 gone{Phase1::kClientGone, "", "the client left"};
  ClientWatch watch(client, abandon_on_leave(call, state));
  Status st = co_await start_attempt(call, pool, p, req, state, watch);
  if (watch.gone()) co_return gone;
  if (!st.ok()) co_return Phase1{Phase1::kFailed, "", "prefill " + st.message()};
  counted.headed(call);
  auto body = co_await call.read_all();
  if (watch.gone()) co_return gone;
  auto failed = [&](const std::string& why) {
    ++worker.failures;
    return Phase1{Phase1::kFailed, "", "prefill " + worker.url.text + ": " + why};
  };
  if (!body.ok()) co_return failed(body.status().message());
  int status = call.status();
  if (status >= 400 && status < 500) {
    timer.first_byte(state.counters, call);
    bool keep = co_await send_whole(client, call, std::move(*body), keep_alive);
    co_return Phase1{Phase1::kAnswered, "", "", keep};
  }
  if (status != 200) co_return failed("phase 1 answered " + std::to_string(status));
  auto handoff = parse_handoff(*body);
  if (!handoff.ok()) co_return failed(handoff.status().message());
  if (!handoff->token) co_return Phase1{Phase1::kNoHandoff, "", handoff->reason};
  co_return Phase1{Phase1::kToken, std::move(*handoff->token), ""};
}

}  // namespace

asio::awaitable<bool> forward_pd(beast::tcp_stream& client, bool keep_alive, ForwardRequest fwd,
                                 const RouteInfo& info, RouterState& state, RequestTimer& timer) {
  WorkerPool& prefill = state.prefill();
  WorkerPool& decode = state.decode();
  RouterCounters& counters = state.counters;
  std::vector<bool> tried_p(prefill.size(), false), tried_d(decode.size(), false);
  std::string last_error;
  const int64_t prompt_tokens = static_cast<int64_t>(info.text.size() / 4);
  // Each pair that fails marks at least one worker tried; a transfer failure may blame either.
  const size_t max_pairs = std::max<size_t>(1, prefill.size() + decode.size());
  for (size_t pair = 0; pair < max_pairs; ++pair) {
    if (pair > 0) ++counters.retries;
    auto p = pick_preferring_untried(prefill, info.text, tried_p);
    auto d = pick_preferring_untried(decode, info.text, tried_d);
    if (!p && !d) break;
    // Every role answers plain requests: with one side empty, or one `both` worker on both
    // sides, the request goes plain to the worker there is.
    if (!d || !p || prefill[*p].url.text == decode[*d].url.text) {
      if (p && d) ++counters.pd_plain_same_worker;
      WorkerPool& pool = d ? decode : prefill;
      size_t w = d ? *d : *p;
      (d ? tried_d : tried_p)[w] = true;
      Outcome out = co_await relay_attempt(client, keep_alive, fwd, pool, w, state, timer);
      if (out.kind == Outcome::kAnswered) co_return out.keep_alive;
      if (out.kind == Outcome::kClientGone) co_return false;  // counted where it was seen
      last_error = out.why;
      continue;
    }
    ++counters.pd_pairs;
    // The decode worker counts this request as outstanding from the pick on, so that a burst
    // of pairs chosen while their phase 1 runs does not all see the same idle worker.
    struct Reserved {
      WorkerState& w;
      explicit Reserved(WorkerState& x) : w(x) { ++w.outstanding; }
      ~Reserved() { --w.outstanding; }
    };
    auto reserved = std::make_unique<Reserved>(decode[*d]);
    Phase1 one = co_await prefill_phase(client, keep_alive, fwd, prompt_tokens, *p, state, timer);
    reserved.reset();  // phase 2's Attempt counts it from here
    if (one.kind == Phase1::kAnswered) co_return one.keep_alive;
    if (one.kind == Phase1::kClientGone) co_return false;
    if (one.kind == Phase1::kFailed) {
      tried_p[*p] = true;
      last_error = one.why;
      continue;
    }
    ForwardRequest two = fwd;
    if (one.kind == Phase1::kToken) {
      two.headers.emplace_back(kDisaggHeader, "decode");
      two.headers.emplace_back(kHandoffHeader, std::move(one.token));
    } else {
      ++counters.pd_plain_no_handoff;  // the worker said this request cannot be split
    }
    Outcome out = co_await relay_attempt(client, keep_alive, std::move(two), decode, *d, state,
                                         timer, /*decode_phase=*/one.kind == Phase1::kToken);
    if (out.kind == Outcome::kAnswered) co_return out.keep_alive;
    if (out.kind == Outcome::kClientGone) co_return false;
    last_error = out.why;
    tried_d[*d] = true;
    if (out.kind == Outcome::kTransferFailed) {
      ++counters.pd_transfer_failures;
      tried_p[*p] = true;  // the state could not come from it: a fresh prefill worker too
      std::fprintf(stderr, "deepinfer router: transfer %s -> %s failed; retrying the pair\n",
                   prefill[*p].url.text.c_str(), decode[*d].url.text.c_str());
    }
  }
  co_return co_await send_router_error(client, last_error.empty(), last_error, keep_alive);
}

}  // namespace deepinfer::router
