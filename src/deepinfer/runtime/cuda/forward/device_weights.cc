#include "deepinfer/runtime/cuda/forward/device_weights.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/dequantize.h"
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
  for (const char* s :
       {"wq_a.weight", "wq_b.weight", "wkv.weight", "wo_a.weight", "wo_b.weight", "wgate.weight",
        "weights_proj.weight", "w1.weight", "w2.weight", "w3.weight", "head.weight"})
    if (ends_with(name, s)) return true;
  return false;
}

StatusOr<DeviceWeights> DeviceWeights::load(
    const v4::Config& c, const Checkpoint& ckpt,
    const std::function<void(const v4::LoadProgress&)>& progress) {
  ASSIGN_OR_RETURN(std::vector<v4::WeightSource> sources, v4::resolve_weights(ckpt, c));
  DeviceWeights dw;
  v4::LoadProgress p;
  p.tensors_total = static_cast<int64_t>(sources.size());
  for (const auto& s : sources) p.bytes_total += s.stored_bytes();
  std::vector<float> host;  // one float tensor at a time
  auto upload = [](const TensorInfo& t) {
    DeviceBuffer<uint8_t> b(t.nbytes);
    DI_CUDA_CHECK(cudaMemcpy(b.get(), t.data, t.nbytes, cudaMemcpyHostToDevice));
    return b;
  };
  for (const v4::WeightSource& s : sources) {
    const std::string& name = s.spec.name;
    const int64_t numel = s.numel();
    p.bytes_done += s.stored_bytes();
    ++p.tensors_done;
    if (name.rfind("mtp.", 0) == 0) {
      if (progress) progress(p);
      continue;
    }
    dw.stored_bytes_ += s.stored_bytes();
    if (s.format == v4::WeightFormat::kIndex) {
      std::vector<int32_t> ids;
      RETURN_IF_ERROR(v4::load_index(s, c, &ids));
      dw.i32_.emplace(name, DeviceBuffer<int32_t>(ids));
      dw.bytes_ += numel * 4;
    } else if (!is_projection(name)) {
      host.resize(numel);
      RETURN_IF_ERROR(v4::load_float(s, c, host.data()));
      dw.f32_.emplace(name, DeviceBuffer<float>(host));
      dw.bytes_ += numel * 4;
    } else {
      Matrix m;
      DeviceMatrix& v = m.view;
      v.rows = s.spec.shape[0];
      v.cols = s.spec.shape[1];
      const TensorInfo& t = *s.tensor;
      if (s.format == v4::WeightFormat::kFp8Block) {
        RETURN_IF_ERROR(check_fp8_block(t, *s.scale, c.weight_block_rows, c.weight_block_cols));
        std::vector<float> sc;
        RETURN_IF_ERROR(scales_to_float(*s.scale, &sc));
        m.data = upload(t);
        m.block_scale = DeviceBuffer<float>(sc);
        v.format = MatrixFormat::kFp8Block;
        v.block_scale = m.block_scale.get();
        v.block_rows = c.weight_block_rows;
        v.block_cols = c.weight_block_cols;
      } else if (s.format == v4::WeightFormat::kMxfp4) {
        RETURN_IF_ERROR(check_mxfp4(t, *s.scale));
        m.data = upload(t);
        m.mx_scale = upload(*s.scale);
        v.format = MatrixFormat::kMxfp4;
        v.mx_scale = m.mx_scale.get();
      } else {
        host.resize(numel);
        RETURN_IF_ERROR(v4::load_float(s, c, host.data()));
        std::vector<uint16_t> bits(numel);
        for (int64_t k = 0; k < numel; ++k) bits[k] = float_to_bf16(host[k]);
        m.data = DeviceBuffer<uint8_t>(numel * 2);
        DI_CUDA_CHECK(cudaMemcpy(m.data.get(), bits.data(), numel * 2, cudaMemcpyHostToDevice));
      }
      v.data = m.data.get();
      if (v.format != MatrixFormat::kBf16)
        dw.largest_quantized_ = std::max(dw.largest_quantized_, v.rows * v.cols);
      dw.bytes_ += v.bytes();
      dw.mats_.emplace(name, std::move(m));
    }
    if (progress) progress(p);
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
