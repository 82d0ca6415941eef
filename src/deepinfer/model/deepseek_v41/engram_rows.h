// An Engram table kept as the checkpoint stores it (spec §11.2.7: ~100 GB of F8_E4M3 rows with
// E8M0 scales per row or per 32 channels, per Engram layer), read in place from the mapped
// shard: a token's rows are gathered and dequantized on demand instead of expanding the whole
// table to fp32 (which would need ~400 GB per table). Float tables (tiny test models) are read
// in place too. Thread-safe: gather only reads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/checkpoint.h"

namespace deepinfer::v41 {

class EngramRows {
 public:
  // `table` (e.g. "layers.1.engram.embed.weight") and its ".scale" sibling from ckpt, which must
  // outlive this. Errors name the tensor and the file.
  static StatusOr<EngramRows> open(const Checkpoint& ckpt, const std::string& table);

  int64_t num_rows() const { return rows_; }
  int64_t dim() const { return dim_; }
  // Bytes read per gathered row (values + scales), for the cost model.
  int64_t row_bytes() const;

  // out[i] = row ids[i] as dim_ floats. Ids must lie in [0, num_rows()) (the hasher's).
  void gather(const int64_t* ids, int64_t n, float* out) const;

 private:
  enum class Kind { kF32, kBF16, kF16, kFp8 };
  int64_t row_bytes_in_place() const;  // one row's values in the mapped table
  const uint8_t* values_ = nullptr;
  Kind kind_ = Kind::kF32;
  int64_t rows_ = 0, dim_ = 0;
  std::vector<float> scales_;     // fp8: [rows, scale_cols] as fp32 (small: 1/32 of the table)
  int64_t scale_cols_ = 0;        // 1 (per row) or ceil(dim / 32)
  int64_t scale_bytes_ = 0;       // per scale on disk (E8M0: 1)
  int block_ = 0;                 // channels per scale
  std::array<float, 256> fp8_{};  // E4M3 byte -> value
};

}  // namespace deepinfer::v41
