// Prefill/decode disaggregation: one sequence's state after its prompt and its first sampled
// token, as a prefill engine exports it (GenerateRequest::export_state) and a decode engine
// imports it (GenerateRequest::import_state). disagg/ moves it between processes as a JSON
// header (handoff_meta) and the page bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer {

struct SequenceHandoff {
  // The exporting engine's state fingerprint (model, numerics, device, page layout: what the
  // prefix cache keys on): pages are only imported by an engine with the same one.
  std::string fingerprint;
  std::vector<int32_t> prompt_ids;
  int64_t cached_tokens = 0;  // prompt tokens the prefill took from its prefix cache
  int32_t first_token = -1;
  bool first_drew = false;  // the first sample took one output of the request's seeded stream
  bool has_logprobs = false;
  float first_logprob = 0;
  std::vector<std::pair<int32_t, float>> first_top;  // the first token's top logprobs
  int64_t page_bytes = 0;
  int64_t constant_pages = 0;  // the sequence's constant pages, then
  int64_t prompt_pages = 0;    // the pages of its prompt's tokens
  std::string pages;           // (constant_pages + prompt_pages) * page_bytes bytes
  // CUDA IPC (--disagg-cuda-ipc): the pages stay in device memory and `pages` is empty.
  // ipc_handle (hex in the header) names the exporter's buffer for a process on its host;
  // device_pages holds the bytes in this process (the exporter's buffer, or the importer's copy
  // once Engine::map_ipc_state ran); it is never serialized.
  std::string ipc_handle;
  std::shared_ptr<void> device_pages;

  int64_t num_pages() const { return constant_pages + prompt_pages; }
  int64_t state_bytes() const { return num_pages() * page_bytes; }
};

// Everything but the pages, as one JSON object.
std::string handoff_meta(const SequenceHandoff& h);
// The inverse, with `pages` attached (none for a CUDA IPC state). invalid_argument naming the
// field for a malformed header or pages of the wrong length.
StatusOr<SequenceHandoff> handoff_from_meta(std::string_view meta, std::string pages);

}  // namespace deepinfer
