#include "deepinfer/runtime/cuda/forward/device_weights.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/dequantize.h"
#include "deepinfer/model/deepseek_v41/weights.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::cuda {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <typename Map>
auto* find_or_die(const Map& m, const std::string& name, const char* kind) {
  auto it = m.find(name);
  if (it == m.end()) {
    std::fprintf(stderr, "cuda forward: no %s device tensor '%s'\n", kind, name.c_str());
    std::abort();
  }
  return it->second.get();
}

}  // namespace

bool is_projection(const std::string& name) {
  // The router (ffn.gate.weight) stays fp32: MoE top-k is a discrete choice (see Gemm::f32).
  for (const char* s : {"wq_a.weight", "wq_b.weight", "wkv.weight", "wo_a.weight", "wo_b.weight",
                        "wgate.weight", "weights_proj.weight", "w1.weight", "w2.weight",
                        "w3.weight", "head.weight", "e_proj.weight", "h_proj.weight"})
    if (ends_with(name, s)) return true;
  return false;
}

// What DeviceWeights::add needs of either family's WeightSource (v4:: or v41::): the spec, the
// tensors, the format and its FP8 block.
struct SourceView {
  const std::string* name;
  const std::vector<int64_t>* shape;
  const TensorInfo* tensor;
  const TensorInfo* scale;
  bool fp8_block, mxfp4, index;
  int block_rows, block_cols;
  int64_t numel, stored_bytes;
};

namespace {

SourceView view_of(const v4::WeightSource& s, const v4::Config& c) {
  return {&s.spec.name,
          &s.spec.shape,
          s.tensor,
          s.scale,
          s.format == v4::WeightFormat::kFp8Block,
          s.format == v4::WeightFormat::kMxfp4,
          s.format == v4::WeightFormat::kIndex,
          c.weight_block_rows,
          c.weight_block_cols,
          s.numel(),
          s.stored_bytes()};
}

SourceView view_of(const v41::WeightSource& s) {
  return {&s.spec.name,
          &s.spec.shape,
          s.tensor,
          s.scale,
          s.format == v41::WeightFormat::kFp8Block,
          s.format == v41::WeightFormat::kMxfp4,
          false,
          s.block_rows,
          s.block_cols,
          s.numel(),
          s.stored_bytes()};
}

}  // namespace

// One source: int32 index table, fp32 tensor, or a projection in its stored format.
Status DeviceWeights::add(const SourceView& s, const std::function<Status(float*)>& load_float,
                          const std::function<Status(std::vector<int32_t>*)>& load_index,
                          bool projection) {
  const std::string& name = *s.name;
  const int64_t numel = s.numel;
  auto upload = [](const TensorInfo& t) {
    DeviceBuffer<uint8_t> b(t.nbytes);
    DI_CUDA_CHECK(cudaMemcpy(b.get(), t.data, t.nbytes, cudaMemcpyHostToDevice));
    return b;
  };
  stored_bytes_ += s.stored_bytes;
  if (s.index) {
    std::vector<int32_t> ids;
    RETURN_IF_ERROR(load_index(&ids));
    i32_.emplace(name, DeviceBuffer<int32_t>(ids));
    bytes_ += numel * 4;
    return ok_status();
  }
  std::vector<float> host;
  if (!projection) {
    host.resize(numel);
    RETURN_IF_ERROR(load_float(host.data()));
    f32_.emplace(name, DeviceBuffer<float>(host));
    bytes_ += numel * 4;
    return ok_status();
  }
  Matrix m;
  DeviceMatrix& v = m.view;
  v.rows = (*s.shape)[0];
  v.cols = (*s.shape)[1];
  const TensorInfo& t = *s.tensor;
  if (s.fp8_block) {
    RETURN_IF_ERROR(check_fp8_block(t, *s.scale, s.block_rows, s.block_cols));
    std::vector<float> sc;
    RETURN_IF_ERROR(scales_to_float(*s.scale, &sc));
    m.data = upload(t);
    m.block_scale = DeviceBuffer<float>(sc);
    v.format = MatrixFormat::kFp8Block;
    v.block_scale = m.block_scale.get();
    v.block_rows = s.block_rows;
    v.block_cols = s.block_cols;
    v.pow2_scales = powers_of_two(sc.data(), sc.size());
  } else if (s.mxfp4) {
    RETURN_IF_ERROR(check_mxfp4(t, *s.scale));
    m.data = upload(t);
    m.mx_scale = upload(*s.scale);
    v.format = MatrixFormat::kMxfp4;
    v.mx_scale = m.mx_scale.get();
  } else {
    host.resize(numel);
    RETURN_IF_ERROR(load_float(host.data()));
    std::vector<uint16_t> bits(numel);
    for (int64_t k = 0; k < numel; ++k) bits[k] = float_to_bf16(host[k]);
    m.data = DeviceBuffer<uint8_t>(numel * 2);
    DI_CUDA_CHECK(cudaMemcpy(m.data.get(), bits.data(), numel * 2, cudaMemcpyHostToDevice));
  }
  v.data = m.data.get();
  if (v.format != MatrixFormat::kBf16)
    largest_quantized_ = std::max(largest_quantized_, v.rows * v.cols);
  bytes_ += v.bytes();
  mats_.emplace(name, std::move(m));
  return ok_status();
}

StatusOr<DeviceWeights> DeviceWeights::load(
    const v4::Config& c, const Checkpoint& ckpt,
    const std::function<void(const v4::LoadProgress&)>& progress, bool with_mtp) {
  ASSIGN_OR_RETURN(std::vector<v4::WeightSource> sources, v4::resolve_weights(ckpt, c));
  DeviceWeights dw;
  v4::LoadProgress p;
  p.tensors_total = static_cast<int64_t>(sources.size());
  for (const auto& s : sources) p.bytes_total += s.stored_bytes();
  for (const v4::WeightSource& s : sources) {
    p.bytes_done += s.stored_bytes();
    ++p.tensors_done;
    if (with_mtp || s.spec.name.rfind("mtp.", 0) != 0)
      RETURN_IF_ERROR(dw.add(
          view_of(s, c), [&](float* out) { return v4::load_float(s, c, out); },
          [&](std::vector<int32_t>* out) { return v4::load_index(s, c, out); },
          is_projection(s.spec.name)));
    if (progress) progress(p);
  }
  return dw;
}

StatusOr<DeviceWeights> DeviceWeights::load(
    const v41::Config& c, const Checkpoint& ckpt,
    const std::function<void(const v4::LoadProgress&)>& progress, bool with_drafter) {
  ASSIGN_OR_RETURN(std::vector<v41::WeightSource> sources, v41::resolve_weights(ckpt, c));
  DeviceWeights dw;
  v4::LoadProgress p;
  p.tensors_total = static_cast<int64_t>(sources.size());
  for (const auto& s : sources) p.bytes_total += s.stored_bytes();
  for (const v41::WeightSource& s : sources) {
    p.bytes_done += s.stored_bytes();
    ++p.tensors_done;
    // The Engram tables stay in host memory (read in place from the mapped checkpoint); the
    // DSpark drafter's tensors go up only with_drafter (runtime/cuda/forward_v41/cuda_dspark.h).
    const std::string& n = s.spec.name;
    const bool drafter = n.rfind("mtp.", 0) == 0 || n.rfind("markov_head.", 0) == 0 ||
                         n.rfind("confidence_head.", 0) == 0;
    if (s.spec.kind != v41::WeightKind::kEngramTable && (with_drafter || !drafter)) {
      const std::string& name = s.spec.name;
      // The indexer's wk, the Engram wkv and DSpark's main_proj are projections too (FP8 32x32
      // when quantized); the Markov head stays fp32 (its per-draft GEMV reads it in place).
      const bool projection = (is_projection(name) || name.ends_with("indexer.wk.weight") ||
                               name.ends_with("main_proj.weight")) &&
                              name.find("markov_head.") == std::string::npos;
      RETURN_IF_ERROR(dw.add(
          view_of(s), [&](float* out) { return v41::load_float(s, out); },
          [](std::vector<int32_t>*) { return internal_error("deepseek_v41 has no index tables"); },
          projection));
    }
    if (progress) progress(p);
  }
  // tie_word_embeddings: the head is the embedding, as a projection.
  if (c.tie_word_embeddings && !dw.mats_.count("head.weight")) {
    const float* e = dw.f("embed.weight");
    const int64_t n = c.vocab_size * c.hidden_size;
    std::vector<float> host(n);
    DI_CUDA_CHECK(cudaMemcpy(host.data(), e, n * 4, cudaMemcpyDeviceToHost));
    std::vector<uint16_t> bits(n);
    for (int64_t k = 0; k < n; ++k) bits[k] = float_to_bf16(host[k]);
    Matrix m;
    m.data = DeviceBuffer<uint8_t>(n * 2);
    DI_CUDA_CHECK(cudaMemcpy(m.data.get(), bits.data(), n * 2, cudaMemcpyHostToDevice));
    m.view.rows = c.vocab_size;
    m.view.cols = c.hidden_size;
    m.view.data = m.data.get();
    dw.bytes_ += n * 2;
    dw.mats_.emplace("head.weight", std::move(m));
  }
  return dw;
}

const DeviceMatrix& DeviceWeights::matrix(const std::string& name) const {
  auto it = mats_.find(name);
  if (it == mats_.end()) {
    std::fprintf(stderr, "cuda forward: no projection device tensor '%s'\n", name.c_str());
    std::abort();
  }
  return it->second.view;
}
const float* DeviceWeights::f(const std::string& name) const {
  return find_or_die(f32_, name, "fp32");
}
const int32_t* DeviceWeights::i(const std::string& name) const {
  return find_or_die(i32_, name, "int32");
}

}  // namespace deepinfer::cuda
