#include "deepinfer/runtime/cuda/cuda_runner.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/runtime/cuda/forward/cuda_model.h"

namespace deepinfer::runtime::cuda {
namespace {

using ::deepinfer::cuda::CudaModel;
using ::deepinfer::cuda::CudaModelOptions;

// Prefill rows run in chunks of at most this many tokens. It sizes the forward's scratch and
// every slot's window ring (sliding_window - 1 + chunk rows per layer), and one chunk this long
// already keeps the GEMMs busy, so a larger --max-num-batched-tokens only costs memory.
constexpr int64_t kMaxChunk = 2048;

// "1.25 GiB", or "3.5 MiB" below a GiB (the tiny test models).
std::string bytes_text(int64_t bytes) {
  char b[32];
  if (bytes >= (int64_t{1} << 30))
    std::snprintf(b, sizeof b, "%.2f GiB", double(bytes) / double(int64_t{1} << 30));
  else
    std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / double(int64_t{1} << 20));
  return b;
}

// Page-locked host memory that only grows: the step's logits rows come back into it, about
// twice as fast as into pageable memory (66 MB a step at batch 128).
class PinnedFloats {
 public:
  PinnedFloats() = default;
  PinnedFloats(const PinnedFloats&) = delete;
  PinnedFloats& operator=(const PinnedFloats&) = delete;
  ~PinnedFloats() {
    if (p_) cudaFreeHost(p_);
  }
  // At least n floats; contents are not kept when it grows.
  StatusOr<float*> reserve(size_t n) {
    if (n <= size_) return p_;
    if (p_) cudaFreeHost(p_);
    p_ = nullptr;
    size_ = 0;
    if (cudaError_t e = cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(float));
        e != cudaSuccess)
      return resource_exhausted("page-locked host memory for " + std::to_string(n) +
                                " logits: " + cudaGetErrorString(e));
    size_ = n;
    return p_;
  }

 private:
  float* p_ = nullptr;
  size_t size_ = 0;
};

std::string row_name(size_t i, const StepRow& r) {
  return "row " + std::to_string(i) + " (sequence " + std::to_string(r.seq_id) + ")";
}

class CudaRunner final : public ModelRunner {
 public:
  CudaRunner(std::unique_ptr<CudaModel> model, ModelInfo info, kv::PageSpec spec)
      : model_(std::move(model)),
        info_(std::move(info)),
        spec_(spec),
        page_busy_(spec.num_pages, 0),
        held_(spec.num_pages, -1) {}

  const ModelInfo& info() const override { return info_; }
  const kv::PageSpec& page_spec() const override { return spec_; }
  Status execute(const StepBatch& batch, StepOutput* out) override;
  // Nothing is kept per sequence: a row at position 0 resets its slot.
  void release(uint64_t) override {}
  StatusOr<std::string> read_pages(const std::vector<int32_t>& pages) override;
  Status write_pages(const std::vector<int32_t>& pages, std::string_view bytes) override;

 private:
  Status check_page(int64_t page, std::string_view what) const;
  // Tokens on the page after this step's page copies so far (plan()).
  int64_t tokens_on(int32_t page) const {
    return held_[page] >= 0 ? held_[page] : model_->num_tokens(page);
  }
  // Every check of a batch before any state changes; splits its rows into the decode group and
  // the prefill rows.
  Status plan(const StepBatch& batch);

  std::unique_ptr<CudaModel> model_;
  ModelInfo info_;
  kv::PageSpec spec_;
  // Per-step staging, kept so a warm step allocates nothing.
  std::vector<char> page_busy_;  // [num_pages]: a row of this step is on the page
  std::vector<int64_t> held_;    // [num_pages]: tokens after this step's page copies, or -1
  std::vector<int32_t> busy_list_, held_list_;      // the entries set above, reset by the next plan
  std::vector<size_t> decode_rows_, prefill_rows_;  // row indices
  std::vector<int> decode_slots_;
  std::vector<int32_t> decode_ids_;
  std::vector<int64_t> out_row_;  // per row: its logits row in the output, or -1
  // StepOutput::logits rows, then (in a mixed step) the decode group's rows before they are
  // placed among them.
  PinnedFloats logits_;
};

Status CudaRunner::check_page(int64_t page, std::string_view what) const {
  if (page < 0 || page >= spec_.num_pages)
    return internal_error(std::string(what) + ": page " + std::to_string(page) +
                          " is outside the pool of " + std::to_string(spec_.num_pages) + " pages");
  return ok_status();
}

Status CudaRunner::plan(const StepBatch& batch) {
  for (int32_t p : busy_list_) page_busy_[p] = 0;
  for (int32_t p : held_list_) held_[p] = -1;
  busy_list_.clear();
  held_list_.clear();
  for (const kv::PageCopy& pc : batch.page_copies) {
    RETURN_IF_ERROR(check_page(pc.from, "page copy source"));
    RETURN_IF_ERROR(check_page(pc.to, "page copy destination"));
    held_[pc.to] = tokens_on(pc.from);
    held_list_.push_back(pc.to);
  }
  decode_rows_.clear();
  prefill_rows_.clear();
  decode_slots_.clear();
  decode_ids_.clear();
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const StepRow& r = batch.rows[i];
    if (!r.block_table || r.block_table->size() != 1)
      return internal_error(
          row_name(i, r) +
          ": a CUDA runner page is a whole sequence slot, so a block table holds exactly one "
          "page; it holds " +
          std::to_string(r.block_table ? r.block_table->size() : 0));
    const int32_t page = (*r.block_table)[0];
    if (page < 0 || page >= spec_.num_pages) return check_page(page, row_name(i, r));
    if (page_busy_[page])
      return internal_error(row_name(i, r) + ": page " + std::to_string(page) +
                            " already belongs to another row of this step");
    page_busy_[page] = 1;
    busy_list_.push_back(page);
    if (r.num_tokens < 1 || r.tokens == nullptr)
      return invalid_argument(row_name(i, r) + ": no tokens");
    if (r.start_pos < 0 || r.start_pos + r.num_tokens > spec_.page_tokens)
      return out_of_range(row_name(i, r) + ": positions [" + std::to_string(r.start_pos) + ", " +
                          std::to_string(r.start_pos + r.num_tokens) + ") exceed --max-model-len " +
                          std::to_string(spec_.page_tokens));
    for (int64_t t = 0; t < r.num_tokens; ++t)
      if (r.tokens[t] < 0 || r.tokens[t] >= info_.vocab_size)
        return invalid_argument(row_name(i, r) + ": token id " + std::to_string(r.tokens[t]) +
                                " at position " + std::to_string(r.start_pos + t) +
                                " is outside the vocabulary (" + std::to_string(info_.vocab_size) +
                                ")");
    if (r.start_pos > 0 && tokens_on(page) != r.start_pos)
      return internal_error(row_name(i, r) + " starts at position " + std::to_string(r.start_pos) +
                            ", but its page " + std::to_string(page) + " holds " +
                            std::to_string(tokens_on(page)) + " tokens");
    if (r.start_pos > 0 && r.num_tokens == 1) {
      decode_rows_.push_back(i);
      decode_slots_.push_back(page);
      decode_ids_.push_back(r.tokens[0]);
    } else {
      prefill_rows_.push_back(i);
    }
  }
  return ok_status();
}

Status CudaRunner::execute(const StepBatch& batch, StepOutput* out) {
  RETURN_IF_ERROR(plan(batch));
  for (const kv::PageCopy& pc : batch.page_copies)
    RETURN_IF_ERROR(model_->copy_sequence(pc.from, pc.to));

  const int64_t V = info_.vocab_size;
  const size_t n = batch.rows.size();
  out_row_.assign(n, -1);
  int64_t n_out = 0, decode_out = 0;
  for (size_t i = 0; i < n; ++i)
    if (batch.rows[i].wants_logits) out_row_[i] = n_out++;
  for (size_t i : decode_rows_) decode_out += batch.rows[i].wants_logits ? 1 : 0;
  out->num_logit_rows = n_out;

  // A step of decode rows only, all sampling (the steady state): decode's rows are the output
  // rows, in order, so they land in place.
  const bool in_place = prefill_rows_.empty() && !decode_rows_.empty() &&
                        decode_out == static_cast<int64_t>(decode_rows_.size());
  const int64_t staged = in_place || decode_out == 0 ? 0 : int64_t(decode_rows_.size());
  ASSIGN_OR_RETURN(float* host, logits_.reserve(size_t(std::max<int64_t>(n_out + staged, 1)) * V));
  out->logits = host;
  if (!decode_rows_.empty()) {
    float* dst = in_place ? host : (decode_out > 0 ? host + n_out * V : nullptr);
    RETURN_IF_ERROR(model_->decode_into(decode_slots_.data(), decode_ids_.data(),
                                        static_cast<int64_t>(decode_slots_.size()), dst, nullptr));
  }
  if (in_place) return ok_status();
  if (decode_out > 0)
    for (size_t b = 0; b < decode_rows_.size(); ++b)
      if (out_row_[decode_rows_[b]] >= 0)
        std::memcpy(host + out_row_[decode_rows_[b]] * V, host + (n_out + b) * V,
                    V * sizeof(float));
  for (size_t i : prefill_rows_) {
    const StepRow& r = batch.rows[i];
    const int slot = (*r.block_table)[0];
    if (r.start_pos == 0) model_->reset(slot);
    RETURN_IF_ERROR(model_->forward_into(slot, r.tokens, r.num_tokens, /*all_logits=*/false,
                                         r.wants_logits ? host + out_row_[i] * V : nullptr));
  }
  return ok_status();
}

StatusOr<std::string> CudaRunner::read_pages(const std::vector<int32_t>& pages) {
  for (int32_t p : pages) RETURN_IF_ERROR(check_page(p, "read_pages"));
  const size_t page_bytes = static_cast<size_t>(spec_.page_bytes);
  std::string bytes(pages.size() * page_bytes, '\0');
  for (size_t i = 0; i < pages.size(); ++i)
    RETURN_IF_ERROR(model_->read_sequence(pages[i], bytes.data() + i * page_bytes));
  return bytes;
}

Status CudaRunner::write_pages(const std::vector<int32_t>& pages, std::string_view bytes) {
  const size_t page_bytes = static_cast<size_t>(spec_.page_bytes);
  if (bytes.size() != pages.size() * page_bytes)
    return invalid_argument("write_pages: " + std::to_string(bytes.size()) + " bytes for " +
                            std::to_string(pages.size()) + " pages of " +
                            std::to_string(page_bytes) + " bytes");
  for (int32_t p : pages) RETURN_IF_ERROR(check_page(p, "write_pages"));
  for (size_t i = 0; i < pages.size(); ++i)
    RETURN_IF_ERROR(model_->write_sequence(pages[i], bytes.data() + i * page_bytes));
  return ok_status();
}

StatusOr<std::string> device_name() {
  int device = 0;
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess)
    return internal_error(std::string("cudaGetDeviceProperties failed: ") + cudaGetErrorString(e));
  return std::string(prop.name);
}

}  // namespace

StatusOr<std::unique_ptr<ModelRunner>> create_cuda_runner(const RunnerOptions& o) {
  if (o.numerics == Numerics::kOfficial)
    return unimplemented(
        "--numerics official on --device cuda: the GPU forward computes plain numerics only "
        "(transformers' math, without the official reference's simulated FP8/FP4 activation "
        "quantization); use --numerics plain or auto");
  if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1))
    return invalid_argument("--gpu-memory-utilization " + std::to_string(o.gpu_memory_utilization) +
                            " is outside (0, 1]");
  if (o.max_model_len < 1 || o.max_model_len > CudaModel::max_supported_tokens())
    return invalid_argument("--max-model-len " + std::to_string(o.max_model_len) +
                            ": the CUDA forward serves 1 to " +
                            std::to_string(CudaModel::max_supported_tokens()) +
                            " tokens per sequence (the indexer's top-k capacity)");
  if (o.max_num_seqs < 1) return invalid_argument("--max-num-seqs must be positive");
  if (o.max_num_batched_tokens < 1)
    return invalid_argument("--max-num-batched-tokens must be positive");

  CudaModelOptions mo;
  mo.model = v4::ModelOptions{v4::Numerics::kPlain, {}};
  mo.max_tokens = o.max_model_len;
  // Decode steps every running sequence as one batch, and its buckets stop at max_chunk.
  mo.max_chunk = std::max<int64_t>(std::min(o.max_num_batched_tokens, kMaxChunk), o.max_num_seqs);
  mo.max_sequences = o.max_num_seqs;
  mo.memory_fraction = o.gpu_memory_utilization;
  mo.cuda_graphs = o.cuda_graphs;
  if (o.on_load_progress)
    mo.progress = [cb = o.on_load_progress](const v4::LoadProgress& p) {
      cb(p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total);
    };
  auto loaded = CudaModel::load(o.model_dir, mo);
  if (!loaded.ok()) {
    const Status& st = loaded.status();
    if (st.code() != StatusCode::kResourceExhausted) return st;
    char util[32];
    std::snprintf(util, sizeof util, "%g", o.gpu_memory_utilization);
    return Status(st.code(), std::string("--gpu-memory-utilization ") + util + ": " + st.message() +
                                 "; raise it, or lower --max-model-len (every slot holds that many "
                                 "tokens of state)");
  }
  std::unique_ptr<CudaModel> model = std::move(*loaded);
  ASSIGN_OR_RETURN(std::string name, device_name());

  const v4::Config& c = model->config();
  ModelInfo info;
  info.vocab_size = c.vocab_size;
  info.eos_token_id = static_cast<int32_t>(c.eos_token_id);
  info.numerics = "plain";
  info.device = Device::kCuda;
  info.device_name = name;
  info.weight_bytes = model->weight_bytes();
  info.max_sequences = model->max_sequences();
  kv::PageSpec spec;
  spec.page_tokens = static_cast<int>(o.max_model_len);
  spec.page_bytes = model->sequence_bytes();
  spec.constant_pages_per_seq = 0;
  spec.num_pages = model->max_sequences();
  std::fprintf(stderr,
               "deepinfer: cuda runner on %s: weights %s; KV pool %s = %d sequence slots "
               "(--max-num-seqs %d) of %lld tokens, %s each\n",
               name.c_str(), bytes_text(info.weight_bytes).c_str(),
               bytes_text(spec.page_bytes * spec.num_pages).c_str(), model->max_sequences(),
               o.max_num_seqs, static_cast<long long>(o.max_model_len),
               bytes_text(spec.page_bytes).c_str());
  return std::unique_ptr<ModelRunner>(new CudaRunner(std::move(model), std::move(info), spec));
}

}  // namespace deepinfer::runtime::cuda
