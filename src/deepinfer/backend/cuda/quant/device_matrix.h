// A projection weight on the device in the format the checkpoint stores it (spec §3.3, §3.4), so
// the device holds about the checkpoint's bytes: bf16, FP8 E4M3 with a block scale per
// block_rows x block_cols tile, or MXFP4 (packed E2M1 nibbles, an E8M0 scale per 32 along a row).
// Logical shape [rows, cols] = [out, in], row-major. A plain view: it owns nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace deepinfer::cuda {

enum class MatrixFormat : uint8_t { kBf16, kFp8Block, kMxfp4 };

// Whether every value of s[0 .. n) is a positive power of two, normal or subnormal (what
// DeviceMatrix::pow2_scales promises; E8M0 scales are, but 255's NaN).
inline bool powers_of_two(const float* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &s[i], sizeof bits);
    const uint32_t e = bits >> 23, m = bits & 0x7fffffu;  // e includes the sign bit
    if (e == 0 ? (m == 0 || (m & (m - 1)) != 0) : (e >= 255 || m != 0)) return false;
  }
  return true;
}

struct DeviceMatrix {
  MatrixFormat format = MatrixFormat::kBf16;
  // kBf16: bf16 [rows, cols]; kFp8Block: E4M3 bytes [rows, cols]; kMxfp4: bytes [rows, cols / 2],
  // the even element in the low nibble.
  const void* data = nullptr;
  // kFp8Block: fp32 [ceil(rows_total / block_rows), ceil(cols / block_cols)], indexed by the row
  // counted from the scale grid's first row: row0 + r.
  const float* block_scale = nullptr;
  const uint8_t* mx_scale = nullptr;  // kMxfp4: E8M0 [rows, cols / 32]
  int64_t rows = 0, cols = 0;
  int64_t row0 = 0;  // kFp8Block: this view's first row within the scale grid
  int block_rows = 0, block_cols = 0;
  // kFp8Block: every block scale is a normal or subnormal power of two (the checkpoints' E8M0),
  // so a kernel may fold a scale into an exact bf16 multiply (gemm/fp8_gemv_mma.h).
  bool pow2_scales = false;

  explicit operator bool() const { return data != nullptr; }

  // Elements per 16-byte load of one row.
  static constexpr int per_load(MatrixFormat f) {
    return f == MatrixFormat::kBf16 ? 8 : f == MatrixFormat::kFp8Block ? 16 : 32;
  }

  // Whether weight_rows.cuh can read every row in whole 16-byte loads: cols a multiple of
  // per_load(format), 16-byte aligned data, and for FP8 each load inside one scale block.
  bool reads_in_vectors() const {
    if (!data || cols % per_load(format) != 0) return false;
    if (reinterpret_cast<uintptr_t>(data) % 16 != 0) return false;
    return format != MatrixFormat::kFp8Block || block_cols % 16 == 0;
  }

  // Rows [r0, r0 + n) as a matrix of its own.
  DeviceMatrix row_slice(int64_t r0, int64_t n) const {
    if (r0 < 0 || n < 0 || r0 + n > rows) {
      std::fprintf(stderr, "DeviceMatrix::row_slice: rows [%lld, %lld) outside [0, %lld)\n",
                   static_cast<long long>(r0), static_cast<long long>(r0 + n),
                   static_cast<long long>(rows));
      std::abort();
    }
    DeviceMatrix m = *this;
    const auto* base = static_cast<const uint8_t*>(data);
    switch (format) {
      case MatrixFormat::kBf16:
        m.data = base + r0 * cols * 2;
        break;
      case MatrixFormat::kFp8Block:
        m.data = base + r0 * cols;
        m.row0 = row0 + r0;
        break;
      case MatrixFormat::kMxfp4:
        m.data = base + r0 * (cols / 2);
        m.mx_scale = mx_scale + r0 * (cols / 32);
        break;
    }
    m.rows = n;
    return m;
  }

  // Bytes of the weight and its scales (a row slice counts its own rows' share).
  int64_t bytes() const {
    switch (format) {
      case MatrixFormat::kBf16:
        return rows * cols * 2;
      case MatrixFormat::kFp8Block:
        return rows * cols +
               4 * ((rows + block_rows - 1) / block_rows) * ((cols + block_cols - 1) / block_cols);
      case MatrixFormat::kMxfp4:
        return rows * (cols / 2) + rows * (cols / 32);
    }
    return 0;
  }
};

}  // namespace deepinfer::cuda
