// Element types of checkpoint tensors and exact scalar conversions between them and fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "deepinfer/base/status.h"

namespace deepinfer {

// The dtypes a DeepSeek-V4 checkpoint uses (safetensors spelling in dtype_name()).
// Packed FP4 has no dtype of its own: it is stored as I8/U8 bytes (two E2M1 nibbles each).
enum class DType { kF32, kBF16, kF16, kF8E4M3, kF8E8M0, kI64, kI32, kI16, kI8, kU8, kBool };

size_t dtype_size(DType dtype);       // bytes per element
const char* dtype_name(DType dtype);  // "F32","BF16","F16","F8_E4M3","F8_E8M0","I64",...
// invalid_argument for any name outside the enum (including valid safetensors dtypes we do not
// support, e.g. F64 or F8_E5M2).
StatusOr<DType> parse_dtype(std::string_view safetensors_name);

// bfloat16: round-to-nearest-even; NaN stays a (quiet) NaN with its sign.
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float x);
float round_to_bf16(float x);  // bf16_to_float(float_to_bf16(x))

// IEEE binary16: round-to-nearest-even, overflow to +-inf, NaN stays NaN.
float f16_to_float(uint16_t bits);
uint16_t float_to_f16(float x);

// OCP FP8 E4M3FN (bias 7, no inf, NaN = S.1111.111, max 448). Encoding rounds to nearest even
// and saturates finite and infinite values to +-448, as torch's .to(float8_e4m3fn) does after
// the clamp the reference always applies. NaN encodes as 0x7f.
float fp8e4m3_to_float(uint8_t bits);
uint8_t float_to_fp8e4m3(float x);

// E8M0 scale byte: 2^(b-127); 255 is NaN.
float e8m0_to_float(uint8_t bits);
// Exponent byte of a power of two. A positive value that is not a power of two rounds up to the
// next one (the reference's ceil-log2 scale rule); exponents clamp to [-127, 127]; values <= 0,
// inf and NaN give 255 (NaN).
uint8_t float_to_e8m0_pow2(float x);

// FP4 E2M1 nibble: bit 3 sign, magnitude code 0..7 -> {0, .5, 1, 1.5, 2, 3, 4, 6}.
float fp4e2m1_to_float(uint8_t nibble);  // only the low 4 bits are read
// Nearest E2M1 value, ties to the even code, clamped to +-6; the sign bit follows the input's
// sign (so -0.1 -> 0x8, negative zero). NaN has no encoding and gives 0x0.
uint8_t float_to_fp4e2m1(float x);

}  // namespace deepinfer
