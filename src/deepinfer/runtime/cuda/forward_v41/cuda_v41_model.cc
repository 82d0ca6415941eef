#include "deepinfer/runtime/cuda/forward_v41/cuda_v41_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "deepinfer/backend/cuda/engram/engram_gate.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/sampling/argmax.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/config_field_reader.h"
#include "deepinfer/model/deepseek_v4/rope.h"
#include "deepinfer/model/deepseek_v41/engram.h"
#include "deepinfer/model/deepseek_v41/weights.h"
#include "deepinfer/model/deepseek_v41/yoco_rows.h"
#include "deepinfer/model/model_family.h"
#include "deepinfer/runtime/cuda/forward/forward_kernels.h"
#include "deepinfer/runtime/cuda/forward/page_pool.h"
#include "deepinfer/runtime/cuda/forward/pool_sizing.h"
#include "deepinfer/runtime/cuda/forward_v41/cuda_dspark.h"
#include "deepinfer/runtime/cuda/forward_v41/dspark_kernels.h"
#include "deepinfer/runtime/cuda/forward_v41/v41_forward.h"

namespace deepinfer::cuda {

using v41f::V41Context;
using v41f::V41Segment;
using v41f::V41SequenceView;

namespace {

std::vector<double> inv_freq(const v41::Config& c, const v41::RopeConfig& r) {
  const v4::YarnConfig yarn{r.yarn, r.factor, r.original_max_position_embeddings, r.beta_fast,
                            r.beta_slow};
  return v4::RopeTable(r.theta, c.rope_dim, &yarn, v4::RopeTable::Precision::kTorchFp32).inv_freq();
}

// Engram look-back rows hold compressed ids as int32 bits (the CPU's encoding).
int64_t load_id(float v) {
  int32_t i;
  std::memcpy(&i, &v, 4);
  return i;
}
float store_id(int64_t id) {
  const int32_t i = static_cast<int32_t>(id);
  float v;
  std::memcpy(&v, &i, 4);
  return v;
}

// The smallest compress ratio of any layer (0: no compressed layer): it bounds the entries.
int min_compress_ratio(const v41::Config& c) {
  int r = 0;
  for (int l = 0; l < c.num_layers; ++l)
    if (c.compress_ratio(l) > 0)
      r = r == 0 ? c.compress_ratio(l) : std::min(r, c.compress_ratio(l));
  return r;
}

}  // namespace

struct CudaV41Model::Impl {
  Impl(v41::Config config, DeviceWeights weights, std::unique_ptr<Checkpoint> checkpoint,
       std::optional<v41::EngramTables> tables, const CudaModelOptions& o)
      : c(std::move(config)),
        options(o),
        w(std::move(weights)),
        ckpt(std::move(checkpoint)),
        engram(std::move(tables)),
        layers(v41f::resolve_v41_layers(c, w)),
        head(v41f::resolve_v41_head(w)),
        linear(gemm),
        moe(linear),
        main_inv_freq(inv_freq(c, c.rope_main)),
        compress_inv_freq(inv_freq(c, c.rope_compress)) {
    DI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    gemm.set_batch_invariant(o.batch_invariant);  // Linear and run_moe follow it (decision 0014)
    linear.reserve(w.largest_quantized());
    const int bs = std::max(1, c.candidate_block_size);
    const int min_ratio = min_compress_ratio(c);
    most_entries = min_ratio > 0 ? o.max_tokens / min_ratio : 0;
    max_blocks = static_cast<int>(std::max<int64_t>(1, (most_entries + bs - 1) / bs));
  }
  ~Impl() { cudaStreamDestroy(stream); }

  Status allocate() {
    max_rows = std::max<int64_t>(1, std::min<int64_t>(options.max_sequences, options.max_chunk));
    moe.reserve_grouped(std::max(max_rows, options.max_chunk), c.experts_per_token, c.hidden_size,
                        c.moe_intermediate_size,
                        int64_t(c.moe_intermediate_size) * c.n_shared_experts, c.n_routed_experts);
    state = std::make_unique<v41f::V41PagedState>(c, options.page_tokens, options.max_tokens,
                                                  std::max(max_rows, int64_t{1}));
    const int64_t per = per_sequence();
    // What grows with positions, at its largest before the pool is sized: a chunk's indexer
    // scores at the last position, and the chunked top-k's survivors.
    const int64_t rows = std::max(max_rows, std::min(options.max_chunk, options.max_tokens));
    if (most_entries > 0) {
      grow(x.s.scores, rows * most_entries);
      indexer_topk_reserve(rows, most_entries, std::max(1, c.index_topk));
    }
    if (options.memory_fraction <= 0) {
      state->allocate(per * options.max_sequences);
      return ok_status();
    }
    // Profile step (as CudaModel): one sequence prefills a max_chunk chunk of token 0, growing
    // the position-independent scratch; then the pool takes what the fraction leaves.
    state->allocate(per);
    std::vector<int32_t> pages(per);
    for (int64_t k = 0; k < per; ++k) pages[k] = static_cast<int32_t>(k);
    PagedSequence q;
    q.constant_pages = pages.data();
    q.token_pages = pages.data() + state->layout().constant_pages();
    q.num_token_pages = state->max_token_pages();
    const std::vector<int32_t> ids(std::min(options.max_chunk, options.max_tokens), 0);
    RETURN_IF_ERROR(forward(q, ids.data(), int64_t(ids.size()), false, nullptr));
    PoolSizing ps;
    ps.fraction = options.memory_fraction;
    ps.pool_bytes = options.pool_bytes;
    ps.page_bytes = state->page_bytes();
    ps.slot_bytes = state->pool_bytes(per);
    ps.weight_bytes = w.bytes();
    ps.max_tokens = options.max_tokens;
    ASSIGN_OR_RETURN(const int64_t n, pool_pages(ps));
    state->allocate(n);
    return ok_status();
  }

  int64_t per_sequence() const {
    return state->layout().constant_pages() + state->max_token_pages();
  }

  HcArgs hc_args(const HcWeights& hw, int64_t tokens) { return hc_site_args(c, hw, tokens, x.s); }

  MoeSpec moe_spec() const {
    return v41f::v41_moe_spec(c, c.n_routed_experts, c.experts_per_token);
  }

  // Engram ids of the call: hashes every segment's positions on the host from its look-back
  // (read from its constant page) and its tokens, writes the look-back back, and starts the
  // table gather for all rows on a helper thread.
  void engram_rows(const std::vector<V41Segment>& segs, const std::vector<V41SequenceView>& views,
                   const int32_t* host_ids, int64_t rows, std::optional<v41::EngramPrefetch>* out) {
    const v41::EngramHasher& hasher = engram->hasher;
    const int64_t back = c.engram.max_ngram_size - 1;
    const int64_t per_token = int64_t(hasher.n_layers()) * hasher.n_cols();
    std::vector<int64_t> all(rows * per_token);
    std::vector<float> kept(back * segs.size());
    for (size_t i = 0; i < segs.size() && back > 0; ++i)
      DI_CUDA_CHECK(cudaMemcpyAsync(&kept[i * back], views[i].engram_history, back * 4,
                                    cudaMemcpyDeviceToHost, stream));
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < segs.size(); ++i) {
      const V41Segment& g = segs[i];
      float* ring = &kept[i * back];
      const int64_t first = std::max<int64_t>(0, g.pos0 - back);
      std::vector<int64_t> history(g.pos0 + g.n - first);
      for (int64_t p = first; p < g.pos0; ++p) history[p - first] = load_id(ring[p % back]);
      for (int64_t t = 0; t < g.n; ++t)
        history[g.pos0 + t - first] = engram->token_map[host_ids[g.row0 + t]];
      hasher.hash(history, first, g.pos0, g.pos0 + g.n,
                  std::span<int64_t>(&all[g.row0 * per_token], g.n * per_token));
      if (back == 0) continue;
      for (int64_t p = std::max(first, g.pos0 + g.n - back); p < g.pos0 + g.n; ++p)
        ring[p % back] = store_id(history[p - first]);
      DI_CUDA_CHECK(
          cudaMemcpyAsync(views[i].engram_history, ring, back * 4, cudaMemcpyHostToDevice, stream));
    }
    out->emplace(*engram, std::move(all), rows);
  }

  void engram_layer(const V41Context& m, int l, v41::EngramPrefetch& prefetch, float* X) {
    const int64_t H = c.hidden_size, n = m.rows;
    const int hc = c.hc_mult;
    const int64_t in = int64_t(engram->hasher.n_cols()) * c.engram.head_dim;
    const int64_t out = (hc + 1) * H;
    float* emb = grow(x.engram_emb, n * in);
    DI_CUDA_CHECK(cudaMemcpyAsync(emb, prefetch.rows_of(c.layers[l].engram_slot), n * in * 4,
                                  cudaMemcpyHostToDevice, stream));
    __nv_bfloat16* eb = grow(x.engram_b, n * in);
    to_bf16(emb, n * in, eb, stream);
    float* kv = grow(x.engram_kv, n * out);
    m.linear(layers[l].engram.wkv, eb, n, out, in, kv);
    engram_gate(kv, layers[l].engram.q_weight, layers[l].engram.k_weight, n, hc, H, m.eps(), X,
                stream);
  }

  // What the sub-layers of one call (or of its trimmed tail) read.
  v41f::V41Context context_for(const std::vector<V41Segment>& segs, int64_t rows,
                               const int64_t* positions, v41f::V41Trace* tr) {
    return v41f::V41Context{
        c,    gemm, linear,    moe,        x, main_inv_freq.get(), compress_inv_freq.get(), stream,
        segs, rows, positions, max_blocks, tr};
  }

  // Every layer over the segments' rows (host ids), then the head over the trailing
  // `logit_rows` rows into `logits`. Synchronizes before returning. full_from (YOCO compact, one
  // segment): only the logits from that row on are needed, so the layers after the last one with
  // cached state run only the rows those and later calls read (v41::yoco_layer_rows).
  void run(const PagedSequence* seqs, const std::vector<V41Segment>& plan, const int32_t* host_ids,
           int64_t rows, int64_t logit_rows, int64_t full_from = 0) {
    const int64_t H = c.hidden_size;
    const int hc = c.hc_mult;
    std::vector<V41SequenceView> views = state->resolve(seqs, int64_t(plan.size()), stream);
    std::vector<V41Segment> segs = plan;
    std::vector<int64_t> pos(rows);
    for (size_t i = 0; i < segs.size(); ++i) {
      segs[i].seq = &views[i];
      for (int64_t t = 0; t < segs[i].n; ++t) pos[segs[i].row0 + t] = segs[i].pos0 + t;
    }
    int64_t* positions = grow(x.s.positions, rows);
    DI_CUDA_CHECK(cudaMemcpyAsync(positions, pos.data(), rows * 8, cudaMemcpyHostToDevice, stream));
    int32_t* ids = grow(x.s.token_ids, rows);
    DI_CUDA_CHECK(cudaMemcpyAsync(ids, host_ids, rows * 4, cudaMemcpyHostToDevice, stream));
    std::optional<v41::EngramPrefetch> prefetch;
    if (engram) engram_rows(segs, views, host_ids, rows, &prefetch);

    float* X = grow(xbuf, rows * hc * H);
    embed_rows(head.embed, ids, rows, hc, H, X, stream);
    // Layer 0's attention collapses stream 0 alone.
    std::vector<float> pre0(rows * hc, 0.0f);
    for (int64_t t = 0; t < rows; ++t) pre0[t * hc] = 1.0f;
    float* pre = grow(x.pre, rows * hc);
    DI_CUDA_CHECK(cudaMemcpyAsync(pre, pre0.data(), rows * hc * 4, cudaMemcpyHostToDevice, stream));
    // The picks and kept blocks live for the whole call, one row per query.
    grow(x.s.selected, rows * std::max(1, c.index_topk));
    grow(x.s.num_selected, rows);
    grow(x.keep, rows * max_blocks);

    if (trace) trace->gap.assign(rows, INFINITY);
    const V41Context m = context_for(segs, rows, positions, trace);
    float* y = grow(x.s.y, rows * H);
    float* post = grow(x.s.post, rows * hc);
    float* comb = grow(x.s.comb, rows * hc * hc);
    float* f = grow(x.s.f, rows * H);
    const MoeSpec spec = moe_spec();
    int layer = 0;
    MoeCall call{gemm, moe, x.s, stream, false, {}};
    if (trace) call.routed = [&](const int32_t*) { trace_routing(layer, rows); };
    std::vector<v41::LayerRows> trim(size_t(c.num_layers));  // rows each sub-layer starts at
    full_from = std::clamp<int64_t>(full_from, 0, rows - logit_rows);
    bool taps = false;  // a sequence keeps its rows' taps (the DSpark drafter's input)
    for (size_t i = 0; i < plan.size(); ++i) taps = taps || seqs[i].taps != nullptr;
    // The taps read every row of their layers: with them only the last layer's MoE is trimmed,
    // as on the CPU.
    if (full_from > 0 && segs.size() == 1 && !trace && taps && c.num_layers > 0)
      trim.back().ffn_from = full_from;
    else if (full_from > 0 && segs.size() == 1 && !trace)
      trim = v41::yoco_layer_rows(c, rows, full_from);
    const std::vector<int>& tap_layers = c.dspark.target_layer_ids;
    const int64_t tap_width = int64_t(tap_layers.size()) * H;
    for (int l = 0; l < c.num_layers; ++l) {
      layer = l;
      const v41f::V41Layer& L = layers[l];
      if (c.is_engram_layer(l)) engram_layer(m, l, *prefetch, X);
      for (size_t k = 0; taps && k < tap_layers.size(); ++k)
        if (tap_layers[k] == l)
          for (size_t i = 0; i < segs.size(); ++i)
            if (seqs[i].taps)
              v41f::hc_mean_rows(X + segs[i].row0 * hc * H, segs[i].n, hc, H,
                                 seqs[i].taps + int64_t(k) * H, tap_width, stream);
      for (const bool attn : {true, false}) {
        const int64_t t0 = attn ? trim[l].attn_from : trim[l].ffn_from, k = rows - t0;
        if (k <= 0) continue;
        float* Xt = X + t0 * hc * H;
        float* pt = pre + t0 * hc;
        HcArgs ha = hc_args(attn ? L.hc_attn : L.hc_ffn, k);
        const float* norm = attn ? L.attn_norm : L.ffn_norm;  // the sub-layer's input norm
        ha.y_norm = k <= kHcFusedNormMaxRows ? norm : nullptr;
        ha.y_norm_eps = m.eps();
        // The FFN's experts read hc_pre's bf16 copy of y (to_bf16's bits) instead of rounding y
        // in a launch of their own.
        ha.y_bf16 = !attn && ha.y_norm ? grow(x.s.hb, k * H) : nullptr;
        hc_pre_deferred(ha, Xt, pt, pt, y, post, comb, stream);
        if (!ha.y_norm) rms_norm(y, norm, k, H, m.eps(), y, stream);
        if (attn && t0 == 0) {
          v41f::v41_attention(m, l, L.attn, y, f);
        } else if (attn) {  // the segment's last k rows, reading their rows of the call's picks
          const std::vector<V41Segment> tail{V41Segment{0, k, segs[0].pos0 + t0, segs[0].seq}};
          v41f::V41Context mt = context_for(tail, k, positions + t0, nullptr);
          mt.pick_row0 = t0;
          v41f::v41_attention(mt, l, L.attn, y, f);
        } else {
          call.hb = ha.y_bf16;
          run_moe(spec, call, L.ffn, false, y, ids + t0, k, f);
        }
        hc_post(f, post, comb, k, hc, H, Xt, stream);
      }
    }
    if (logit_rows > 0) {
      const int64_t r0 = rows - logit_rows;
      float* yh = grow(x.s.y, logit_rows * H);
      hc_collapse(pre + r0 * hc, X + r0 * hc * H, logit_rows, hc, H, yh, stream);
      rms_norm(yh, head.norm, logit_rows, H, m.eps(), yh, stream);
      __nv_bfloat16* yb = grow(x.s.hb, logit_rows * H);
      to_bf16(yh, logit_rows * H, yb, stream);
      m.linear(head.head, yb, logit_rows, c.vocab_size, H, grow(logits, logit_rows * c.vocab_size));
    }
    // Host ids, positions and the Engram rows feed async copies: done before they go away.
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (trace) trace_out->insert(trace_out->end(), trace->gap.begin(), trace->gap.end());
  }

  // Tests: the routing gap of every row (biased selection scores, K-th vs (K+1)-th).
  void trace_routing(int l, int64_t rows) {
    const int E = c.n_routed_experts, K = c.experts_per_token;
    if (K >= E) return;
    std::vector<float> z(rows * E), bias(E);
    DI_CUDA_CHECK(
        cudaMemcpyAsync(z.data(), x.s.router.get(), z.size() * 4, cudaMemcpyDeviceToHost, stream));
    DI_CUDA_CHECK(
        cudaMemcpyAsync(bias.data(), layers[l].ffn.bias, E * 4, cudaMemcpyDeviceToHost, stream));
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    const float temp = static_cast<float>(c.gate_temp);
    for (int64_t t = 0; t < rows; ++t) {
      std::vector<float> sel(E);
      for (int e = 0; e < E; ++e) {
        const float v = z[t * E + e] / temp;
        sel[e] = std::sqrt(v > 20.0f ? v : std::log1p(std::exp(v))) + bias[e];
      }
      std::sort(sel.begin(), sel.end(), std::greater<float>());
      double scale = 0;
      for (float v : sel) scale = std::max(scale, std::fabs(double(v)));
      const double gap = scale > 0 ? (double(sel[K - 1]) - sel[K]) / scale : 0.0;
      trace->gap[t] = std::min(trace->gap[t], gap);
    }
  }

  Status check_ids(const int32_t* ids, int64_t n, int64_t pos0) const {
    for (int64_t t = 0; t < n; ++t) {
      const bool in_vocab = ids[t] >= 0 && ids[t] < c.vocab_size;
      if (!in_vocab)
        return invalid_argument("token id " + std::to_string(ids[t]) + " at position " +
                                std::to_string(pos0 + t) + " is outside the vocabulary (" +
                                std::to_string(c.vocab_size) + ")");
    }
    return ok_status();
  }

  PagePool pool() const {
    return page_pool(state->page(0), state->layout(), state->num_pages(), state->max_token_pages());
  }
  Status check_sequence(const PagedSequence& seq, int64_t n) const {
    return cuda::check_sequence(pool(), seq, n, options.max_tokens);
  }

  int64_t tap_width() const { return int64_t(c.dspark.target_layer_ids.size()) * c.hidden_size; }

  Status forward(const PagedSequence& in, const int32_t* ids, int64_t n, bool all_logits,
                 float* out, int64_t keep_from_pos = 0) {
    if (n <= 0) return invalid_argument("forward: no tokens");
    if (in.num_snapshots > 0)  // takes_row_snapshots() is false: the runner ends chunks there
      return unimplemented("forward: snapshots inside a call (deepseek_v41 on the GPU)");
    RETURN_IF_ERROR(check_ids(ids, n, in.num_tokens));
    RETURN_IF_ERROR(check_sequence(in, n));
    PagedSequence seq = in;
    if (seq.num_tokens == 0) state->reset(seq, stream);
    const int64_t V = c.vocab_size;
    for (int64_t off = 0; off < n; off += options.max_chunk) {
      const int64_t len = std::min(options.max_chunk, n - off);
      const int64_t rows = all_logits ? len : (off + len == n ? 1 : 0);
      if (in.taps) seq.taps = in.taps + off * tap_width();  // the chunk's rows of taps
      run(&seq, {V41Segment{0, len, seq.num_tokens, nullptr}}, ids + off, len, rows,
          all_logits ? 0 : keep_from_pos - seq.num_tokens);
      seq.num_tokens += len;
      if (out && rows > 0)
        DI_CUDA_CHECK(cudaMemcpyAsync(out + (all_logits ? off * V : 0), logits.get(), rows * V * 4,
                                      cudaMemcpyDeviceToHost, stream));
    }
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    return ok_status();
  }

  Status decode(const PagedSequence* seqs, const int32_t* ids, int64_t count, float* out,
                std::vector<int32_t>* greedy) {
    if (count <= 0) return invalid_argument("decode: no sequences");
    if (count > max_rows)
      return invalid_argument(
          "decode: " + std::to_string(count) + " sequences exceed the largest decode batch (" +
          std::to_string(max_rows) + ": CudaModelOptions.max_sequences and max_chunk)");
    std::vector<V41Segment> plan(count);
    for (int64_t b = 0; b < count; ++b) {
      if (seqs[b].num_tokens < 1)
        return invalid_argument("decode: row " + std::to_string(b) + " has no prefilled tokens");
      RETURN_IF_ERROR(check_ids(ids + b, 1, seqs[b].num_tokens));
      RETURN_IF_ERROR(check_sequence(seqs[b], 1));
      plan[b] = V41Segment{b, 1, seqs[b].num_tokens, nullptr};
    }
    run(seqs, plan, ids, count, count);
    const int64_t V = c.vocab_size;
    if (greedy) {
      int32_t* t = grow(token, count);
      argmax_rows(logits.get(), count, V, t, stream);
      greedy->resize(count);
      DI_CUDA_CHECK(cudaMemcpyAsync(greedy->data(), t, count * 4, cudaMemcpyDeviceToHost, stream));
    }
    if (out)
      DI_CUDA_CHECK(
          cudaMemcpyAsync(out, logits.get(), count * V * 4, cudaMemcpyDeviceToHost, stream));
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    return ok_status();
  }

  // Speculative verification: every sequence's ids as its own segment of few forwards, every
  // row's logits back in order.
  Status verify(const PagedSequence* seqs, const int32_t* ids, const int64_t* counts, int64_t count,
                float* const* out, const int64_t* skip = nullptr) {
    RETURN_IF_ERROR(check_verify(
        pool(), seqs, ids, counts, count, options.max_tokens,
        [&](const int32_t* t, int64_t n, int64_t pos0) { return check_ids(t, n, pos0); }, skip));
    const int64_t V = c.vocab_size;
    return for_verify_groups(
        counts, count, max_rows, options.max_chunk,
        [&](int64_t b0, int64_t n, int64_t row0, int64_t rows) -> Status {
          std::vector<V41Segment> plan;
          for (int64_t i = 0, r = 0; i < n; r += counts[b0 + i], ++i)
            plan.push_back(V41Segment{r, counts[b0 + i], seqs[b0 + i].num_tokens, nullptr});
          run(seqs + b0, plan, ids + row0, rows, out ? rows : 0);
          for (int64_t i = 0, r = 0; i < n; r += counts[b0 + i], ++i)
            if (out && out[b0 + i])
              copy_logits_out(out[b0 + i], logits.get() + r * V, counts[b0 + i],
                              skip ? skip[b0 + i] : 0, V, stream);
          DI_CUDA_CHECK(cudaStreamSynchronize(stream));
          return ok_status();
        });
  }

  int32_t last_argmax() {
    int32_t* t = grow(token, 1);
    argmax_rows(logits.get(), 1, c.vocab_size, t, stream);
    int32_t v = 0;
    DI_CUDA_CHECK(cudaMemcpyAsync(&v, t, 4, cudaMemcpyDeviceToHost, stream));
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }

  v41::Config c;
  CudaModelOptions options;
  DeviceWeights w;
  std::unique_ptr<Checkpoint> ckpt;  // kept mapped: the Engram tables are read in place
  std::optional<v41::EngramTables> engram;
  std::vector<v41f::V41Layer> layers;
  v41f::V41Head head;
  Gemm gemm;
  Linear linear;
  MoeRunner moe;
  v41f::V41Scratch x;
  std::unique_ptr<v41f::V41PagedState> state;
  PinnedBuffer<char> page_staging;  // read_pages / write_pages of host bytes
  int64_t max_rows = 1;
  int64_t most_entries = 0;  // the most compressed entries a sequence of max_tokens has
  int max_blocks = 1;
  DeviceBuffer<double> main_inv_freq, compress_inv_freq;
  DeviceBuffer<float> xbuf, logits;
  DeviceBuffer<int32_t> token;
  cudaStream_t stream = nullptr;
  v41f::V41Trace* trace = nullptr;
  std::unique_ptr<v41f::V41Trace> own_trace;
  std::vector<double>* trace_out = nullptr;
  std::unique_ptr<v41f::CudaDspark> dspark;  // with drafting and draft tensors
  std::string no_dspark;                     // why there is none (mtp_draft's answer)
};

int64_t CudaV41Model::max_supported_tokens(const v41::Config& c) {
  return indexer_topk_capacity(std::max(1, c.index_topk)) * std::max(1, min_compress_ratio(c));
}

StatusOr<std::unique_ptr<CudaV41Model>> CudaV41Model::load(const std::string& dir,
                                                           const CudaModelOptions& options) {
  if (options.model.numerics != v4::Numerics::kPlain)
    return unimplemented("CudaV41Model: deepseek_v41 has only plain numerics (" + dir +
                         "); use numerics 'plain'");
  if (options.max_chunk < 1 || options.max_tokens < 1 || options.max_sequences < 1 ||
      options.page_tokens < 1)
    return invalid_argument(
        "CudaV41Model: max_tokens, max_chunk, max_sequences and page_tokens must be positive");
  if (options.memory_fraction < 0 || options.memory_fraction > 1)
    return invalid_argument("CudaV41Model: memory_fraction " +
                            std::to_string(options.memory_fraction) + " is outside [0, 1]");
  std::string config_path;
  ASSIGN_OR_RETURN(std::string config_text, model_config::read_config_file(dir, &config_path));
  ASSIGN_OR_RETURN(ModelFamily family, model_family_from_config_json(config_text, config_path));
  if (family != ModelFamily::kDeepseekV41)
    return invalid_argument(std::string("CudaV41Model: ") + dir + " is model_type " +
                            model_family_name(family) + ", not deepseek_v41");
  ASSIGN_OR_RETURN(v41::Config config, v41::parse_config_json(config_text, config_path));
  if (options.max_tokens > max_supported_tokens(config))
    return invalid_argument("max_tokens " + std::to_string(options.max_tokens) +
                            " exceeds what the GPU indexer serves for " + dir + " (" +
                            std::to_string(max_supported_tokens(config)) +
                            " positions: the indexer's top-k capacity times the smallest compress "
                            "ratio)");
  if (config.num_kv_heads != 1)
    return unimplemented(dir + "/config.json: text_config.num_key_value_heads must be 1");
  for (const v41::RopeConfig* r : {&config.rope_main, &config.rope_compress})
    if (r->attention_factor != 1.0)
      return unimplemented(dir + "/config.json: YaRN attention_factor " +
                           std::to_string(r->attention_factor) + " is not supported (V4.1: 1.0)");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return failed_precondition("CudaV41Model: no CUDA device");
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::open(dir));
  const bool drafter =
      options.drafting && config.num_nextn_layers > 0 && v41::has_draft_weights(*ckpt);
  ASSIGN_OR_RETURN(DeviceWeights weights,
                   DeviceWeights::load(config, *ckpt, options.progress, drafter));
  std::optional<v41::EngramTables> engram;
  if (!config.engram.layer_ids.empty()) {
    ASSIGN_OR_RETURN(v41::EngramTables t, v41::load_engram_tables(config, dir, *ckpt));
    engram = std::move(t);
  } else {
    ckpt.reset();
  }
  auto impl = std::make_unique<Impl>(std::move(config), std::move(weights), std::move(ckpt),
                                     std::move(engram), options);
  RETURN_IF_ERROR(impl->allocate());
  if (drafter)
    impl->dspark = std::make_unique<v41f::CudaDspark>(
        impl->c, v41f::resolve_dspark(impl->c, impl->w), impl->head, impl->gemm, impl->linear,
        impl->moe, impl->main_inv_freq.get(), impl->stream);
  else if (!options.drafting)
    impl->no_dspark = "the GPU forward was loaded without drafting (CudaModelOptions::drafting)";
  else if (impl->c.num_nextn_layers == 0)
    impl->no_dspark = dir + "/config.json counts no draft layer (num_nextn_predict_layers)";
  else
    impl->no_dspark = v41::no_draft_tensors_reason(impl->c);
  return std::unique_ptr<CudaV41Model>(new CudaV41Model(std::move(impl)));
}

CudaV41Model::CudaV41Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaV41Model::~CudaV41Model() = default;

const v41::Config& CudaV41Model::config() const { return impl_->c; }
v41f::CudaDspark* CudaV41Model::dspark() { return impl_->dspark.get(); }
int64_t CudaV41Model::stored_weight_bytes() const { return impl_->w.stored_bytes(); }
int CudaV41Model::page_tokens() const { return impl_->state->layout().page_tokens(); }
int64_t CudaV41Model::page_bytes() const { return impl_->state->page_bytes(); }
int64_t CudaV41Model::constant_pages() const { return impl_->state->layout().constant_pages(); }
int64_t CudaV41Model::num_pages() const { return impl_->state->num_pages(); }
int64_t CudaV41Model::max_decode_rows() const { return impl_->max_rows; }
int64_t CudaV41Model::weight_bytes() const { return impl_->w.bytes(); }
int64_t CudaV41Model::max_token_pages() const { return impl_->state->max_token_pages(); }

Status CudaV41Model::forward_paged(const PagedSequence& seq, const int32_t* ids, int64_t n,
                                   bool all_logits, float* logits, int32_t* argmax,
                                   int64_t keep_from_pos) {
  if (argmax && all_logits) return invalid_argument("forward_paged: argmax with all_logits");
  RETURN_IF_ERROR(impl_->forward(seq, ids, n, all_logits, logits, keep_from_pos));
  if (argmax) *argmax = impl_->last_argmax();
  return ok_status();
}

Status CudaV41Model::decode_paged(const PagedSequence* seqs, const int32_t* ids, int64_t count,
                                  float* logits, std::vector<int32_t>* greedy) {
  return impl_->decode(seqs, ids, count, logits, greedy);
}

Status CudaV41Model::verify_paged(const PagedSequence* seqs, const int32_t* ids,
                                  const int64_t* counts, int64_t count, float* const* logits,
                                  const int64_t* skip) {
  return impl_->verify(seqs, ids, counts, count, logits, skip);
}

Status CudaV41Model::mtp_draft(const PagedSequence*, const int32_t*, const float* const*, int64_t,
                               int64_t, int32_t*) {
  // The runner drafts through dspark() when there is one; this answers why there is none.
  return unimplemented(impl_->dspark ? "deepseek_v41 drafts with DSpark (CudaV41Model::dspark)"
                                     : impl_->no_dspark);
}

Status CudaV41Model::copy_pages(const int32_t* from, const int32_t* to, int64_t n) {
  return cuda::copy_pages(impl_->pool(), from, to, n, impl_->stream);
}
Status CudaV41Model::read_pages(const int32_t* pages, int64_t n, void* dst) {
  return cuda::read_pages(impl_->pool(), pages, n, dst, &impl_->page_staging);
}
Status CudaV41Model::write_pages(const int32_t* pages, int64_t n, const void* src) {
  return cuda::write_pages(impl_->pool(), pages, n, src, &impl_->page_staging);
}

void CudaV41Model::set_trace(std::vector<double>* gaps) {
  if (!gaps) {
    impl_->trace = nullptr;
    impl_->own_trace.reset();
    return;
  }
  impl_->own_trace = std::make_unique<v41f::V41Trace>();
  impl_->trace = impl_->own_trace.get();
  impl_->trace_out = gaps;
}

}  // namespace deepinfer::cuda
