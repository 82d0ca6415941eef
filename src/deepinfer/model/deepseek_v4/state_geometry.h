// Bytes of per-sequence decode state for a deepseek_v4 config (spec §7), split into the part
// every sequence holds regardless of length and the part that grows with its tokens. Sizing
// only: where the bytes live is StateLayout's business, and what a pool of pages is kv/'s.
#pragma once

#include <cstdint>

#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::v4 {

struct StateGeometry {
  int element_bytes = 0;  // KV rows (rings, compressed entries, indexer keys)
  int page_tokens = 0;    // tokens per page of growing state

  // Growing part, in thousandths of a byte per token: an entry is emitted every `ratio` tokens,
  // so head_dim * element_bytes / ratio need not be a whole number of bytes.
  int64_t bytes_per_token_x1000 = 0;
  int64_t compressed_kv_bytes_per_token_x1000 = 0;  // CSA + HCA compressed entries
  int64_t indexer_key_bytes_per_token_x1000 = 0;    // CSA indexer keys
  int64_t page_bytes = 0;  // growing bytes of page_tokens tokens, rounded up

  // Constant part: held from a sequence's first token to its end.
  int64_t swa_ring_bytes = 0;          // sliding-window rings of the num_layers main layers
  int64_t mtp_ring_bytes = 0;          // the MTP layers' rings
  int64_t compressor_state_bytes = 0;  // partial windows (main + indexer); FP32 as in the reference
  int64_t constant_bytes_per_seq = 0;  // sum of the three above
  int64_t constant_pages_per_seq = 0;  // constant part in pages, rounded up (0 if page_bytes is 0)
};

// element_bytes: 4 for the fp32 CPU reference, 2 for bf16. The compressor partial windows are
// always FP32 (the reference accumulates kv and score in FP32 whatever the KV dtype).
StateGeometry state_geometry(const Config& c, int element_bytes, int page_tokens = 128);

}  // namespace deepinfer::v4
