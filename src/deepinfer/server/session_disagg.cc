// Prefill/decode disaggregation in a session (server/README.md, "Disaggregation"). The router
// sends a request twice: to a prefill worker with `X-Deepinfer-Disagg: prefill`, which computes
// the prompt and the first token, parks the state and answers a handoff token; then to a decode
// worker with `X-Deepinfer-Disagg: decode` and `X-Deepinfer-Handoff: <token>`, which fetches the
// state from the prefill worker (disagg/) and answers the request as it would a plain one.
#include <boost/asio/post.hpp>

#include "deepinfer/disagg/transfer_client.h"
#include "deepinfer/server/session.h"

namespace deepinfer::server {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

ApiError disagg_error(int status, std::string message, std::string code,
                      std::string param = "X-Deepinfer-Disagg") {
  return {status, std::move(message), status >= 500 ? "server_error" : "invalid_request_error",
          std::move(param), std::move(code)};
}

// One prompt, one sample: what a handoff carries.
std::optional<std::string> not_disaggregable(const ParsedRequest& r) {
  if (r.endpoint == Endpoint::kCompletions && r.prompts.size() > 1)
    return "a completions request with " + std::to_string(r.prompts.size()) + " prompts";
  if (r.gen.params.n > 1) return "n = " + std::to_string(r.gen.params.n);
  return std::nullopt;
}

}  // namespace

bool Session::read_disagg_headers() {
  disagg_ = DisaggPhase::kNone;
  handoff_token_.clear();
  const auto& req = parser_->get();
  const std::string phase(req["X-Deepinfer-Disagg"]);
  if (phase.empty()) return true;
  const std::string& role = state_->options.role;
  if (phase == "prefill") {
    if (role == "decode") {
      send_error(disagg_error(400, "this worker runs with --role decode: it takes no prefill phase",
                              "disagg_role"));
      return false;
    }
    disagg_ = DisaggPhase::kPrefill;
    return true;
  }
  if (phase == "decode") {
    if (role == "prefill") {
      send_error(disagg_error(400, "this worker runs with --role prefill: it takes no decode phase",
                              "disagg_role"));
      return false;
    }
    handoff_token_ = std::string(req["X-Deepinfer-Handoff"]);
    if (handoff_token_.empty()) {
      send_error(disagg_error(400, "a decode phase needs the X-Deepinfer-Handoff header",
                              "missing_handoff", "X-Deepinfer-Handoff"));
      return false;
    }
    disagg_ = DisaggPhase::kDecode;
    return true;
  }
  send_error(disagg_error(
      400, "X-Deepinfer-Disagg must be prefill or decode, got \"" + phase + "\"", "invalid_value"));
  return false;
}

bool Session::disagg_prepared(const std::shared_ptr<ParsedRequest>& req) {
  if (disagg_ == DisaggPhase::kNone) return false;
  const std::optional<std::string> why = not_disaggregable(*req);
  if (disagg_ == DisaggPhase::kPrefill) {
    if (why) {  // the router then sends the request to a decode worker as a plain one
      generating_ = false;
      ++state_->disagg.fallbacks;
      send_json(200, {{"object", "deepinfer.prefill_handoff"},
                      {"handoff", nullptr},
                      {"reason", "not disaggregated: " + *why}});
      return true;
    }
    req->gen.export_state = true;
    req->gen.export_ipc = state_->options.disagg_cuda_ipc;
    req->stream = false;  // the answer is the token, never a stream
    return false;
  }
  if (why) {
    generating_ = false;
    send_error(disagg_error(400, "a decode phase takes one prompt and n = 1, not " + *why,
                            "not_disaggregable"));
    return true;
  }
  if (req->gen.import_state) return false;  // fetched: go on as a plain request
  StatusOr<disagg::HandoffAddress> at = disagg::parse_handoff_token(handoff_token_);
  if (!at.ok()) {
    generating_ = false;
    send_error(disagg_error(400, at.status().message(), "invalid_value", "X-Deepinfer-Handoff"));
    return true;
  }
  // The fetch blocks (bounded by --disagg-io-timeout): on the fetch pool, never the io thread.
  asio::post(*state_->fetch, [self = shared_from_this(), req, at = *at, o = state_->options.fetch] {
    // The state is read (and a CUDA IPC state mapped into this process's device memory) before
    // the fetch says DONE, while the prefill worker still holds it.
    StatusOr<SequenceHandoff> h = failed_precondition("the state was not fetched");
    disagg::FetchOptions fetch = o;
    fetch.before_done = [&h, engine = self->state_->engine.load()](disagg::Fetched& f) {
      h = handoff_from_meta(f.meta, std::move(f.payload));
      if (!h.ok()) return h.status();
      if (h->ipc_handle.empty()) return ok_status();
      if (engine == nullptr) return failed_precondition("the model is still loading");
      return engine->map_ipc_state(&*h);
    };
    StatusOr<disagg::Fetched> f = disagg::fetch_handoff(at, fetch);
    if (!f.ok()) h = f.status();
    if (h.ok()) req->gen.import_state = std::make_shared<const SequenceHandoff>(std::move(*h));
    const Status st = h.status();
    const int64_t bytes = f.ok() && h.ok() ? static_cast<int64_t>(f->meta.size()) +
                                                 req->gen.import_state->state_bytes()
                                           : 0;
    const double seconds = f.ok() ? f->seconds : 0;
    const int64_t corrupt = f.ok() ? f->corrupt_chunks : 0;
    asio::post(*self->state_->ioc, [self, req, st, bytes, seconds, corrupt] {
      self->guarded([&] {
        auto& c = self->state_->disagg;
        c.corrupt_chunks += corrupt;
        if (!st.ok()) {
          ++c.fetch_failures;
          if (self->closed_) return;
          if (self->peer_gone_ || self->cancelled_) return self->close();
          self->generating_ = false;
          return self->send_error(
              disagg_error(502, "could not fetch the prefill's state: " + st.message(),
                           "kv_transfer_failed", "X-Deepinfer-Handoff"));
        }
        ++c.imported;
        c.fetched_bytes += bytes;
        c.fetch_seconds += seconds;
        self->on_prepared(req, std::nullopt);
      });
    });
  });
  return true;
}

bool Session::disagg_finished(const std::optional<ApiError>& error) {
  if (disagg_ != DisaggPhase::kPrefill || !req_->gen.export_state) return false;
  if (peer_gone_) {
    log_access(499);
    close();
    return true;
  }
  if (error) {
    send_error(*error);
    return true;
  }
  const RequestOutput& out = outputs_[0];
  if (!out.handoff) {
    send_error(disagg_error(500, "the prefill finished without its state", "internal_error"));
    return true;
  }
  StatusOr<std::string> id = state_->handoffs->put(handoff_meta(*out.handoff), out.handoff->pages,
                                                   out.handoff->device_pages);
  if (!id.ok()) {
    send_error(disagg_error(503, id.status().message(), "handoff_store_full"),
               {{"Retry-After", "1"}});
    return true;
  }
  ++state_->disagg.exported;
  const disagg::HandoffAddress at{state_->transfer_host, state_->transfer->port(), *id,
                                  state_->options.transfer.transport};
  send_json(200, {{"object", "deepinfer.prefill_handoff"},
                  {"handoff", at.token()},
                  {"prompt_tokens", out.usage.prompt_tokens},
                  {"cached_tokens", out.usage.cached_tokens}});
  return true;
}

void Session::send_load() {
  Engine* engine = state_->engine.load();
  if (engine == nullptr) return send(503, "{\"status\":\"loading\"}");
  const EngineStats st = engine->stats();
  const EngineCapacity cap = engine->capacity();
  const double used = cap.num_pages > 0 ? 1.0 - static_cast<double>(engine->kv_free_pages()) /
                                                    static_cast<double>(cap.num_pages)
                                        : 0.0;
  send_json(200, {{"role", state_->options.role},
                  {"num_running", st.num_running},
                  {"num_waiting", st.num_waiting},
                  {"kv_usage", used},
                  {"max_num_seqs", state_->options.max_running}});
}

std::string Session::render_disagg_metrics() const {
  const auto& c = state_->disagg;
  const std::string labels =
      "{model_name=\"" + escape_label_value(state_->options.primary_model()) + "\"}";
  std::string out;
  auto counter = [&](const std::string& name, const std::string& help, double v) {
    out += "# HELP deepinfer:" + name + " " + help + "\n# TYPE deepinfer:" + name + " counter\n";
    char num[64];
    std::snprintf(num, sizeof(num), "%.17g", v);
    out += "deepinfer:" + name + labels + " " + num + "\n";
  };
  counter("disagg_handoffs_exported_total", "Prefill phases that parked a state.",
          static_cast<double>(c.exported));
  counter("disagg_handoffs_imported_total", "Decode phases that fetched a state.",
          static_cast<double>(c.imported));
  counter("disagg_prefill_fallbacks_total",
          "Prefill phases answered as not disaggregable (n > 1, several prompts).",
          static_cast<double>(c.fallbacks));
  counter("disagg_fetch_failures_total", "Decode phases whose state could not be fetched.",
          static_cast<double>(c.fetch_failures));
  counter("disagg_fetched_bytes_total", "State bytes fetched from prefill workers.",
          static_cast<double>(c.fetched_bytes));
  counter("disagg_fetch_seconds_total", "Time spent fetching states.", c.fetch_seconds);
  counter("disagg_corrupt_chunks_total", "Transfer chunks that failed their checksum (refetched).",
          static_cast<double>(c.corrupt_chunks));
  if (state_->handoffs) {
    const disagg::HandoffStoreStats h = state_->handoffs->stats();
    out +=
        "# HELP deepinfer:disagg_parked_handoffs States waiting for a decode worker.\n"
        "# TYPE deepinfer:disagg_parked_handoffs gauge\ndeepinfer:disagg_parked_handoffs" +
        labels + " " + std::to_string(h.handoffs) + "\n";
    out +=
        "# HELP deepinfer:disagg_parked_bytes Bytes of those states.\n"
        "# TYPE deepinfer:disagg_parked_bytes gauge\ndeepinfer:disagg_parked_bytes" +
        labels + " " + std::to_string(h.bytes) + "\n";
    counter("disagg_handoffs_expired_total", "Parked states no decode worker fetched in time.",
            static_cast<double>(h.expired));
  }
  if (state_->transfer) {
    const disagg::TransferServerStats t = state_->transfer->stats();
    counter("disagg_transfer_bytes_sent_total", "State bytes sent to decode workers.",
            static_cast<double>(t.bytes_sent));
    counter("disagg_transfer_resent_chunks_total", "Chunks sent again after a checksum failure.",
            static_cast<double>(t.resent_chunks));
    counter("disagg_transfer_failed_total", "Transfers that ended on an I/O error or timeout.",
            static_cast<double>(t.failed));
  }
  return out;
}

}  // namespace deepinfer::server
