// The engine's side of a prefill/decode handoff (sequence_handoff.h): whether a request may
// export or import one, which pages it covers, and the header an export writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/output_processor.h"
#include "deepinfer/kv/kv_manager.h"

namespace deepinfer {

// export_state / import_state: one sample, and an imported state an engine of `fingerprint`,
// page layout `spec` and `vocab` tokens can continue from `prompt`. Errors name the field.
Status check_handoff(const GenerateRequest& r, const std::vector<int32_t>& prompt,
                     const std::string& fingerprint, const kv::PageSpec& spec, int64_t vocab);

// The pages a handoff holds, in its order: the sequence's constant pages, then its first
// `prompt_pages` token pages.
std::vector<int32_t> handoff_page_ids(const kv::KvManager& kv, uint64_t seq_id,
                                      int64_t prompt_pages);

// An export's header (everything but the pages): the prompt and cache hit of `r`, its first
// token `c`, the layout of `spec`.
SequenceHandoff handoff_header(const std::string& fingerprint, const RequestState& r,
                               const TokenChoice& c, const kv::PageSpec& spec);

}  // namespace deepinfer
