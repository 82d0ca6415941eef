// KV compressors (spec §6.6): HCA pools `ratio` tokens per entry; CSA pools 2*ratio slots that
// overlap the previous window through its A-halves. Per-channel softmax over the slots.
#include <algorithm>
#include <cmath>
#include <limits>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/model/deepseek_v4/model_context.h"
#include "deepinfer/tensor/fake_quant.h"

namespace deepinfer::v4 {
namespace {

void compressor_push(const ModelContext& m, const std::string& prefix, bool is_indexer,
                     CompressorState& s, const float* kv, const float* gate, int64_t pos) {
  const int r = s.ratio, W = s.width, d = s.dim;
  const std::string base = prefix + (is_indexer ? "attn.indexer.compressor." : "attn.compressor.");
  const float* ape = m.f(base + "ape");
  const int slot = static_cast<int>(pos % r);
  for (int k = 0; k < W; ++k) {
    s.pending_kv[slot][k] = kv[k];
    s.pending_gate[slot][k] = gate[k] + ape[slot * W + k];
  }
  s.pending = slot + 1;
  if (s.pending < r) return;

  const bool overlap = W == 2 * d;
  // Slots: A-halves of the previous window (CSA only), then this window's own half.
  std::vector<const float*> kv_rows, gate_rows;
  if (overlap && s.has_prev)
    for (int j = 0; j < r; ++j)
      kv_rows.push_back(s.prev_kv[j]), gate_rows.push_back(s.prev_gate[j]);
  for (int j = 0; j < r; ++j) {
    kv_rows.push_back(s.pending_kv[j] + (overlap ? d : 0));
    gate_rows.push_back(s.pending_gate[j] + (overlap ? d : 0));
  }
  std::vector<float> v(d);
  const float ninf = -std::numeric_limits<float>::infinity();
  cpu::softmax_pool(kv_rows.data(), gate_rows.data(), static_cast<int>(kv_rows.size()), d,
                    v.data());
  if (overlap) {
    for (int j = 0; j < r; ++j)
      for (int ch = 0; ch < d; ++ch) {
        s.prev_kv[j][ch] = s.pending_kv[j][ch];
        s.prev_gate[j][ch] = s.pending_gate[j][ch];
      }
    s.has_prev = true;
  }
  for (int j = 0; j < r; ++j) {
    std::fill(s.pending_kv[j], s.pending_kv[j] + W, 0.0f);
    std::fill(s.pending_gate[j], s.pending_gate[j] + W, ninf);
  }
  s.pending = 0;

  const int64_t entry = (pos + 1) / r - 1;
  cpu::rms_norm(v.data(), m.f(base + "norm.weight"), d, static_cast<float>(m.c.rms_norm_eps),
                v.data());
  m.compress_rope.rotate(v.data() + d - m.c.rope_dim, entry * r);
  if (m.official()) {
    if (is_indexer) {
      hadamard_transform(v.data(), d);
      fake_quant_fp4_blocks(v.data(), d, 32);
    } else {
      fake_quant_fp8_blocks(v.data(), d - m.c.rope_dim, 64);
    }
  }
  std::copy(v.begin(), v.end(), s.append_entry());
}

}  // namespace

void compressor_forward(const ModelContext& m, const std::string& prefix, bool is_indexer,
                        CompressorState& s, const float* h, int64_t n, int64_t pos0) {
  const std::string base = prefix + (is_indexer ? "attn.indexer.compressor." : "attn.compressor.");
  const int64_t H = m.c.hidden_size, w = s.width;
  std::vector<float> kv(n * w), gate(n * w);
  cpu::linear(m.f(base + "wkv.weight"), w, H, h, n, kv.data());
  cpu::linear(m.f(base + "wgate.weight"), w, H, h, n, gate.data());
  for (int64_t t = 0; t < n; ++t)
    compressor_push(m, prefix, is_indexer, s, &kv[t * w], &gate[t * w], pos0 + t);
}

}  // namespace deepinfer::v4
