#include "deepinfer/runtime/cuda/forward/cuda_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/sampling/argmax.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/config_field_reader.h"
#include "deepinfer/model/deepseek_v4/rope.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/model/model_family.h"
#include "deepinfer/runtime/cuda/forward/decode_graphs.h"
#include "deepinfer/runtime/cuda/forward/forward_context.h"
#include "deepinfer/runtime/cuda/forward/forward_kernels.h"
#include "deepinfer/runtime/cuda/forward/page_pool.h"
#include "deepinfer/runtime/cuda/forward/paged_state.h"
#include "deepinfer/runtime/cuda/forward/pinned_buffer.h"
#include "deepinfer/runtime/cuda/forward/pool_sizing.h"

namespace deepinfer::cuda {
struct CudaModel::Impl {
  Impl(v4::Config config, DeviceWeights weights, const CudaModelOptions& o)
      : c(std::move(config)),
        options(o),
        w(std::move(weights)),
        layers(resolve_layers(c, w)),
        head(resolve_head(w)),
        linear(gemm),
        moe(linear),
        main_inv_freq(v4::RopeTable(c.rope_theta, c.rope_dim, nullptr).inv_freq()),
        compress_inv_freq(v4::RopeTable(c.compress_rope_theta, c.rope_dim, &c.yarn).inv_freq()) {
    DI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    gemm.set_batch_invariant(o.batch_invariant);
    linear.reserve(w.largest_quantized());  // before any graph capture
    if (o.drafting && c.num_mtp_layers > 0) mtp.emplace(resolve_mtp(c, w));
  }

  // The decode step's fixed buffers, then the page pool and the slots (load's last step).
  Status allocate() {
    const CudaModelOptions& o = options;
    max_bucket = bucket(std::min<int64_t>(o.max_sequences, o.max_chunk));
    max_selected = decode_max_selected(c, o.max_tokens);
    decode_in = DeviceBuffer<int64_t>(2 * max_bucket);
    RETURN_IF_ERROR(decode_host.reserve(size_t(2 * max_bucket)).status());
    // Decode batches and prefill chunks both run the grouped experts.
    moe.reserve_grouped(std::max(max_bucket, o.max_chunk), c.experts_per_token, c.hidden_size,
                        c.moe_intermediate_size,
                        int64_t(c.moe_intermediate_size) * c.n_shared_experts, c.n_routed_experts);
    state = std::make_unique<PagedState>(c, o.page_tokens, o.max_tokens, max_bucket);
    if (o.memory_fraction > 0) return fill_memory(o.memory_fraction);
    state->allocate(pages_per_slot() * o.max_sequences);
    set_slots(o.max_sequences);
    return ok_status();
  }

  // A slot holds a sequence of max_tokens: its constant pages and a full block table.
  int64_t pages_per_slot() const {
    return state->layout().constant_pages() + state->max_token_pages();
  }
  // Slot s's k-th page is page k * n + s: interleaved, so the slots' own sequences already run
  // through real page indirection.
  void set_slots(int64_t n) {
    const int64_t per = pages_per_slot();
    slot_pages.assign(n, {});
    slot_tokens.assign(n, 0);
    for (int64_t sl = 0; sl < n; ++sl)
      for (int64_t k = 0; k < per; ++k) slot_pages[sl].push_back(static_cast<int32_t>(k * n + sl));
  }
  PagedSequence slot_sequence(int slot) const {
    PagedSequence q;
    q.constant_pages = slot_pages[slot].data();
    q.token_pages = slot_pages[slot].data() + state->layout().constant_pages();
    q.num_token_pages = state->max_token_pages();
    q.num_tokens = slot_tokens[slot];
    return q;
  }

  // Small decode batches split their sink attention over chunks of keys: partial sums for up to
  // kSinkSplitMaxQueries rows, at most 64 MB (long max_tokens make HCA's lists long; V4's 4k
  // context needs 2.7 MB a row); a batch they don't fit takes the fp32 kernel (sink_split_fits
  // decides per launch).
  int64_t sink_partials_for(int64_t rows) const {
    const int64_t split =
        sink_split_floats(std::min<int64_t>(rows, kSinkSplitMaxQueries), c.num_heads, c.head_dim,
                          c.sliding_window + max_selected);
    return std::min<int64_t>(split, (int64_t{64} << 20) / sizeof(float));
  }

  // Scratch that a step grows with its positions or its batch, at its largest: the indexer's
  // scores and the attended entries of a max_chunk prefill chunk ending at max_tokens, and every
  // buffer of a decode step of the largest bucket.
  void reserve_position_scratch() {
    const int64_t rows = std::min(options.max_chunk, options.max_tokens);
    const int64_t entries = std::max<int64_t>(1, options.max_tokens / 4);
    bool csa = false, compressed = false;
    for (int l = 0; l < c.num_layers; ++l) {
      csa = csa || c.compress_ratio(l) == 4;
      compressed = compressed || c.compress_ratio(l) > 0;
    }
    if (csa) grow(s.scores, rows * entries);
    if (compressed) {
      grow(s.selected, rows * std::max(1, max_selected));
      grow(s.num_selected, rows);
    }
    const int64_t B = max_bucket;
    grow(decode_scores, B * entries);
    grow(decode_selected, B * max_selected);
    grow(decode_num_selected, B);
    grow(decode_sink_partials, sink_partials_for(B));
    grow(logits, B * c.vocab_size);
    grow(token, B);
  }

  // As many pages as keep the device's used memory within `fraction` of its total (see
  // CudaModelOptions::memory_fraction), measured with cudaMemGetInfo after a profile step (as
  // vLLM's profile run) has grown the scratch: one slot prefills a max_chunk chunk of token 0.
  // Its hash layers then send every row to the same experts, the largest expert groups a chunk
  // can make.
  Status fill_memory(double fraction) {
    const int64_t per = pages_per_slot();
    state->allocate(per);
    set_slots(1);
    reserve_position_scratch();
    const int64_t rows = std::min(options.max_chunk, options.max_tokens);
    const std::vector<int32_t> ids(rows, 0);
    const PagedSequence q = slot_sequence(0);
    state->reset(q, stream);
    chunk(q, ids.data(), rows, 1);
    PoolSizing ps;
    ps.fraction = fraction;
    ps.pool_bytes = options.pool_bytes;
    ps.page_bytes = state->page_bytes();
    ps.slot_bytes = state->pool_bytes(per);
    ps.weight_bytes = w.bytes();
    ps.max_tokens = options.max_tokens;
    ASSIGN_OR_RETURN(const int64_t pages, pool_pages(ps));
    state->allocate(pages);
    set_slots(std::min<int64_t>(options.max_sequences, pages / per));
    return ok_status();
  }

  // Decode batches run at a power of two rows, at most max_chunk.
  int64_t bucket(int64_t count) const {
    int64_t b = 1;
    while (b < count) b <<= 1;
    return std::min(b, options.max_chunk);
  }
  ~Impl() { cudaStreamDestroy(stream); }

  ForwardContext context() {
    return ForwardContext{c,
                          gemm,
                          linear,
                          moe,
                          s,
                          main_inv_freq.get(),
                          compress_inv_freq.get(),
                          options.model.clamp_shared_expert.value_or(true),
                          stream,
                          trace,
                          0,
                          nullptr,
                          timer.get()};
  }

  HcArgs hc_args(const HcWeights& hw, int64_t tokens) { return hc_site_args(c, hw, tokens, s); }

  // One block (spec §6.2-6.9): per sub-layer hc_pre, its norm, the sub-layer, hc_post. The FFN
  // sub-layer runs for rows [ffn_from, n) only (YOCO: nothing reads the others' streams).
  void block(const ForwardContext& ctx, int l, float* X, const int32_t* ids, int64_t n,
             const int64_t* positions, const std::vector<RowSegment>& segs, int64_t ffn_from = 0) {
    block_of(ctx, l, layers[l], c.compress_ratio(l), c.is_hash_layer(l), X, ids, n, positions, segs,
             ffn_from);
  }
  // The same for any block's weights (the MTP layer's is layer num_layers of the state).
  void block_of(const ForwardContext& ctx, int l, const LayerWeights& L, int ratio, bool hash,
                float* X, const int32_t* ids, int64_t n, const int64_t* positions,
                const std::vector<RowSegment>& segs, int64_t ffn_from = 0) {
    ForwardContext m = ctx;
    m.layer = l;
    const int64_t H = c.hidden_size;
    const int hc = c.hc_mult;
    float* y = grow(s.y, n * H);
    float* post = grow(s.post, n * hc);
    float* comb = grow(s.comb, n * hc * hc);
    float* f = grow(s.f, n * H);
    for (const bool attn : {true, false}) {
      const int64_t t0 = attn ? 0 : ffn_from, k = n - t0;  // rows t0.. of this sub-layer
      if (k <= 0) continue;
      float* Xt = X + t0 * hc * H;
      HcArgs ha = hc_args(attn ? L.hc_attn : L.hc_ffn, k);
      const float* norm = attn ? L.attn_norm : L.ffn_norm;  // the sub-layer's input norm
      ha.y_norm = k <= kHcFusedNormMaxRows ? norm : nullptr;
      ha.y_norm_eps = m.eps();
      // The fused norm also writes y's bf16 copy, which the sub-layer's projections read.
      ha.y_bf16 = ha.y_norm ? grow(s.hb, k * H) : nullptr;
      hc_pre(ha, Xt, y, post, comb, stream);
      if (!ha.y_norm) rms_norm(y, norm, k, H, m.eps(), y, stream);
      m.mark("mhc + norms");
      if (attn)
        attention_layer(m, L.attn, ratio, y, ha.y_bf16, n, positions, segs, f);
      else
        moe_layer(m, L.ffn, hash, y, ha.y_bf16, ids + t0, k, f);
      hc_post(f, post, comb, k, hc, H, Xt, stream);
      m.mark("mhc + norms");
    }
  }

  // Every layer over n rows whose token ids are on the device, then the head over the trailing
  // `rows` rows into `logits`. positions: device, one per row. Rows before full_from (at most
  // n - rows) skip the last layer's MoE (YOCO compact). Launches only (graph-safe when m.batch
  // is set).
  void forward_rows(const ForwardContext& m, const int32_t* ids, int64_t n,
                    const int64_t* positions, const std::vector<RowSegment>& segs, int64_t rows,
                    int64_t full_from = 0) {
    const int64_t H = c.hidden_size;
    const int hc = c.hc_mult;
    float* X = grow(x, n * hc * H);
    embed_rows(head.embed, ids, n, hc, H, X, stream);
    m.mark("embedding");
    full_from = std::clamp<int64_t>(full_from, 0, n - rows);
    for (int l = 0; l < c.num_layers; ++l)
      block(m, l, X, ids, n, positions, segs, l + 1 == c.num_layers ? full_from : 0);
    if (rows > 0) {
      head_rows(m, head.hc, head.norm, X + (n - rows) * hc * H, rows);
      m.mark("head");
    }
  }

  // The head over `rows` rows of final streams into `logits`: the hc_head mix, the norm (the
  // main model's, or the MTP layer's own), the shared LM head.
  void head_rows(const ForwardContext& m, const HcWeights& mix, const float* norm, const float* X,
                 int64_t rows) {
    const int64_t H = c.hidden_size;
    float* y = grow(s.y, rows * H);
    hc_head(hc_args(mix, rows), X, y, stream);
    rms_norm(y, norm, rows, H, m.eps(), y, stream);
    __nv_bfloat16* yb = grow(s.hb, rows * H);
    to_bf16(y, rows * H, yb, stream);
    m.linear(head.head, yb, rows, c.vocab_size, H, grow(logits, rows * c.vocab_size));
  }

  // Runs n rows (host ids) of the segments' sequences and advances them.
  void run_rows(const int32_t* host_ids, int64_t n, const int64_t* positions,
                const std::vector<RowSegment>& segs, int64_t rows, int64_t full_from = 0) {
    int32_t* ids = grow(s.token_ids, n);
    DI_CUDA_CHECK(cudaMemcpyAsync(ids, host_ids, n * 4, cudaMemcpyHostToDevice, stream));
    ForwardContext m = context();
    if (timer) timer->begin(stream);
    forward_rows(m, ids, n, positions, segs, rows, full_from);
    // The host ids (and positions) feed async copies: done before the caller may reuse them.
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (timer) timer->collect();
  }

  // n <= max_chunk tokens at the end of one sequence; logits for `rows` trailing positions.
  // Snapshots of seq ending in the chunk get copies of its constant state first (the state at the
  // chunk's start), which the chunk's state ops then advance to their end_pos.
  void chunk(const PagedSequence& seq, const int32_t* host_ids, int64_t n, int64_t rows,
             int64_t full_from = 0) {
    int64_t* positions = grow(s.positions, n);
    fill_positions(positions, n, seq.num_tokens, 1, stream);
    const std::vector<SegmentSnapshot>& snaps = state->snapshot_copies(seq, n, stream);
    const SegmentState& st = state->resolve(seq, stream);
    run_rows(host_ids, n, positions, {RowSegment{0, n, seq.num_tokens, &st, &snaps}}, rows,
             full_from);
  }

  Status check_ids(const int32_t* ids, int64_t n, int64_t pos0) const {
    for (int64_t t = 0; t < n; ++t)
      if (ids[t] < 0 || ids[t] >= c.vocab_size)
        return invalid_argument("token id " + std::to_string(ids[t]) + " at position " +
                                std::to_string(pos0 + t) + " is outside the vocabulary (" +
                                std::to_string(c.vocab_size) + ")");
    return ok_status();
  }

  Status check_slot(int slot) const {
    if (slot < 0 || slot >= static_cast<int>(slot_pages.size()))
      return out_of_range("sequence slot " + std::to_string(slot) + " is outside the " +
                          std::to_string(slot_pages.size()) +
                          " slots (CudaModelOptions.max_sequences)");
    return ok_status();
  }

  PagePool pool() const {
    return page_pool(state->page(0), state->layout(), state->num_pages(), state->max_token_pages());
  }
  Status check_sequence(const PagedSequence& seq, int64_t n) const {
    return cuda::check_sequence(pool(), seq, n, options.max_tokens);
  }

  // out: host memory for (all_logits ? n : 1) x vocab floats, or null. Positions before
  // keep_from_pos skip the last layer's MoE (YOCO compact; ignored with all_logits).
  Status forward(const PagedSequence& in, const int32_t* ids, int64_t n, bool all_logits,
                 float* out, int64_t keep_from_pos = 0) {
    if (n <= 0) return invalid_argument("forward: no tokens");
    RETURN_IF_ERROR(check_ids(ids, n, in.num_tokens));
    RETURN_IF_ERROR(check_sequence(in, n));
    PagedSequence seq = in;
    if (seq.num_tokens == 0) state->reset(seq, stream);
    const int64_t V = c.vocab_size;
    for (int64_t off = 0; off < n; off += options.max_chunk) {
      const int64_t len = std::min(options.max_chunk, n - off);
      const bool last = off + len == n;
      const int64_t rows = all_logits ? len : (last ? 1 : 0);
      chunk(seq, ids + off, len, rows, all_logits ? 0 : keep_from_pos - seq.num_tokens);
      seq.num_tokens += len;
      // On the forward's own stream: it is non-blocking, so a legacy-stream copy would not
      // wait for the chunk.
      if (out && rows > 0)
        DI_CUDA_CHECK(cudaMemcpyAsync(out + (all_logits ? off * V : 0), logits.get(), rows * V * 4,
                                      cudaMemcpyDeviceToHost, stream));
      if (last) keep_streams(in.final_streams, len - 1, 1);
    }
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    return ok_status();
  }

  // Rows [row, row + n) of the latest forward's final streams to dst (device), if set.
  void keep_streams(float* dst, int64_t row, int64_t n) {
    if (dst == nullptr) return;
    const int64_t per = int64_t(c.hc_mult) * c.hidden_size;
    DI_CUDA_CHECK(
        cudaMemcpyAsync(dst, x.get() + row * per, n * per * 4, cudaMemcpyDeviceToDevice, stream));
  }

  // out: host memory for count x vocab floats, or null. The sequences' constant pages must be
  // distinct (each row writes its own).
  Status decode(const PagedSequence* seqs, const int32_t* ids, int64_t count, float* out,
                std::vector<int32_t>* greedy) {
    if (count <= 0) return invalid_argument("decode: no sequences");
    if (count > max_bucket)
      return invalid_argument(
          "decode: " + std::to_string(count) + " sequences exceed the largest decode batch (" +
          std::to_string(max_bucket) + ": CudaModelOptions.max_sequences and max_chunk)");
    for (int64_t b = 0; b < count; ++b) {
      if (seqs[b].num_tokens < 1)
        return invalid_argument("decode: row " + std::to_string(b) + " has no prefilled tokens");
      RETURN_IF_ERROR(check_ids(ids + b, 1, seqs[b].num_tokens));
      RETURN_IF_ERROR(check_sequence(seqs[b], 1));
    }
    // Inputs [positions (int64) | ids (int32) | rows (int32)] for the bucket's rows; padding
    // rows take token 0 at position 0 of no sequence (-1).
    const int64_t B = bucket(count);
    int64_t* hpos = decode_host.get();
    int32_t* hids = reinterpret_cast<int32_t*>(hpos + max_bucket);
    int32_t* hslot = hids + max_bucket;
    for (int64_t b = 0; b < B; ++b) {
      const bool real = b < count;
      hpos[b] = real ? seqs[b].num_tokens : 0;
      hids[b] = real ? ids[b] : 0;
      hslot[b] = real ? static_cast<int32_t>(b) : -1;
    }
    DI_CUDA_CHECK(
        cudaMemcpyAsync(decode_in.get(), hpos, 2 * max_bucket * 8, cudaMemcpyHostToDevice, stream));
    state->stage_rows(seqs, count, stream);
    int64_t* dpos = decode_in.get();
    int32_t* dids = reinterpret_cast<int32_t*>(dpos + max_bucket);
    DecodeBatch batch;
    batch.rows = DecodeRows{dids + max_bucket, dpos, B};
    batch.real_rows = count;
    batch.state = state.get();
    batch.max_tokens = options.max_tokens;
    batch.max_selected = max_selected;
    const int64_t V = c.vocab_size;
    auto step = [&] {
      batch.scores = grow(decode_scores, B * std::max<int64_t>(1, options.max_tokens / 4));
      batch.selected = grow(decode_selected, B * batch.max_selected);
      batch.num_selected = grow(decode_num_selected, B);
      batch.sink_partials = grow(decode_sink_partials, sink_partials_for(B));
      batch.sink_partials_floats = static_cast<int64_t>(decode_sink_partials.size());
      ForwardContext m = context();
      m.batch = &batch;
      forward_rows(m, dids, B, dpos, {}, B);
      argmax_rows(logits.get(), B, V, grow(token, B), stream);
      m.mark("sampling");
    };
    if (options.cuda_graphs && !trace && !timer) {
      graphs.run(B, stream, step);
    } else {
      if (timer) timer->begin(stream);
      step();
      ++direct_steps;
    }
    if (greedy) {
      greedy->resize(count);
      DI_CUDA_CHECK(
          cudaMemcpyAsync(greedy->data(), token.get(), count * 4, cudaMemcpyDeviceToHost, stream));
    }
    if (out)
      DI_CUDA_CHECK(
          cudaMemcpyAsync(out, logits.get(), count * V * 4, cudaMemcpyDeviceToHost, stream));
    for (int64_t b = 0; b < count; ++b) keep_streams(seqs[b].final_streams, b, 1);
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (timer) timer->collect();
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
        counts, count, state->max_rows(), options.max_chunk,
        [&](int64_t b0, int64_t n, int64_t row0, int64_t rows) -> Status {
          const std::vector<SegmentState>& st = state->resolve_rows(seqs + b0, n, stream);
          int64_t* positions = grow(s.positions, rows);
          std::vector<RowSegment> segs;
          for (int64_t i = 0, r = 0; i < n; r += counts[b0 + i], ++i) {
            const PagedSequence& q = seqs[b0 + i];
            fill_positions(positions + r, counts[b0 + i], q.num_tokens, 1, stream);
            segs.push_back(RowSegment{r, counts[b0 + i], q.num_tokens, &st[size_t(i)]});
          }
          run_rows(ids + row0, rows, positions, segs, out ? rows : 0);
          for (int64_t i = 0, r = 0; i < n; r += counts[b0 + i], ++i) {
            if (out && out[b0 + i])
              copy_logits_out(out[b0 + i], logits.get() + r * V, counts[b0 + i],
                              skip ? skip[b0 + i] : 0, V, stream);
            keep_streams(seqs[b0 + i].final_streams, r, counts[b0 + i]);
          }
          DI_CUDA_CHECK(cudaStreamSynchronize(stream));
          return ok_status();
        });
  }

  // MTP drafting (CudaModel::mtp_draft): k chained steps over every sequence at once, each a
  // one-row segment of the MTP block at its own position.
  Status mtp_draft(const PagedSequence* seqs, const int32_t* tokens, const float* const* hidden,
                   int64_t count, int64_t k, int32_t* drafts) {
    if (!mtp)
      return unimplemented(options.drafting ? "this checkpoint has no MTP layer (mtp.*)"
                                            : "the GPU forward was loaded without drafting "
                                              "(CudaModelOptions::drafting)");
    if (count <= 0 || k <= 0) return ok_status();
    if (count > state->max_rows())
      return invalid_argument("mtp_draft: " + std::to_string(count) +
                              " sequences exceed the largest decode batch (" +
                              std::to_string(state->max_rows()) + ")");
    for (int64_t b = 0; b < count; ++b) {
      if (seqs[b].num_tokens < 1 || hidden[b] == nullptr)
        return invalid_argument("mtp_draft: sequence " + std::to_string(b) +
                                " has no computed position to draft from");
      if (seqs[b].num_tokens + k > options.max_tokens)
        return out_of_range("mtp_draft: sequence " + std::to_string(b) + " at " +
                            std::to_string(seqs[b].num_tokens) + " tokens cannot draft " +
                            std::to_string(k) + " past max_tokens " +
                            std::to_string(options.max_tokens));
      RETURN_IF_ERROR(check_ids(tokens + b, 1, seqs[b].num_tokens));
      for (int64_t i = 0; i < state->layout().constant_pages(); ++i)
        RETURN_IF_ERROR(check_page(pool(), seqs[b].constant_pages[i], "mtp_draft constant"));
    }
    const int64_t H = c.hidden_size, B = count;
    const int hc = c.hc_mult;
    const MtpWeights& mw = *mtp;
    float* hid = grow(mtp_hidden, B * hc * H);
    for (int64_t b = 0; b < B; ++b)
      DI_CUDA_CHECK(cudaMemcpyAsync(hid + b * hc * H, hidden[b], hc * H * 4,
                                    cudaMemcpyDeviceToDevice, stream));
    int32_t* tok = grow(mtp_tokens, B);
    DI_CUDA_CHECK(cudaMemcpyAsync(tok, tokens, B * 4, cudaMemcpyHostToDevice, stream));
    RETURN_IF_ERROR(mtp_out.reserve(size_t(B * k)).status());
    std::vector<int64_t> pos(B);
    int64_t* positions = grow(mtp_positions, B);
    const std::vector<SegmentState>& st = state->resolve_rows(seqs, B, stream);
    ForwardContext m = context();
    m.trace = nullptr;  // the trace counts main layers only
    for (int64_t j = 0; j < k; ++j) {
      std::vector<RowSegment> segs;
      for (int64_t b = 0; b < B; ++b) {
        pos[b] = seqs[b].num_tokens + j;
        segs.push_back(RowSegment{b, 1, pos[b], &st[size_t(b)]});
      }
      DI_CUDA_CHECK(cudaMemcpyAsync(positions, pos.data(), B * 8, cudaMemcpyHostToDevice, stream));
      // The block's input (spec §7): h_proj(hnorm(stream)) of each of the last position's
      // streams, plus e_proj(enorm(embedding of the token)).
      float* e = grow(mtp_e, B * H);
      embed_rows(head.embed, tok, B, 1, H, e, stream);
      rms_norm(e, mw.enorm, B, H, m.eps(), e, stream);
      // Own buffers where a step needs more than the forward's scratch holds (B x hc rows).
      __nv_bfloat16* eb = grow(mtp_b, B * hc * H);
      to_bf16(e, B * H, eb, stream);
      float* E = grow(s.f, B * H);
      m.linear(mw.e_proj, eb, B, H, H, E);
      float* hn = grow(mtp_norm, B * hc * H);
      rms_norm(hid, mw.hnorm, B * hc, H, m.eps(), hn, stream);
      to_bf16(hn, B * hc * H, eb, stream);
      float* X = grow(x, B * hc * H);
      m.linear(mw.h_proj, eb, B * hc, H, H, X);
      add_to_streams(X, E, B, hc, H, stream);
      block_of(m, c.num_layers, mw.block, 0, false, X, tok, B, positions, segs);
      // Its own head mix and norm, then the shared LM head; the greedy draft feeds the next step.
      head_rows(m, mw.hc_head, mw.norm, X, B);
      argmax_rows(logits.get(), B, c.vocab_size, tok, stream);
      DI_CUDA_CHECK(
          cudaMemcpyAsync(mtp_out.get() + j * B, tok, B * 4, cudaMemcpyDeviceToHost, stream));
      DI_CUDA_CHECK(cudaMemcpyAsync(hid, X, B * hc * H * 4, cudaMemcpyDeviceToDevice, stream));
    }
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < k; ++j) drafts[b * k + j] = mtp_out.get()[j * B + b];
    return ok_status();
  }

  // The argmax of the latest forward's last logits row (the CUDA argmax), on the host.
  int32_t last_argmax() {
    int32_t* t = grow(token, 1);
    argmax_rows(logits.get(), 1, c.vocab_size, t, stream);
    int32_t v = 0;
    DI_CUDA_CHECK(cudaMemcpyAsync(&v, t, 4, cudaMemcpyDeviceToHost, stream));
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }

  void poison() {
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    auto p = [](auto& b) {
      if (b.size()) b.poison();
    };
    p(s.y), p(s.post), p(s.comb), p(s.f), p(s.hb), p(s.qrb), p(s.ob), p(s.zb);
    p(s.qr), p(s.q), p(s.kv), p(s.o), p(s.zg), p(s.z), p(s.ckv), p(s.cgate), p(s.ikv), p(s.igate);
    p(s.win_kv), p(s.new_entries);
    p(s.win_gate), p(s.qi), p(s.wi), p(s.scores), p(s.selected), p(s.num_selected);
    p(s.positions), p(s.entry_positions), p(s.router), p(s.route_w), p(s.route_ids);
    p(s.token_ids), p(x), p(logits), p(token), p(decode_scores), p(decode_selected);
    p(decode_num_selected), p(decode_sink_partials);
    DI_CUDA_CHECK(cudaDeviceSynchronize());
  }

  v4::Config c;
  CudaModelOptions options;
  DeviceWeights w;
  std::vector<LayerWeights> layers;  // pointers into w, resolved once at load
  std::optional<MtpWeights> mtp;     // with drafting, when the checkpoint has the layer
  DeviceBuffer<float> mtp_hidden, mtp_e, mtp_norm;
  DeviceBuffer<__nv_bfloat16> mtp_b;
  DeviceBuffer<int32_t> mtp_tokens;
  DeviceBuffer<int64_t> mtp_positions;
  PinnedBuffer<int32_t> mtp_out;  // the drafts, step after step
  HeadWeights head;
  Gemm gemm;
  Linear linear;  // projections in the weights' stored formats, over gemm
  MoeRunner moe;
  ForwardScratch s;
  std::unique_ptr<PagedState> state;             // the page pool and the decode tables
  PinnedBuffer<char> page_staging;               // read_pages / write_pages of host bytes
  std::vector<std::vector<int32_t>> slot_pages;  // per slot: constant pages, then token pages
  std::vector<int64_t> slot_tokens;              // per slot: positions in its state
  int64_t max_bucket = 1;                        // the largest decode batch's rows
  int max_selected = 0;                          // decode_max_selected, fixed at load
  DeviceBuffer<int64_t> decode_in;               // a decode step's positions, ids and slots
  PinnedBuffer<int64_t> decode_host;             // their staging (page-locked: one async upload)
  DeviceBuffer<float> decode_scores;
  DeviceBuffer<float> decode_sink_partials;  // the split sink attention's (small batches)
  DeviceBuffer<int32_t> decode_selected, decode_num_selected;
  DecodeGraphs graphs;
  int64_t direct_steps = 0;           // decode steps run without the graph cache
  std::unique_ptr<PhaseTimer> timer;  // set: phases timed, decode eager
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
  if (options.max_sequences < 1)
    return invalid_argument("CudaModel: max_sequences must be positive");
  if (options.page_tokens < 1) return invalid_argument("CudaModel: page_tokens must be positive");
  // config.json is read once (it may be a pipe); the family decides before anything loads.
  std::string config_path;
  ASSIGN_OR_RETURN(std::string config_text, model_config::read_config_file(dir, &config_path));
  ASSIGN_OR_RETURN(ModelFamily family, model_family_from_config_json(config_text, config_path));
  if (family != ModelFamily::kDeepseekV4)
    return unimplemented(std::string("model_type ") + model_family_name(family) + " (" + dir +
                         "): the GPU forward serves deepseek_v4 only so far; use --device cpu");
  ASSIGN_OR_RETURN(v4::Config config, v4::parse_config_json(config_text, config_path));
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::open(dir));
  v4::drop_absent_mtp(*ckpt, &config);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return failed_precondition("CudaModel: no CUDA device");
  if (options.memory_fraction < 0 || options.memory_fraction > 1)
    return invalid_argument("CudaModel: memory_fraction " +
                            std::to_string(options.memory_fraction) + " is outside [0, 1]");
  ASSIGN_OR_RETURN(DeviceWeights weights,
                   DeviceWeights::load(config, *ckpt, options.progress,
                                       options.drafting && config.num_mtp_layers > 0));
  auto impl = std::make_unique<Impl>(std::move(config), std::move(weights), options);
  RETURN_IF_ERROR(impl->allocate());
  return std::unique_ptr<CudaModel>(new CudaModel(std::move(impl)));
}

int64_t CudaModel::max_supported_tokens() { return 4 * int64_t{kMaxIndexerEntries}; }

CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::~CudaModel() = default;

const v4::Config& CudaModel::config() const { return impl_->c; }
int CudaModel::max_sequences() const { return static_cast<int>(impl_->slot_pages.size()); }
int64_t CudaModel::weight_bytes() const { return impl_->w.bytes(); }
int64_t CudaModel::stored_weight_bytes() const { return impl_->w.stored_bytes(); }
int CudaModel::page_tokens() const { return impl_->state->layout().page_tokens(); }
int64_t CudaModel::page_bytes() const { return impl_->state->page_bytes(); }
int64_t CudaModel::constant_pages() const { return impl_->state->layout().constant_pages(); }
int64_t CudaModel::num_pages() const { return impl_->state->num_pages(); }
int64_t CudaModel::max_decode_rows() const { return impl_->max_bucket; }
int64_t CudaModel::sequence_bytes() const {
  return int64_t(sizeof(int64_t)) + impl_->pages_per_slot() * impl_->state->page_bytes();
}
DecodeStepCounts CudaModel::decode_steps() const {
  const DecodeGraphStats& g = impl_->graphs.stats();
  return DecodeStepCounts{g.eager + impl_->direct_steps, g.captured, g.replayed};
}
int64_t CudaModel::decode_bucket(int64_t count) const { return impl_->bucket(count); }
void CudaModel::set_phase_timing(bool on) {
  if (on && !impl_->timer) impl_->timer = std::make_unique<PhaseTimer>();
  if (!on) impl_->timer.reset();
}
std::map<std::string, double> CudaModel::take_phase_times_ms() {
  if (!impl_->timer) return {};
  std::map<std::string, double> t = impl_->timer->totals_ms();
  impl_->timer->clear();
  return t;
}
// Slot arguments are the caller's invariant here (no Status to return): out of range aborts.
int64_t CudaModel::num_tokens(int slot) const { return impl_->slot_tokens.at(slot); }
void CudaModel::reset(int slot) { impl_->slot_tokens.at(slot) = 0; }
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
  return forward(0, ids, n, all_logits, logits);
}

Status CudaModel::forward(int slot, const int32_t* ids, int64_t n, bool all_logits,
                          std::vector<float>* logits) {
  if (logits) logits->resize((all_logits ? n : 1) * impl_->c.vocab_size);
  return forward_into(slot, ids, n, all_logits, logits ? logits->data() : nullptr);
}

Status CudaModel::forward_into(int slot, const int32_t* ids, int64_t n, bool all_logits,
                               float* logits) {
  RETURN_IF_ERROR(impl_->check_slot(slot));
  RETURN_IF_ERROR(impl_->forward(impl_->slot_sequence(slot), ids, n, all_logits, logits));
  impl_->slot_tokens[slot] += n;
  return ok_status();
}

Status CudaModel::decode(const int* slots, const int32_t* ids, int64_t count,
                         std::vector<float>* logits, std::vector<int32_t>* greedy) {
  if (logits && count > 0) logits->resize(count * impl_->c.vocab_size);
  return decode_into(slots, ids, count, logits ? logits->data() : nullptr, greedy);
}

Status CudaModel::decode_into(const int* slots, const int32_t* ids, int64_t count, float* logits,
                              std::vector<int32_t>* greedy) {
  std::vector<PagedSequence> seqs;
  std::vector<bool> seen(impl_->slot_pages.size(), false);
  for (int64_t b = 0; b < count; ++b) {
    RETURN_IF_ERROR(impl_->check_slot(slots[b]));
    if (seen[slots[b]])
      return invalid_argument("decode: slot " + std::to_string(slots[b]) + " appears twice");
    seen[slots[b]] = true;
    seqs.push_back(impl_->slot_sequence(slots[b]));
  }
  RETURN_IF_ERROR(impl_->decode(seqs.data(), ids, count, logits, greedy));
  for (int64_t b = 0; b < count; ++b) ++impl_->slot_tokens[slots[b]];
  return ok_status();
}

Status CudaModel::forward_paged(const PagedSequence& seq, const int32_t* ids, int64_t n,
                                bool all_logits, float* logits, int32_t* argmax,
                                int64_t keep_from_pos) {
  if (argmax && all_logits) return invalid_argument("forward_paged: argmax with all_logits");
  RETURN_IF_ERROR(impl_->forward(seq, ids, n, all_logits, logits, keep_from_pos));
  if (argmax) *argmax = impl_->last_argmax();
  return ok_status();
}

Status CudaModel::decode_paged(const PagedSequence* seqs, const int32_t* ids, int64_t count,
                               float* logits, std::vector<int32_t>* greedy) {
  return impl_->decode(seqs, ids, count, logits, greedy);
}

Status CudaModel::verify_paged(const PagedSequence* seqs, const int32_t* ids, const int64_t* counts,
                               int64_t count, float* const* logits, const int64_t* skip) {
  return impl_->verify(seqs, ids, counts, count, logits, skip);
}

int64_t CudaModel::final_stream_floats() const {
  return impl_->mtp ? int64_t(impl_->c.hc_mult) * impl_->c.hidden_size : 0;
}

Status CudaModel::mtp_draft(const PagedSequence* seqs, const int32_t* tokens,
                            const float* const* hidden, int64_t count, int64_t k, int32_t* drafts) {
  return impl_->mtp_draft(seqs, tokens, hidden, count, k, drafts);
}

Status CudaModel::copy_pages(const int32_t* from, const int32_t* to, int64_t n) {
  return cuda::copy_pages(impl_->pool(), from, to, n, impl_->stream);
}
Status CudaModel::read_pages(const int32_t* pages, int64_t n, void* dst) {
  return cuda::read_pages(impl_->pool(), pages, n, dst, &impl_->page_staging);
}
Status CudaModel::write_pages(const int32_t* pages, int64_t n, const void* src) {
  return cuda::write_pages(impl_->pool(), pages, n, src, &impl_->page_staging);
}

Status CudaModel::copy_sequence(int from, int to) {
  RETURN_IF_ERROR(impl_->check_slot(from));
  RETURN_IF_ERROR(impl_->check_slot(to));
  const std::vector<int32_t>& a = impl_->slot_pages[from];
  RETURN_IF_ERROR(copy_pages(a.data(), impl_->slot_pages[to].data(), int64_t(a.size())));
  impl_->slot_tokens[to] = impl_->slot_tokens[from];
  return ok_status();
}

Status CudaModel::read_sequence(int slot, void* dst) {
  RETURN_IF_ERROR(impl_->check_slot(slot));
  char* out = static_cast<char*>(dst);
  std::memcpy(out, &impl_->slot_tokens[slot], sizeof(int64_t));
  const std::vector<int32_t>& p = impl_->slot_pages[slot];
  return read_pages(p.data(), int64_t(p.size()), out + sizeof(int64_t));
}

Status CudaModel::write_sequence(int slot, const void* src) {
  RETURN_IF_ERROR(impl_->check_slot(slot));
  const char* in = static_cast<const char*>(src);
  int64_t tokens = 0;
  std::memcpy(&tokens, in, sizeof(int64_t));
  if (tokens < 0 || tokens > impl_->options.max_tokens)
    return invalid_argument("sequence state for slot " + std::to_string(slot) + " holds " +
                            std::to_string(tokens) + " tokens, outside [0, " +
                            std::to_string(impl_->options.max_tokens) +
                            "] (not this model's layout?)");
  const std::vector<int32_t>& p = impl_->slot_pages[slot];
  RETURN_IF_ERROR(write_pages(p.data(), int64_t(p.size()), in + sizeof(int64_t)));
  impl_->slot_tokens[slot] = tokens;
  return ok_status();
}

StatusOr<std::vector<int32_t>> CudaModel::generate_greedy(const int32_t* prompt, int64_t n,
                                                          int64_t n_new) {
  Impl& m = *impl_;
  std::vector<int32_t> out;
  RETURN_IF_ERROR(forward_into(0, prompt, n, false, nullptr));
  if (n_new <= 0) return out;
  int32_t next = m.last_argmax();
  out.push_back(next);
  // The rest as batch-1 decode steps, so generation runs the graph-replayed path.
  const int slot = 0;
  std::vector<int32_t> picked;
  while (static_cast<int64_t>(out.size()) < n_new) {
    RETURN_IF_ERROR(decode_into(&slot, &next, 1, nullptr, &picked));
    next = picked[0];
    out.push_back(next);
  }
  return out;
}

}  // namespace deepinfer::cuda
