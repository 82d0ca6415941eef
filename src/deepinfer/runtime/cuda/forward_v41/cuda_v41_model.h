// The deepseek_v41 forward on one GPU (spec §11), composed from the backend/cuda ops as
// CudaModel is for deepseek_v4: it loads a checkpoint directory as v41::CpuModel does (weights
// in their stored formats on the device, the Engram tables left in host memory and read in place
// from the mapped checkpoint), keeps sequences' state in a device page pool laid out by
// v41::StateLayout (the CPU runner's pages), and runs prefill chunks and batched decode over
// sequences named by their pages. Plain numerics only, with the FP8/FP4 rounding transformers
// simulates inside its forward. Plain C++: no CUDA header is needed to use it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/runtime/cuda/forward/cuda_model.h"  // CudaModelOptions, PagedSequence
#include "deepinfer/runtime/cuda/forward/paged_forward.h"

namespace deepinfer::cuda {

class CudaV41Model final : public PagedForward {
 public:
  // options as CudaModel's; cuda_graphs is ignored (every step launches eagerly) and so is
  // max_sequences' slot count (callers name pages). unimplemented for official numerics,
  // invalid_argument for a max_tokens past max_supported_tokens(config); load errors name the
  // file, field or tensor.
  static StatusOr<std::unique_ptr<CudaV41Model>> load(const std::string& dir,
                                                      const CudaModelOptions& options);
  ~CudaV41Model() override;

  // The indexer's top-k capacity (indexer_topk_capacity(index_topk) entries) in positions of the
  // smallest compress ratio.
  static int64_t max_supported_tokens(const v41::Config& c);

  const v41::Config& config() const;
  int64_t stored_weight_bytes() const;

  int page_tokens() const override;
  int64_t page_bytes() const override;
  int64_t constant_pages() const override;
  int64_t num_pages() const override;
  int64_t max_decode_rows() const override;
  int64_t weight_bytes() const override;
  int64_t vocab_size() const override { return config().vocab_size; }
  int64_t eos_token_id() const override { return config().eos_token_id; }
  // Token pages a sequence of max_tokens needs (its block table's most entries).
  int64_t max_token_pages() const;

  // keep_from_pos (YOCO compact): the layers after the last one with cached state run only the
  // rows the kept logits and later calls read, as the CPU's v41::yoco_layer_rows says.
  Status forward_paged(const PagedSequence& seq, const int32_t* ids, int64_t n, bool all_logits,
                       float* logits, int32_t* argmax = nullptr,
                       int64_t keep_from_pos = 0) override;
  // Every row is its own segment of one token: the projections and experts run over all rows
  // at once, the state ops per row.
  Status decode_paged(const PagedSequence* seqs, const int32_t* ids, int64_t count, float* logits,
                      std::vector<int32_t>* greedy) override;
  Status verify_paged(const PagedSequence* seqs, const int32_t* ids, const int64_t* counts,
                      int64_t count, float* const* logits, const int64_t* skip = nullptr) override;
  Status copy_pages(const int32_t* from, const int32_t* to, int64_t n) override;
  Status read_pages(const int32_t* pages, int64_t n, void* dst) override;
  Status write_pages(const int32_t* pages, int64_t n, const void* src) override;

  // V4.1 has no MTP layer: unimplemented, naming why no DSpark drafter is loaded (the engine
  // logs it and decodes plainly).
  Status mtp_draft(const PagedSequence* seqs, const int32_t* tokens, const float* const* hidden,
                   int64_t count, int64_t k, int32_t* drafts) override;
  // The DSpark drafter (cuda_dspark.h), loaded with CudaModelOptions::drafting when the
  // checkpoint holds its tensors; null otherwise. The runner feeds it (dspark_tracks.h).
  v41f::CudaDspark* dspark() override;

  // Tests: from now on every forward/decode call appends, per row it ran (row order, chunk after
  // chunk), the smallest relative gap of that row's discrete choices (index picks, candidate
  // blocks, routed experts: last chosen vs first rejected over the largest |candidate|) to
  // *gaps, copying them to the host synchronously; null stops. A row whose GPU and CPU choices
  // may differ under bf16 rounding shows a gap near 0.
  void set_trace(std::vector<double>* gaps);

  struct Impl;

 private:
  explicit CudaV41Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::cuda
