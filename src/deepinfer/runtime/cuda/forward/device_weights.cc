#include "deepinfer/runtime/cuda/forward/device_weights.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "deepinfer/backend/cuda/quant/dequantize.h"
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

bool is_bf16_projection(const std::string& name) {
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
  DeviceBuffer<uint8_t> raw, raw_scale;  // staging for quantized bytes, reused
  DeviceBuffer<float> fscale;
  std::vector<float> host;  // one float tensor at a time
  for (const v4::WeightSource& s : sources) {
    const std::string& name = s.spec.name;
    const int64_t numel = s.numel();
    p.bytes_done += s.stored_bytes();
    ++p.tensors_done;
    if (name.rfind("mtp.", 0) == 0) {
      if (progress) progress(p);
      continue;
    }
    if (s.format == v4::WeightFormat::kIndex) {
      std::vector<int32_t> ids;
      RETURN_IF_ERROR(v4::load_index(s, c, &ids));
      dw.i32_.emplace(name, DeviceBuffer<int32_t>(ids));
      dw.bytes_ += numel * 4;
    } else if (!is_bf16_projection(name)) {
      host.resize(numel);
      RETURN_IF_ERROR(v4::load_float(s, c, host.data()));
      dw.f32_.emplace(name, DeviceBuffer<float>(host));
      dw.bytes_ += numel * 4;
    } else {
      DeviceBuffer<uint16_t> out(numel);
      auto* ob = reinterpret_cast<__nv_bfloat16*>(out.get());
      const TensorInfo& t = *s.tensor;
      const int64_t rows = s.spec.shape[0], cols = s.spec.shape[1];
      auto stage = [](DeviceBuffer<uint8_t>& b, const TensorInfo& ti) {
        if (b.size() < ti.nbytes) b = DeviceBuffer<uint8_t>(ti.nbytes);
        DI_CUDA_CHECK(cudaMemcpy(b.get(), ti.data, ti.nbytes, cudaMemcpyHostToDevice));
        return b.get();
      };
      if (s.format == v4::WeightFormat::kFp8Block) {
        RETURN_IF_ERROR(check_fp8_block(t, *s.scale, c.weight_block_rows, c.weight_block_cols));
        std::vector<float> sc;
        RETURN_IF_ERROR(scales_to_float(*s.scale, &sc));
        if (fscale.size() < sc.size()) fscale = DeviceBuffer<float>(sc.size());
        DI_CUDA_CHECK(cudaMemcpy(fscale.get(), sc.data(), sc.size() * 4, cudaMemcpyHostToDevice));
        fp8_block_to_bf16(stage(raw, t), fscale.get(), rows, cols, c.weight_block_rows,
                          c.weight_block_cols, ob, nullptr);
      } else if (s.format == v4::WeightFormat::kMxfp4) {
        RETURN_IF_ERROR(check_mxfp4(t, *s.scale));
        const uint8_t* w = stage(raw, t);
        mxfp4_to_bf16(w, stage(raw_scale, *s.scale), rows, cols, ob, nullptr);
      } else {
        host.resize(numel);
        RETURN_IF_ERROR(v4::load_float(s, c, host.data()));
        std::vector<uint16_t> bits(numel);
        for (int64_t k = 0; k < numel; ++k) bits[k] = float_to_bf16(host[k]);
        out.upload(bits);
      }
      // The staging buffers are reused by the next tensor.
      DI_CUDA_CHECK(cudaDeviceSynchronize());
      dw.bf16_.emplace(name, std::move(out));
      dw.bytes_ += numel * 2;
    }
    if (progress) progress(p);
  }
  return dw;
}

const __nv_bfloat16* DeviceWeights::bf16(const std::string& name) const {
  return reinterpret_cast<const __nv_bfloat16*>(find_or_die(bf16_, name, "bf16"));
}
const float* DeviceWeights::f(const std::string& name) const {
  return find_or_die(f32_, name, "fp32");
}
const int32_t* DeviceWeights::i(const std::string& name) const {
  return find_or_die(i32_, name, "int32");
}

}  // namespace deepinfer::cuda
