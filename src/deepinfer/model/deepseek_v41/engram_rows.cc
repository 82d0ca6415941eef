#include "deepinfer/model/deepseek_v41/engram_rows.h"

#include <algorithm>
#include <cstring>

#include "deepinfer/loader/dequantize.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::v41 {
namespace {

std::string where(const TensorInfo& t) { return "tensor '" + t.name + "' in " + t.file; }

}  // namespace

StatusOr<EngramRows> EngramRows::open(const Checkpoint& ckpt, const std::string& table) {
  const TensorInfo* t = ckpt.find(table);
  if (!t) return not_found("checkpoint " + ckpt.dir() + ": missing Engram table '" + table + "'");
  if (t->shape.size() != 2)
    return invalid_argument(where(*t) + ": shape " + shape_to_string(t->shape) +
                            ", expected [rows, head_dim]");
  EngramRows r;
  r.values_ = t->data;
  r.rows_ = t->shape[0];
  r.dim_ = t->shape[1];
  switch (t->dtype) {
    case DType::kF32:
      r.kind_ = Kind::kF32;
      return r;
    case DType::kBF16:
      r.kind_ = Kind::kBF16;
      return r;
    case DType::kF16:
      r.kind_ = Kind::kF16;
      return r;
    case DType::kF8E4M3:
      r.kind_ = Kind::kFp8;
      break;
    default:
      return invalid_argument(where(*t) + ": dtype " + dtype_name(t->dtype) +
                              ", expected F8_E4M3, F32, BF16 or F16");
  }
  const std::string sn = table.substr(0, table.rfind(".weight")) + ".scale";
  const TensorInfo* s = ckpt.find(sn);
  if (!s)
    return not_found("checkpoint " + ckpt.dir() + ": missing tensor '" + sn +
                     "' (the scale of Engram table '" + t->name + "' in " + t->file + ")");
  const int64_t per32 = (r.dim_ + 31) / 32;
  if (s->shape != std::vector<int64_t>{r.rows_, 1} &&
      s->shape != std::vector<int64_t>{r.rows_, per32})
    return invalid_argument(where(*s) + ": shape " + shape_to_string(s->shape) + ", expected [" +
                            std::to_string(r.rows_) + ", 1] or [" + std::to_string(r.rows_) + ", " +
                            std::to_string(per32) + "]");
  for (int b = 0; b < 256; ++b) r.fp8_[b] = fp8e4m3_to_float(static_cast<uint8_t>(b));
  r.scale_cols_ = s->shape[1];
  r.scale_bytes_ = static_cast<int64_t>(dtype_size(s->dtype));
  r.block_ = r.scale_cols_ == 1 ? static_cast<int>(r.dim_) : 32;
  RETURN_IF_ERROR(scales_to_float(*s, &r.scales_));
  return r;
}

int64_t EngramRows::row_bytes_in_place() const { return kind_ == Kind::kFp8 ? dim_ : row_bytes(); }

int64_t EngramRows::row_bytes() const {
  switch (kind_) {
    case Kind::kF32:
      return dim_ * 4;
    case Kind::kBF16:
    case Kind::kF16:
      return dim_ * 2;
    case Kind::kFp8:
      return dim_ + scale_cols_ * scale_bytes_;
  }
  return 0;
}

void EngramRows::gather(const int64_t* ids, int64_t n, float* out) const {
  // Rows are scattered over a table far larger than the caches: ask for all of them first, so
  // their misses overlap instead of queueing one after another.
  const int64_t stride = row_bytes_in_place();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < stride; b += 64) __builtin_prefetch(values_ + ids[i] * stride + b);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = ids[i];
    float* o = out + i * dim_;
    switch (kind_) {
      case Kind::kF32:
        std::memcpy(o, values_ + row * dim_ * 4, dim_ * 4);
        break;
      case Kind::kBF16:
      case Kind::kF16: {
        const uint8_t* v = values_ + row * dim_ * 2;
        for (int64_t d = 0; d < dim_; ++d) {
          uint16_t bits;
          std::memcpy(&bits, v + d * 2, 2);
          o[d] = kind_ == Kind::kBF16 ? bf16_to_float(bits) : f16_to_float(bits);
        }
        break;
      }
      case Kind::kFp8: {
        // A byte's value from the table, a block's scale once per block: a few ns per row
        // instead of a conversion call per value.
        const uint8_t* v = values_ + row * dim_;
        const float* sc = scales_.data() + row * scale_cols_;
        for (int64_t d0 = 0, b = 0; d0 < dim_; d0 += block_, ++b) {
          const int64_t end = std::min<int64_t>(dim_, d0 + block_);
          for (int64_t d = d0; d < end; ++d) o[d] = fp8_[v[d]] * sc[b];
        }
        break;
      }
    }
  }
}

}  // namespace deepinfer::v41
