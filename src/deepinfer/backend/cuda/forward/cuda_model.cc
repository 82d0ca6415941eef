#include "deepinfer/backend/cuda/forward/cuda_model.h"

#include <algorithm>
#include <limits>
#include <string>

#include "deepinfer/backend/cuda/forward/forward_context.h"
#include "deepinfer/backend/cuda/forward/forward_kernels.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/sampling/argmax.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v4/rope.h"

namespace deepinfer::cuda {

struct CudaModel::Impl {
  Impl(v4::Config config, const v4::Weights& weights, const CudaModelOptions& o)
      : c(std::move(config)),
        options(o),
        w(c, weights),
        layers(resolve_layers(c, w)),
        head(resolve_head(w)),
        moe(gemm),
        seq(c, o.max_tokens, o.max_chunk),
        main_inv_freq(v4::RopeTable(c.rope_theta, c.rope_dim, nullptr).inv_freq()),
        compress_inv_freq(v4::RopeTable(c.compress_rope_theta, c.rope_dim, &c.yarn).inv_freq()) {
    DI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Impl() { cudaStreamDestroy(stream); }

  ForwardContext context() {
    return ForwardContext{c,
                          gemm,
                          moe,
                          s,
                          main_inv_freq.get(),
                          compress_inv_freq.get(),
                          options.model.clamp_shared_expert.value_or(true),
                          stream,
                          trace};
  }

  HcArgs hc_args(const HcWeights& hw, int64_t tokens) const {
    HcArgs a;
    a.fn = hw.fn;
    a.base = hw.base;
    a.scale = hw.scale;
    a.tokens = tokens;
    a.hidden = c.hidden_size;
    a.hc = c.hc_mult;
    a.sinkhorn_iters = c.hc_sinkhorn_iters;
    a.norm_eps = static_cast<float>(c.rms_norm_eps);
    a.hc_eps = static_cast<float>(c.hc_eps);
    return a;
  }

  // One block (spec §6.2-6.9): per sub-layer hc_pre, its norm, the sub-layer, hc_post.
  void block(const ForwardContext& ctx, int l, float* X, const int32_t* ids, int64_t n,
             int64_t pos0) {
    ForwardContext m = ctx;
    m.layer = l;
    const LayerWeights& L = layers[l];
    const int64_t H = c.hidden_size;
    const int hc = c.hc_mult;
    float* y = grow(s.y, n * H);
    float* post = grow(s.post, n * hc);
    float* comb = grow(s.comb, n * hc * hc);
    float* f = grow(s.f, n * H);
    for (const bool attn : {true, false}) {
      hc_pre(hc_args(attn ? L.hc_attn : L.hc_ffn, n), X, y, post, comb, stream);
      rms_norm(y, attn ? L.attn_norm : L.ffn_norm, n, H, m.eps(), y, stream);
      if (attn)
        attention_layer(m, L.attn, c.compress_ratio(l), y, n, pos0, seq.layers[l], f);
      else
        moe_layer(m, L.ffn, c.is_hash_layer(l), y, ids, n, f);
      hc_post(f, post, comb, n, hc, H, X, stream);
    }
  }

  // n <= max_chunk tokens at the sequence end; logits (device) for `rows` trailing positions.
  void chunk(const int32_t* host_ids, int64_t n, int64_t rows) {
    const ForwardContext m = context();
    const int64_t H = c.hidden_size, pos0 = seq.num_tokens;
    const int hc = c.hc_mult;
    int32_t* ids = grow(s.token_ids, n);
    DI_CUDA_CHECK(cudaMemcpyAsync(ids, host_ids, n * 4, cudaMemcpyHostToDevice, stream));
    float* X = grow(x, n * hc * H);
    embed_rows(head.embed, ids, n, hc, H, X, stream);
    for (int l = 0; l < c.num_layers; ++l) block(m, l, X, ids, n, pos0);
    seq.num_tokens += n;
    if (rows == 0) return;
    const float* Xh = X + (n - rows) * hc * H;
    float* y = grow(s.y, rows * H);
    hc_head(hc_args(head.hc, rows), Xh, y, stream);
    rms_norm(y, head.norm, rows, H, m.eps(), y, stream);
    __nv_bfloat16* yb = grow(s.hb, rows * H);
    to_bf16(y, rows * H, yb, stream);
    m.linear(head.head, yb, rows, c.vocab_size, H, grow(logits, rows * c.vocab_size));
    // The host ids feed an async copy: done before the caller may reuse them.
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  Status forward(const int32_t* ids, int64_t n, bool all_logits, std::vector<float>* out) {
    if (n <= 0) return invalid_argument("forward: no tokens");
    for (int64_t t = 0; t < n; ++t)
      if (ids[t] < 0 || ids[t] >= c.vocab_size)
        return invalid_argument("token id " + std::to_string(ids[t]) + " at position " +
                                std::to_string(seq.num_tokens + t) +
                                " is outside the vocabulary (" + std::to_string(c.vocab_size) +
                                ")");
    if (seq.num_tokens + n > seq.max_tokens)
      return out_of_range("forward: " + std::to_string(seq.num_tokens + n) +
                          " positions exceed CudaModelOptions.max_tokens (" +
                          std::to_string(seq.max_tokens) + ")");
    const int64_t V = c.vocab_size;
    if (out) out->resize((all_logits ? n : 1) * V);
    for (int64_t off = 0; off < n; off += options.max_chunk) {
      const int64_t len = std::min(options.max_chunk, n - off);
      const bool last = off + len == n;
      const int64_t rows = all_logits ? len : (last ? 1 : 0);
      chunk(ids + off, len, rows);
      if (out && rows > 0)
        DI_CUDA_CHECK(cudaMemcpy(out->data() + (all_logits ? off * V : 0), logits.get(),
                                 rows * V * 4, cudaMemcpyDeviceToHost));
    }
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    return ok_status();
  }

  void poison() {
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    auto p = [](auto& b) {
      if (b.size()) b.poison();
    };
    p(s.y), p(s.post), p(s.comb), p(s.f), p(s.hb), p(s.qrb), p(s.ob), p(s.zb);
    p(s.qr), p(s.q), p(s.kv), p(s.o), p(s.zg), p(s.z), p(s.ckv), p(s.cgate), p(s.win_kv);
    p(s.win_gate), p(s.qi), p(s.wi), p(s.scores), p(s.selected), p(s.num_selected);
    p(s.positions), p(s.entry_positions), p(s.router), p(s.route_w), p(s.route_ids);
    p(s.token_ids), p(x), p(logits), p(token);
    DI_CUDA_CHECK(cudaDeviceSynchronize());
  }

  v4::Config c;
  CudaModelOptions options;
  DeviceWeights w;
  std::vector<LayerWeights> layers;  // pointers into w, resolved once at load
  HeadWeights head;
  Gemm gemm;
  MoeRunner moe;
  ForwardScratch s;
  DeviceSequence seq;
  DeviceBuffer<double> main_inv_freq, compress_inv_freq;
  DeviceBuffer<float> x, logits;
  DeviceBuffer<int32_t> token;
  cudaStream_t stream = nullptr;
  DecisionTrace* trace = nullptr;
};

StatusOr<std::unique_ptr<CudaModel>> CudaModel::load(const std::string& dir,
                                                     const CudaModelOptions& options) {
  if (options.model.numerics != v4::Numerics::kPlain)
    return unimplemented(
        "CudaModel: numerics 'official' (simulated FP8/FP4 activation quantization) is not "
        "implemented on the GPU; use numerics 'plain'");
  if (options.max_chunk < 1 || options.max_tokens < 1)
    return invalid_argument("CudaModel: max_tokens and max_chunk must be positive");
  if (options.max_tokens / 4 > kMaxIndexerEntries)
    return invalid_argument("CudaModel: max_tokens " + std::to_string(options.max_tokens) +
                            " exceeds the indexer top-k capacity of " +
                            std::to_string(4 * kMaxIndexerEntries) + " positions");
  ASSIGN_OR_RETURN(v4::Config config, v4::load_config(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::open(dir));
  ASSIGN_OR_RETURN(v4::Weights weights, v4::load_weights(*ckpt, config));
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return failed_precondition("CudaModel: no CUDA device");
  return std::unique_ptr<CudaModel>(
      new CudaModel(std::make_unique<Impl>(std::move(config), weights, options)));
}

CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::~CudaModel() = default;

const v4::Config& CudaModel::config() const { return impl_->c; }
int64_t CudaModel::num_tokens() const { return impl_->seq.num_tokens; }
void CudaModel::reset() { impl_->seq.reset(); }
void CudaModel::poison_scratch() { impl_->poison(); }
void CudaModel::set_trace(DecisionTrace* trace) {
  if (trace) {
    trace->experts.assign(impl_->c.num_layers, {});
    trace->selected.assign(impl_->c.num_layers, {});
  }
  impl_->trace = trace;
}

Status CudaModel::forward(const int32_t* ids, int64_t n, bool all_logits,
                          std::vector<float>* logits) {
  return impl_->forward(ids, n, all_logits, logits);
}

StatusOr<std::vector<int32_t>> CudaModel::generate_greedy(const int32_t* prompt, int64_t n,
                                                          int64_t n_new) {
  Impl& m = *impl_;
  std::vector<int32_t> out;
  RETURN_IF_ERROR(m.forward(prompt, n, false, nullptr));
  int32_t* token = grow(m.token, 1);
  for (int64_t i = 0; i < n_new; ++i) {
    argmax_rows(m.logits.get(), 1, m.c.vocab_size, token, m.stream);
    int32_t next = 0;
    DI_CUDA_CHECK(cudaMemcpyAsync(&next, token, 4, cudaMemcpyDeviceToHost, m.stream));
    DI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    out.push_back(next);
    if (i + 1 < n_new) RETURN_IF_ERROR(m.forward(&next, 1, false, nullptr));
  }
  return out;
}

}  // namespace deepinfer::cuda
