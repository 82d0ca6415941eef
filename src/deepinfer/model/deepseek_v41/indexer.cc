// Index sources (spec §11.2.3-4): score the group's indexer keys per query, keep the top
// index_topk visible entries; the candidate source first keeps its top candidate blocks, and the
// later index sources of its group pick only inside them. Ties go to the earlier entry (block),
// so the picks never depend on how the sequence was chunked.
#include <cmath>
#include <limits>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v41/model_context.h"
#include "deepinfer/model/deepseek_v41/qat.h"

namespace deepinfer::v41 {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Level one: blocks of block_size entries scored by their best visible entry; the block holding
// the newest visible entry is always kept (it is only partly filled).
std::vector<uint8_t> candidate_blocks(const Config& c, const std::vector<float>& score,
                                      int64_t visible, int64_t num_entries) {
  const int64_t bs = c.candidate_block_size;
  const int64_t nb = (num_entries + bs - 1) / bs;
  std::vector<float> best(nb, kNegInf);
  for (int64_t e = 0; e < visible; ++e) best[e / bs] = std::max(best[e / bs], score[e]);
  if (visible > 0) best[(visible - 1) / bs] = std::numeric_limits<float>::infinity();
  std::vector<uint8_t> keep(nb, 0);
  for (int64_t b : cpu::top_k_indices(best.data(), nb, c.candidate_topk_blocks))
    keep[b] = best[b] > kNegInf;
  return keep;
}

}  // namespace

void indexer_forward(const ModelContext& m, int layer, const KvSourceState& src, const float* qr,
                     const float* h, int64_t n, int64_t pos0, ForwardShared& shared) {
  const Config& c = m.c;
  shared.picks.assign(n, {});
  if (src.num_entries() == 0) return;
  const std::string p = layer_prefix(layer) + "attn.indexer.";
  const int ih = c.index_n_heads, ihd = c.index_head_dim, rd = c.rope_dim;
  std::vector<float> q(n * ih * ihd), w(n * ih);
  cpu::linear(m.f(p + "wq_b.weight"), int64_t(ih) * ihd, c.q_lora_rank, qr, n, q.data());
  cpu::linear(m.f(p + "weights_proj.weight"), ih, c.hidden_size, h, n, w.data());
  const float score_scale = static_cast<float>(std::pow(double(ihd), -0.5));
  const float head_scale = static_cast<float>(std::pow(double(ih), -0.5));
  const bool candidate_source = c.is_candidate_source(layer);
  const bool constrained = c.uses_candidates(layer) && shared.has_candidates;
  if (candidate_source) shared.candidate_blocks.assign(n, {});
  ThreadPool::default_pool().parallel_for(n, 1, [&](int64_t b, int64_t e) {
    std::vector<float> score;
    for (int64_t t = b; t < e; ++t) {
      const int64_t pos = pos0 + t;
      float* qt = &q[t * ih * ihd];
      for (int hh = 0; hh < ih; ++hh) {
        m.compress_rope.rotate(qt + int64_t(hh) * ihd + ihd - rd, pos);
        quantize_indexer(qt + int64_t(hh) * ihd, ihd);
      }
      const int64_t visible = std::min<int64_t>((pos + 1) / src.ratio, src.num_entries());
      score.assign(visible, kNegInf);
      for (int64_t k = 0; k < visible; ++k)
        score[k] =
            cpu::indexer_score(qt, &w[t * ih], src.index_keys[k], ih, ihd, head_scale, score_scale);
      if (candidate_source) {
        shared.candidate_blocks[t] = candidate_blocks(c, score, visible, src.num_entries());
      } else if (constrained) {
        const std::vector<uint8_t>& keep = shared.candidate_blocks[t];
        for (int64_t k = 0; k < visible; ++k)
          if (!keep[k / c.candidate_block_size]) score[k] = kNegInf;
      }
      const int64_t top = std::min<int64_t>(c.index_topk, src.num_entries());
      for (int64_t k : cpu::top_k_indices(score.data(), visible, top))
        if (score[k] > kNegInf) shared.picks[t].push_back(k);
    }
  });
  if (candidate_source) shared.has_candidates = true;
}

}  // namespace deepinfer::v41
