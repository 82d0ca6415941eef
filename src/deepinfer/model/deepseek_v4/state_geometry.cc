#include "deepinfer/model/deepseek_v4/state_geometry.h"

namespace deepinfer::v4 {
namespace {

constexpr int64_t kStateBytes = 4;  // FP32 compressor accumulators

// kv and score for the windows the reference keeps: CSA 2*ratio rows of 2*dim (the window being
// filled and the previous one's A-halves), HCA ratio rows of dim (spec §7 table).
int64_t compressor_bytes(int ratio, int dim) {
  const int64_t rows = is_csa_ratio(ratio) ? 2 * ratio : ratio;
  const int64_t width = is_csa_ratio(ratio) ? 2 * dim : dim;
  return 2 * rows * width * kStateBytes;
}

// Thousandths of a byte per token for one entry of `dim` elements every `ratio` tokens, rounded
// up so the budget never undercounts.
int64_t per_token_x1000(int dim, int element_bytes, int ratio) {
  const int64_t num = int64_t{1000} * dim * element_bytes;
  return (num + ratio - 1) / ratio;
}

}  // namespace

StateGeometry state_geometry(const Config& c, int element_bytes, int page_tokens) {
  StateGeometry g;
  g.element_bytes = element_bytes;
  g.page_tokens = page_tokens;
  const int64_t ring = int64_t{c.sliding_window} * c.head_dim * element_bytes;
  for (int l = 0; l < c.num_layers; ++l) {
    g.swa_ring_bytes += ring;
    const int r = c.compress_ratio(l);
    if (r <= 0) continue;
    g.compressor_state_bytes += compressor_bytes(r, c.head_dim);
    g.compressed_kv_bytes_per_token_x1000 += per_token_x1000(c.head_dim, element_bytes, r);
    if (is_csa_ratio(r)) {
      g.compressor_state_bytes += compressor_bytes(r, c.index_head_dim);
      g.indexer_key_bytes_per_token_x1000 += per_token_x1000(c.index_head_dim, element_bytes, r);
    }
  }
  // The MTP layer is sliding-window only (spec §6.10): a ring and nothing that grows.
  g.mtp_ring_bytes = int64_t{c.num_mtp_layers} * ring;
  g.constant_bytes_per_seq = g.swa_ring_bytes + g.mtp_ring_bytes + g.compressor_state_bytes;
  g.bytes_per_token_x1000 =
      g.compressed_kv_bytes_per_token_x1000 + g.indexer_key_bytes_per_token_x1000;
  if (page_tokens > 0) g.page_bytes = (page_tokens * g.bytes_per_token_x1000 + 999) / 1000;
  if (g.page_bytes > 0)
    g.constant_pages_per_seq = (g.constant_bytes_per_seq + g.page_bytes - 1) / g.page_bytes;
  return g;
}

}  // namespace deepinfer::v4
