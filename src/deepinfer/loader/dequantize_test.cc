#include "deepinfer/loader/dequantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace deepinfer {
namespace {

// A TensorInfo over bytes the test owns.
struct Owned {
  std::vector<uint8_t> bytes;
  TensorInfo info;
};

Owned make(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes,
           size_t misalign = 0) {
  Owned o;
  o.bytes.assign(misalign, 0xee);
  o.bytes.insert(o.bytes.end(), bytes.begin(), bytes.end());
  o.info.name = std::move(name);
  o.info.dtype = dtype;
  o.info.shape = std::move(shape);
  o.info.data = o.bytes.data() + misalign;
  o.info.nbytes = bytes.size();
  o.info.file = "test.safetensors";
  return o;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(ToFloat, Bf16F16F32) {
  // Little-endian: bf16 0x3f80 = 1, 0xc040 = -3, 0x0001 = 2^-133; misaligned on purpose.
  Owned bf = make("a", DType::kBF16, {3}, {0x80, 0x3f, 0x40, 0xc0, 0x01, 0x00}, 1);
  std::vector<float> out(3);
  ASSERT_TRUE(to_float(bf.info, out.data()).ok());
  EXPECT_EQ(out, (std::vector<float>{1.0f, -3.0f, std::ldexp(1.0f, -133)}));

  Owned h = make("b", DType::kF16, {1, 2}, {0x00, 0x3c, 0x55, 0x35}, 1);
  ASSERT_TRUE(to_float(h.info, out.data()).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 0.333251953125f);

  Owned f = make("c", DType::kF32, {2}, f32_bytes({2.5f, -7.0f}), 3);
  ASSERT_TRUE(to_float(f.info, out.data()).ok());
  EXPECT_EQ(out[0], 2.5f);
  EXPECT_EQ(out[1], -7.0f);
}

TEST(ToFloat, RejectsOtherDtypesNamingTheTensor) {
  Owned t = make("layers.0.ffn.gate.tid2eid", DType::kI8, {2}, {1, 2});
  std::vector<float> out(2);
  Status st = to_float(t.info, out.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("layers.0.ffn.gate.tid2eid"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("test.safetensors"), std::string::npos) << st.message();
  Owned short_bytes = make("s", DType::kF32, {2}, {0, 0, 0, 0});
  EXPECT_EQ(to_float(short_bytes.info, out.data()).code(), StatusCode::kInvalidArgument);
}

// w [3, 5] FP8 in 2x2 blocks -> scale [2, 3]. Decoded weights (E4M3FN by hand):
//   row0: 0x38=1   0x3c=1.5  0xb8=-1   0x01=2^-9  0x7e=448
//   row1: 0x40=2   0x00=0    0x30=0.5  0x44=3     0xc0=-2
//   row2: 0x48=4   0x39=1.125 0x08=2^-6 0x80=-0   0x3a=1.25
const std::vector<uint8_t> kW = {0x38, 0x3c, 0xb8, 0x01, 0x7e, 0x40, 0x00, 0x30,
                                 0x44, 0xc0, 0x48, 0x39, 0x08, 0x80, 0x3a};

TEST(DequantizeFp8, E8M0ScalesOnPartialBlocks) {
  Owned w = make("attn.wq_a.weight", DType::kF8E4M3, {3, 5}, kW);
  // scale = [[1, 2, 0.5], [4, 0.25, 8]]
  Owned s = make("attn.wq_a.scale", DType::kF8E8M0, {2, 3}, {127, 128, 126, 129, 125, 130});
  std::vector<float> out(15);
  ASSERT_TRUE(dequantize_fp8_block(w.info, s.info, 2, 2, out.data()).ok());
  const std::vector<float> want = {1,  1.5f, -2,          0.00390625f, 224,  // row0
                                   2,  0,    1,           6,           -1,   // row1
                                   16, 4.5f, 0.00390625f, -0.0f,       10};
  EXPECT_EQ(out, want);
  EXPECT_TRUE(std::signbit(out[13]));
}

TEST(DequantizeFp8, F32AndBf16Scales) {
  Owned w = make("w", DType::kF8E4M3, {3, 5}, kW);
  Owned s32 = make("w.scale", DType::kF32, {2, 3}, f32_bytes({1, 2, 0.5f, 4, 0.25f, 3}));
  std::vector<float> out(15);
  ASSERT_TRUE(dequantize_fp8_block(w.info, s32.info, 2, 2, out.data()).ok());
  EXPECT_EQ(out[4], 224.0f);
  EXPECT_EQ(out[14], 3.75f);  // 1.25 * 3
  // bf16 1, 2, 0.5, 4, 0.25, 3 = 0x3f80 0x4000 0x3f00 0x4080 0x3e80 0x4040
  Owned s16 = make("w.scale", DType::kBF16, {2, 3},
                   {0x80, 0x3f, 0x00, 0x40, 0x00, 0x3f, 0x80, 0x40, 0x80, 0x3e, 0x40, 0x40});
  std::vector<float> out16(15);
  ASSERT_TRUE(dequantize_fp8_block(w.info, s16.info, 2, 2, out16.data()).ok());
  EXPECT_EQ(out16, out);
}

TEST(DequantizeFp8, NonMultipleOf128) {
  // [130, 129] of 0x40 (= 2.0) with 128x128 blocks -> scale [2, 2] = [[1, 2], [4, 8]].
  Owned w = make("w", DType::kF8E4M3, {130, 129}, std::vector<uint8_t>(130 * 129, 0x40));
  Owned s = make("w.scale", DType::kF8E8M0, {2, 2}, {127, 128, 129, 130});
  std::vector<float> out(130 * 129);
  ASSERT_TRUE(dequantize_fp8_block(w.info, s.info, 128, 128, out.data()).ok());
  auto at = [&](int r, int c) { return out[r * 129 + c]; };
  EXPECT_EQ(at(0, 0), 2.0f);
  EXPECT_EQ(at(127, 127), 2.0f);
  EXPECT_EQ(at(0, 128), 4.0f);
  EXPECT_EQ(at(127, 128), 4.0f);
  EXPECT_EQ(at(128, 0), 8.0f);
  EXPECT_EQ(at(129, 127), 8.0f);
  EXPECT_EQ(at(129, 128), 16.0f);
}

TEST(DequantizeFp8, ValidatesShapesAndDtypes) {
  Owned w = make("layers.1.attn.wkv.weight", DType::kF8E4M3, {3, 5}, kW);
  Owned bad = make("layers.1.attn.wkv.scale", DType::kF8E8M0, {1, 3}, {127, 127, 127});
  std::vector<float> out(15);
  Status st = dequantize_fp8_block(w.info, bad.info, 2, 2, out.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("layers.1.attn.wkv.weight"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("layers.1.attn.wkv.scale"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[2, 3]"), std::string::npos) << st.message();

  Owned s = make("s", DType::kF8E8M0, {2, 3}, std::vector<uint8_t>(6, 127));
  Owned not_fp8 = make("w16", DType::kBF16, {3, 5}, std::vector<uint8_t>(30, 0));
  EXPECT_EQ(dequantize_fp8_block(not_fp8.info, s.info, 2, 2, out.data()).code(),
            StatusCode::kInvalidArgument);
  Owned i8_scale = make("s8", DType::kI8, {2, 3}, std::vector<uint8_t>(6, 0));
  EXPECT_EQ(dequantize_fp8_block(w.info, i8_scale.info, 2, 2, out.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dequantize_fp8_block(w.info, s.info, 0, 2, out.data()).code(),
            StatusCode::kInvalidArgument);
}

// w [2, 32] bytes -> logical [2, 64]; scale [2, 2] E8M0.
//   row0: byte0 0x21 -> e0 = code 1 = 0.5, e1 = code 2 = 1; byte1 0xF7 -> e2 = 6, e3 = code F = -6;
//         byte15 0x3C -> e30 = code C = -2, e31 = code 3 = 1.5; byte16 0x9A -> e32 = -1, e33 =
//         -0.5. scales 127, 129: x1 for e0..31, x4 for e32..63.
//   row1: byte0 0x46 -> e0 = 4, e1 = 2; byte31 0x5E -> e62 = code E = -4, e63 = code 5 = 3.
//         scales 126, 128: x0.5, x2.
std::vector<uint8_t> fp4_bytes() {
  std::vector<uint8_t> b(64, 0);
  b[0] = 0x21;
  b[1] = 0xF7;
  b[15] = 0x3C;
  b[16] = 0x9A;
  b[32 + 0] = 0x46;
  b[32 + 31] = 0x5E;
  return b;
}

std::vector<float> fp4_expected() {
  std::vector<float> e(128, 0.0f);
  e[0] = 0.5f;
  e[1] = 1.0f;
  e[2] = 6.0f;
  e[3] = -6.0f;
  e[30] = -2.0f;
  e[31] = 1.5f;
  e[32] = -4.0f;
  e[33] = -2.0f;
  e[64 + 0] = 2.0f;
  e[64 + 1] = 1.0f;
  e[64 + 62] = -8.0f;
  e[64 + 63] = 6.0f;
  return e;
}

TEST(DequantizeMxfp4, NibbleOrderAndBlockScales) {
  for (DType dt : {DType::kI8, DType::kU8}) {
    Owned w = make("ffn.experts.0.w1.weight", dt, {2, 32}, fp4_bytes());
    Owned s = make("ffn.experts.0.w1.scale", DType::kF8E8M0, {2, 2}, {127, 129, 126, 128});
    std::vector<float> out(128, 99.0f);
    ASSERT_TRUE(dequantize_mxfp4(w.info, s.info, out.data()).ok());
    EXPECT_EQ(out, fp4_expected()) << dtype_name(dt);
  }
}

TEST(DequantizeMxfp4, ValidatesShapesAndDtypes) {
  Owned w = make("ffn.experts.3.w2.weight", DType::kI8, {2, 32}, fp4_bytes());
  Owned bad = make("ffn.experts.3.w2.scale", DType::kF8E8M0, {2, 1}, {127, 127});
  std::vector<float> out(128);
  Status st = dequantize_mxfp4(w.info, bad.info, out.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ffn.experts.3.w2.scale"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[2, 2]"), std::string::npos) << st.message();
  Owned f32_scale = make("s", DType::kF32, {2, 2}, std::vector<uint8_t>(16, 0));
  EXPECT_EQ(dequantize_mxfp4(w.info, f32_scale.info, out.data()).code(),
            StatusCode::kInvalidArgument);
  Owned fp8_w = make("w8", DType::kF8E4M3, {2, 32}, fp4_bytes());
  Owned s = make("s", DType::kF8E8M0, {2, 2}, {127, 127, 127, 127});
  EXPECT_EQ(dequantize_mxfp4(fp8_w.info, s.info, out.data()).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
