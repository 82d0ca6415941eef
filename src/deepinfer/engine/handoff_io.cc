#include "deepinfer/engine/handoff_io.h"

#include <algorithm>

namespace deepinfer {
namespace {

// The sequence's constant pages, then its first prompt_pages token pages.
std::vector<int32_t> handoff_page_ids(const kv::KvManager& kv, uint64_t seq_id,
                                      int64_t prompt_pages) {
  std::vector<int32_t> pages = *kv.state_pages(seq_id);
  const std::vector<int32_t>& table = *kv.block_table(seq_id);
  pages.insert(pages.end(), table.begin(), table.begin() + prompt_pages);
  return pages;
}

SequenceHandoff handoff_header(const std::string& fingerprint, const RequestState& r,
                               const TokenChoice& c, const kv::PageSpec& spec) {
  SequenceHandoff h;
  h.fingerprint = fingerprint;
  h.prompt_ids = r.prompt;
  h.cached_tokens = std::max<int64_t>(0, r.cached_tokens);
  h.first_token = c.result.token;
  h.first_drew = c.result.drew;
  h.has_logprobs = r.req.params.logprobs.has_value();
  h.first_logprob = c.result.logprob;
  for (const sample::TokenLogprob& t : c.result.top) h.first_top.emplace_back(t.id, t.logprob);
  h.page_bytes = spec.page_bytes;
  h.constant_pages = spec.constant_pages_per_seq;
  h.prompt_pages = spec.pages_for_tokens(static_cast<int64_t>(r.prompt.size()));
  return h;
}

}  // namespace

Status check_handoff(const GenerateRequest& r, const std::vector<int32_t>& prompt,
                     const std::string& fingerprint, const kv::PageSpec& spec, int64_t vocab) {
  if (r.export_ipc && !r.export_state)
    return invalid_argument("export_ipc is a form of export_state, which is not set");
  if (!r.export_state && !r.import_state) return ok_status();
  if (r.export_state && r.import_state)
    return invalid_argument("export_state and import_state exclude each other");
  if (r.params.n > 1)
    return invalid_argument("prefill/decode disaggregation needs n = 1, got n = " +
                            std::to_string(r.params.n));
  if (!r.import_state) return ok_status();
  const SequenceHandoff& h = *r.import_state;
  if (h.fingerprint != fingerprint)
    return failed_precondition(
        "import_state: the state comes from another model, device, numerics or page layout "
        "(its fingerprint differs from this engine's)");
  if (h.prompt_ids != prompt)
    return failed_precondition("import_state: the request's prompt (" +
                               std::to_string(prompt.size()) +
                               " tokens) differs from the prompt of the state (" +
                               std::to_string(h.prompt_ids.size()) + " tokens)");
  const int64_t prompt_pages = spec.pages_for_tokens(static_cast<int64_t>(prompt.size()));
  if (h.page_bytes != spec.page_bytes || h.constant_pages != spec.constant_pages_per_seq ||
      h.prompt_pages != prompt_pages ||
      static_cast<int64_t>(h.pages.size()) != (h.ipc_handle.empty() ? h.state_bytes() : 0))
    return failed_precondition("import_state: pages do not match this engine's page layout");
  if (h.first_token < 0 || h.first_token >= vocab)
    return invalid_argument("import_state: first token " + std::to_string(h.first_token) +
                            " is outside the vocabulary");
  return ok_status();
}

StatusOr<std::shared_ptr<const SequenceHandoff>> export_sequence(
    runtime::ModelRunner& runner, const kv::KvManager& kv, uint64_t seq_id,
    const std::string& fingerprint, const RequestState& r, const TokenChoice& c) {
  auto h = std::make_shared<SequenceHandoff>(handoff_header(fingerprint, r, c, kv.spec()));
  const std::vector<int32_t> ids = handoff_page_ids(kv, seq_id, h->prompt_pages);
  if (r.req.export_ipc) {
    ASSIGN_OR_RETURN(runtime::ModelRunner::DevicePages d, runner.export_pages_ipc(ids));
    h->ipc_handle = std::move(d.ipc_handle);
    h->device_pages = std::move(d.buffer);
  } else {
    ASSIGN_OR_RETURN(h->pages, runner.read_pages(ids));
  }
  return std::shared_ptr<const SequenceHandoff>(std::move(h));
}

Status write_handoff_pages(runtime::ModelRunner& runner, const kv::KvManager& kv, uint64_t seq_id,
                           const SequenceHandoff& h) {
  const std::vector<int32_t> ids = handoff_page_ids(kv, seq_id, h.prompt_pages);
  if (h.ipc_handle.empty()) return runner.write_pages(ids, h.pages);
  if (!h.device_pages) return failed_precondition("a CUDA IPC state was not mapped");
  return runner.write_pages_device(ids, {"", h.state_bytes(), h.device_pages});
}

Status map_ipc_handoff(runtime::ModelRunner& runner, SequenceHandoff* h) {
  if (h->ipc_handle.empty() || h->device_pages) return ok_status();
  ASSIGN_OR_RETURN(runtime::ModelRunner::DevicePages d,
                   runner.map_ipc_pages(h->ipc_handle, h->state_bytes()));
  h->device_pages = std::move(d.buffer);
  return ok_status();
}

}  // namespace deepinfer
