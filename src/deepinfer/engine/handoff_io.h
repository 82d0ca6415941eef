// The engine's side of a prefill/decode handoff (sequence_handoff.h): whether a request may
// export or import one, which pages it covers, and the header an export writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/output_processor.h"
#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/runtime/model_runner.h"

namespace deepinfer {

// export_state / import_state: one sample, and an imported state an engine of `fingerprint`,
// page layout `spec` and `vocab` tokens can continue from `prompt`. Errors name the field.
Status check_handoff(const GenerateRequest& r, const std::vector<int32_t>& prompt,
                     const std::string& fingerprint, const kv::PageSpec& spec, int64_t vocab);

// export_state: sequence seq_id of `r` after its prompt and first token `c`: the header (the
// prompt and cache hit, the first token, the page layout) and the pages it holds (its constant
// pages, then its prompt's token pages): their bytes, or with r.req.export_ipc a device buffer
// and its IPC handle.
StatusOr<std::shared_ptr<const SequenceHandoff>> export_sequence(
    runtime::ModelRunner& runner, const kv::KvManager& kv, uint64_t seq_id,
    const std::string& fingerprint, const RequestState& r, const TokenChoice& c);
// import_state: the handoff's pages into the sequence's own (a CUDA IPC state must have been
// mapped first).
Status write_handoff_pages(runtime::ModelRunner& runner, const kv::KvManager& kv, uint64_t seq_id,
                           const SequenceHandoff& h);
// A CUDA IPC state of another process copied into device memory of this one (no-op otherwise);
// any thread: the runner's map_ipc_pages touches none of its state.
Status map_ipc_handoff(runtime::ModelRunner& runner, SequenceHandoff* h);

}  // namespace deepinfer
