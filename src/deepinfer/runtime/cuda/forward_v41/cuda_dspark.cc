#include "deepinfer/runtime/cuda/forward_v41/cuda_dspark.h"

#include <cmath>
#include <string>

#include "deepinfer/backend/cuda/attention/rope.h"
#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/quant/fake_quant.h"
#include "deepinfer/backend/cuda/sampling/argmax.h"
#include "deepinfer/runtime/cuda/forward/forward_kernels.h"
#include "deepinfer/runtime/cuda/forward_v41/dspark_kernels.h"

namespace deepinfer::cuda::v41f {
namespace {

std::string stage_prefix(int s) { return "mtp." + std::to_string(s) + "."; }

}  // namespace

DsparkWeights resolve_dspark(const v41::Config& c, const DeviceWeights& w) {
  DsparkWeights d;
  d.main_proj = w.matrix("mtp.0.main_proj.weight");
  d.main_norm = w.f("mtp.0.main_norm.weight");
  for (int s = 0; s < c.num_nextn_layers; ++s) {
    const std::string p = stage_prefix(s);
    DsparkStage st;
    st.hc_attn = resolve_hc(w, p + "hc_attn");
    st.hc_ffn = resolve_hc(w, p + "hc_ffn");
    st.attn_norm = w.f(p + "attn_norm.weight");
    st.ffn_norm = w.f(p + "ffn_norm.weight");
    st.attn = resolve_window_attention(w, p + "attn.");  // sliding only: no compressor
    st.ffn.gate = w.f(p + "ffn.gate.weight");
    st.ffn.bias = w.f(p + "ffn.gate.bias");
    resolve_experts(w, p, c.num_layers + s, c.dspark.n_routed_experts, c.n_shared_experts > 0,
                    &st.ffn);
    d.stages.push_back(std::move(st));
  }
  const std::string last = stage_prefix(c.num_nextn_layers - 1);
  d.norm = w.f(last + "norm.weight");
  d.markov_embed = w.f(last + "markov_head.embed.weight");
  d.markov_head = w.f(last + "markov_head.head.weight");
  d.confidence = w.f(last + "confidence_head.proj.weight");
  return d;
}

CudaDspark::CudaDspark(const v41::Config& c, DsparkWeights w, const V41Head& head, Gemm& gemm,
                       Linear& lin, MoeRunner& moe, const double* main_inv_freq,
                       cudaStream_t stream)
    : c_(c),
      w_(std::move(w)),
      head_(head),
      gemm_(gemm),
      lin_(lin),
      moe_(moe),
      main_inv_freq_(main_inv_freq),
      stream_(stream) {
  const int bs = c.dspark.block_size;
  // Every block row attends every block key: selections 0..bs-1 for each row.
  std::vector<int32_t> sel(size_t(bs) * bs), nsel(bs, bs), seq(bs, 0);
  for (int t = 0; t < bs; ++t)
    for (int j = 0; j < bs; ++j) sel[size_t(t) * bs + j] = j;
  selected_ = DeviceBuffer<int32_t>(sel);
  num_selected_ = DeviceBuffer<int32_t>(nsel);
  query_seq_ = DeviceBuffer<int32_t>(seq);
  moe_.reserve_grouped(bs, c.dspark.experts_per_token, c.hidden_size, c.moe_intermediate_size,
                       int64_t(c.moe_intermediate_size) * c.n_shared_experts,
                       c.dspark.n_routed_experts);
}

int64_t CudaDspark::tap_width() const {
  return int64_t(c_.dspark.target_layer_ids.size()) * c_.hidden_size;
}

int64_t CudaDspark::state_floats() const {
  return int64_t(c_.num_nextn_layers) * c_.sliding_window * c_.head_dim;
}

V41Context CudaDspark::context(int64_t rows, const int64_t* positions) const {
  static const std::vector<V41Segment> no_segments;
  return V41Context{c_,      gemm_,       lin_, moe_,     x_, main_inv_freq_, main_inv_freq_,
                    stream_, no_segments, rows, positions};
}

Status CudaDspark::absorb(float* rings, const float* taps, int64_t n, int64_t pos0) {
  if (n <= 0) return invalid_argument("DSpark absorb: no rows");
  const int64_t H = c_.hidden_size, hd = c_.head_dim, W = c_.sliding_window;
  int64_t* pos = grow(positions_, n);
  fill_positions(pos, n, pos0, 1, stream_);
  __nv_bfloat16* tb = grow(x_.s.hb, n * tap_width());
  to_bf16(taps, n * tap_width(), tb, stream_);
  float* mx = grow(main_x_, n * H);
  checked_linear(lin_, w_.main_proj, tb, n, H, tap_width(), mx, stream_);
  rms_norm(mx, w_.main_norm, n, H, static_cast<float>(c_.rms_norm_eps), mx, stream_);
  const V41Context m = context(n, pos);
  __nv_bfloat16* hb = grow(x_.s.hb, n * H);  // every stage projects the same rows
  to_bf16(mx, n * H, hb, stream_);
  for (int s = 0; s < c_.num_nextn_layers; ++s) {
    // The window K=V only (wkv, kv_norm, RoPE, FP8 rounding), as the CPU's attention_window_kv.
    const V41Attention& a = w_.stages[size_t(s)].attn;
    float* kv = grow(x_.s.kv, n * hd);
    m.linear(a.wkv, hb, n, hd, H, kv);
    rms_norm(kv, a.kv_norm, n, hd, m.eps(), kv, stream_);
    rope(kv + hd - c_.rope_dim, n, hd, c_.rope_dim, 1, pos, main_inv_freq_, false, stream_);
    fake_quant_window_kv(kv, n, hd, stream_);
    ring_write(kv, n, pos0, int(hd), rings + int64_t(s) * W * hd, W, stream_);
  }
  DI_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ok_status();
}

void CudaDspark::stage_attention(int s, const float* rings, int64_t pos0, const float* y,
                                 float* out) {
  const int bs = c_.dspark.block_size, nh = c_.num_heads, hd = c_.head_dim, rd = c_.rope_dim;
  const int64_t W = c_.sliding_window;
  const V41Attention& w = w_.stages[size_t(s)].attn;
  const V41Context m = context(bs, positions_.get());
  const QueryKv qk = v41_query_kv(m, w, y, main_inv_freq_);
  // Every block row at the window's last absorbed position pos0 - 1, whose key (the ring's row)
  // is given as the row's own; the block's keys are its entries, all selected.
  const float* ring = rings + int64_t(s) * W * hd;
  float* last = grow(last_, int64_t(bs) * hd);
  for (int t = 0; t < bs; ++t)
    DI_CUDA_CHECK(cudaMemcpyAsync(last + int64_t(t) * hd, ring + ((pos0 - 1) % W) * hd, hd * 4,
                                  cudaMemcpyDeviceToDevice, stream_));
  const float** rp = grow(ring_ptr_, 1);
  DI_CUDA_CHECK(cudaMemcpyAsync(rp, &ring, sizeof(ring), cudaMemcpyHostToDevice, stream_));
  SinkAttentionArgs a;
  a.q = qk.q;
  a.fresh = last;
  a.ring_rows = W;
  a.rings = rp;
  a.query_seq = query_seq_.get();
  a.positions = query_positions_.get();
  a.entries = contiguous_entries(qk.kv, hd);
  a.selected = selected_.get();
  a.num_selected = num_selected_.get();
  a.max_selected = bs;
  a.sinks = w.sink;
  float* o = grow(x_.s.o, int64_t(bs) * nh * hd);
  a.out = o;
  a.num_queries = bs;
  a.num_heads = nh;
  a.head_dim = hd;
  a.window = int(W);
  a.scale = static_cast<float>(std::pow(double(hd), -0.5));
  a.kernel = SinkKernel::kFp32;
  sink_attention(a, stream_);
  rope(o + hd - rd, int64_t(bs) * nh, hd, rd, nh, positions_.get(), main_inv_freq_,
       /*inverse=*/true, stream_);
  grouped_output(lin_, x_.s, w.wo_a, w.wo_b, o, bs, c_.o_groups, int64_t(nh / c_.o_groups) * hd,
                 c_.o_lora_rank, c_.hidden_size, stream_, out);
}

Status CudaDspark::propose(const float* rings, int64_t pos0, int32_t anchor,
                           v41::DsparkProposal* out) {
  const int bs = c_.dspark.block_size, hc = c_.hc_mult, R = c_.dspark.markov_rank;
  const int64_t H = c_.hidden_size, V = c_.vocab_size;
  if (anchor < 0 || anchor >= V)
    return invalid_argument("DSpark propose: anchor token " + std::to_string(anchor) +
                            " is outside the vocabulary (" + std::to_string(V) + ")");
  if (pos0 < 1) return invalid_argument("DSpark propose: nothing absorbed yet");
  // The block [anchor, noise...] at positions pos0...; the attention's queries sit at pos0 - 1.
  std::vector<int32_t> ids(bs, static_cast<int32_t>(c_.dspark.noise_token_id));
  ids[0] = anchor;
  int32_t* dids = grow(ids_, bs);
  DI_CUDA_CHECK(cudaMemcpyAsync(dids, ids.data(), bs * 4, cudaMemcpyHostToDevice, stream_));
  fill_positions(grow(positions_, bs), bs, pos0, 1, stream_);
  fill_positions(grow(query_positions_, bs), bs, pos0 - 1, 0, stream_);
  float* X = grow(X_, int64_t(bs) * hc * H);
  embed_rows(head_.embed, dids, bs, hc, H, X, stream_);
  std::vector<float> pre0(size_t(bs) * hc, 0.0f);  // the first site collapses stream 0 alone
  for (int t = 0; t < bs; ++t) pre0[size_t(t) * hc] = 1.0f;
  float* pre = grow(pre_, int64_t(bs) * hc);
  DI_CUDA_CHECK(
      cudaMemcpyAsync(pre, pre0.data(), pre0.size() * 4, cudaMemcpyHostToDevice, stream_));
  float* y = grow(y_, int64_t(bs) * H);
  float* post = grow(post_, int64_t(bs) * hc);
  float* comb = grow(comb_, int64_t(bs) * hc * hc);
  float* f = grow(f_, int64_t(bs) * H);
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const MoeSpec spec = v41_moe_spec(c_, c_.dspark.n_routed_experts, c_.dspark.experts_per_token);
  MoeCall call{gemm_, moe_, x_.s, stream_, false, {}};
  for (int s = 0; s < c_.num_nextn_layers; ++s) {
    const DsparkStage& st = w_.stages[size_t(s)];
    for (const bool attn : {true, false}) {
      hc_pre_deferred(hc_site_args(c_, attn ? st.hc_attn : st.hc_ffn, bs, x_.s), X, pre, pre, y,
                      post, comb, stream_);
      rms_norm(y, attn ? st.attn_norm : st.ffn_norm, bs, H, eps, y, stream_);
      if (attn)
        stage_attention(s, rings, pos0, y, f);
      else
        run_moe(spec, call, st.ffn, false, y, dids, bs, f);
      hc_post(f, post, comb, bs, hc, H, X, stream_);
    }
  }
  // The last FFN site's pre collapses the streams (deferred mHC, no hc_head); the head reads
  // the normed rows, the confidence head the un-normed ones.
  float* x = grow(xc_, int64_t(bs) * H);
  hc_collapse(pre, X, bs, hc, H, x, stream_);
  rms_norm(x, w_.norm, bs, H, eps, y, stream_);
  __nv_bfloat16* yb = grow(x_.s.hb, int64_t(bs) * H);
  to_bf16(y, int64_t(bs) * H, yb, stream_);
  float* logits = grow(logits_, int64_t(bs) * V);
  checked_linear(lin_, head_.head, yb, bs, V, H, logits, stream_);
  // chain[i]: draft i's previous token (chain[0] the anchor); draft i goes to chain[i + 1].
  int32_t* chain = grow(tokens_, bs + 1);
  DI_CUDA_CHECK(cudaMemcpyAsync(chain, &anchor, 4, cudaMemcpyHostToDevice, stream_));
  float* conf = grow(confidence_, bs);
  for (int i = 0; i < bs; ++i) {
    markov_bias(w_.markov_embed, w_.markov_head, chain + i, logits + int64_t(i) * V, V, R, stream_);
    draft_confidence(w_.confidence, x + int64_t(i) * H, w_.markov_embed, chain + i, H, R, conf + i,
                     stream_);
    argmax_rows(logits + int64_t(i) * V, 1, V, chain + i + 1, stream_);
  }
  out->tokens.resize(bs);
  out->confidence.resize(bs);
  out->logits.resize(size_t(bs) * V);
  DI_CUDA_CHECK(
      cudaMemcpyAsync(out->tokens.data(), chain + 1, bs * 4, cudaMemcpyDeviceToHost, stream_));
  DI_CUDA_CHECK(
      cudaMemcpyAsync(out->confidence.data(), conf, bs * 4, cudaMemcpyDeviceToHost, stream_));
  DI_CUDA_CHECK(cudaMemcpyAsync(out->logits.data(), logits, int64_t(bs) * V * 4,
                                cudaMemcpyDeviceToHost, stream_));
  DI_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ok_status();
}

}  // namespace deepinfer::cuda::v41f
