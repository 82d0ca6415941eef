#include "deepinfer/loader/dequantize.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer {
namespace {

std::string describe(const TensorInfo& t) {
  return "tensor '" + t.name + "' (" + dtype_name(t.dtype) + " " + shape_to_string(t.shape) + ", " +
         t.file + ")";
}

// TensorInfo may be built by hand, so the byte count is not taken on trust.
Status check_bytes(const TensorInfo& t) {
  if (t.data == nullptr && t.nbytes > 0) return invalid_argument(describe(t) + ": no data");
  if (t.nbytes != static_cast<size_t>(t.numel()) * dtype_size(t.dtype))
    return invalid_argument(describe(t) + ": holds " + std::to_string(t.nbytes) + " bytes");
  return ok_status();
}

// 256-entry decode tables: the weights are the bulk of a checkpoint.
const std::array<float, 256>& fp8_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = fp8e4m3_to_float(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

const std::array<float, 256>& e8m0_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = e8m0_to_float(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

// Scale tensor -> fp32 values (scales are small: one per block).
Status scales_to_float(const TensorInfo& scale, std::vector<float>* out) {
  RETURN_IF_ERROR(check_bytes(scale));
  out->resize(static_cast<size_t>(scale.numel()));
  if (scale.dtype == DType::kF8E8M0) {
    const auto& table = e8m0_table();
    for (size_t i = 0; i < out->size(); ++i) (*out)[i] = table[scale.data[i]];
    return ok_status();
  }
  if (scale.dtype == DType::kF32 || scale.dtype == DType::kBF16)
    return to_float(scale, out->data());
  return invalid_argument("scale " + describe(scale) + ": expected F8_E8M0, F32 or BF16");
}

Status to_float(const TensorInfo& t, float* out) {
  RETURN_IF_ERROR(check_bytes(t));
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::kF32:
      if (n > 0) std::memcpy(out, t.data, t.nbytes);
      return ok_status();
    case DType::kBF16:
    case DType::kF16: {
      const bool bf16 = t.dtype == DType::kBF16;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);  // the mapped data need not be 2-byte aligned
        out[i] = bf16 ? bf16_to_float(h) : f16_to_float(h);
      }
      return ok_status();
    }
    default:
      return invalid_argument(describe(t) + ": to_float supports F32, BF16 and F16 only");
  }
}

Status check_fp8_block(const TensorInfo& w, const TensorInfo& scale, int block_rows,
                       int block_cols) {
  if (w.dtype != DType::kF8E4M3 || w.shape.size() != 2)
    return invalid_argument(describe(w) + ": expected a 2-D F8_E4M3 weight");
  if (block_rows <= 0 || block_cols <= 0) {
    return invalid_argument(describe(w) + ": block size " + std::to_string(block_rows) + "x" +
                            std::to_string(block_cols) + " is not positive");
  }
  const int64_t rows = w.shape[0], cols = w.shape[1];
  const std::vector<int64_t> want = {ceil_div(rows, block_rows), ceil_div(cols, block_cols)};
  if (scale.shape != want) {
    return invalid_argument("scale " + describe(scale) + " does not match weight " + describe(w) +
                            " with " + std::to_string(block_rows) + "x" +
                            std::to_string(block_cols) + " blocks: expected " +
                            shape_to_string(want));
  }
  return check_bytes(w);
}

Status dequantize_fp8_block(const TensorInfo& w, const TensorInfo& scale, int block_rows,
                            int block_cols, float* out) {
  RETURN_IF_ERROR(check_fp8_block(w, scale, block_rows, block_cols));
  const int64_t rows = w.shape[0], cols = w.shape[1];
  const std::vector<int64_t> want = {ceil_div(rows, block_rows), ceil_div(cols, block_cols)};
  std::vector<float> s;
  RETURN_IF_ERROR(scales_to_float(scale, &s));
  const auto& table = fp8_table();
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = w.data + r * cols;
    const float* srow = s.data() + (r / block_rows) * want[1];
    float* dst = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) dst[c] = table[src[c]] * srow[c / block_cols];
  }
  return ok_status();
}

Status check_mxfp4(const TensorInfo& w, const TensorInfo& scale) {
  if ((w.dtype != DType::kI8 && w.dtype != DType::kU8) || w.shape.size() != 2)
    return invalid_argument(describe(w) + ": expected a 2-D I8/U8 packed-FP4 weight");
  if (scale.dtype != DType::kF8E8M0)
    return invalid_argument("scale " + describe(scale) + ": expected F8_E8M0");
  const int64_t rows = w.shape[0], cols = 2 * w.shape[1];
  const std::vector<int64_t> want = {rows, ceil_div(cols, 32)};
  if (scale.shape != want) {
    return invalid_argument("scale " + describe(scale) + " does not match weight " + describe(w) +
                            " (logical [" + std::to_string(rows) + ", " + std::to_string(cols) +
                            "], 32-element blocks): expected " + shape_to_string(want));
  }
  RETURN_IF_ERROR(check_bytes(w));
  return check_bytes(scale);
}

Status dequantize_mxfp4(const TensorInfo& w, const TensorInfo& scale, float* out) {
  RETURN_IF_ERROR(check_mxfp4(w, scale));
  const int64_t rows = w.shape[0], cols = 2 * w.shape[1];
  const std::vector<int64_t> want = {rows, ceil_div(cols, 32)};
  const auto& e8m0 = e8m0_table();
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = w.data + r * (cols / 2);
    const uint8_t* srow = scale.data + r * want[1];
    float* dst = out + r * cols;
    for (int64_t c = 0; c < cols / 2; ++c) {
      const float s = e8m0[srow[(2 * c) / 32]];
      dst[2 * c] = fp4e2m1_to_float(src[c] & 0xf) * s;
      dst[2 * c + 1] = fp4e2m1_to_float(src[c] >> 4) * s;
    }
  }
  return ok_status();
}

}  // namespace deepinfer
