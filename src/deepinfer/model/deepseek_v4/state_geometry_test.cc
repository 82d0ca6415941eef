#include "deepinfer/model/deepseek_v4/state_geometry.h"

#include <gtest/gtest.h>

#include "deepinfer/model/deepseek_v4/testing/flash_config.h"

namespace deepinfer::v4 {
namespace {

Config flash_config() { return v4::testing::flash_state_config(); }

// Expected numbers are the spec §7 table, worked by hand:
//   ring 128 x 512 x 2 B = 131,072 B/layer; x43 = 5,636,096 B (5.375 MiB, "≈5.4 MiB").
//   CSA compressed 512 x 2 / 4 = 256 B/token/layer, indexer keys 128 x 2 / 4 = 64,
//   HCA 512 x 2 / 128 = 8: 21 x 256 + 20 x 8 = 5,536 and 21 x 64 = 1,344; total 6,880 B/token.
//   Compressor state (FP32, kv & score): CSA 2 x 8 x 1024 x 4 = 65,536, CSA indexer
//   2 x 8 x 256 x 4 = 16,384, HCA 2 x 128 x 512 x 4 = 524,288:
//   21 x 81,920 + 20 x 524,288 = 12,206,080 B (11.64 MiB, "≈11.6 MiB").
TEST(StateGeometry, FlashBf16MatchesSpecSection7) {
  const StateGeometry g = state_geometry(flash_config(), 2);
  EXPECT_EQ(g.element_bytes, 2);
  EXPECT_EQ(g.page_tokens, 128);
  EXPECT_EQ(g.compressed_kv_bytes_per_token_x1000, 5'536'000);
  EXPECT_EQ(g.indexer_key_bytes_per_token_x1000, 1'344'000);
  EXPECT_EQ(g.bytes_per_token_x1000, 6'880'000);
  EXPECT_EQ(g.swa_ring_bytes, 5'636'096);
  EXPECT_EQ(g.mtp_ring_bytes, 131'072);
  EXPECT_EQ(g.compressor_state_bytes, 12'206'080);
  EXPECT_EQ(g.constant_bytes_per_seq, 17'973'248);
  // 128 x 6,880 = 880,640; 17,973,248 / 880,640 = 20.41 -> 21 pages.
  EXPECT_EQ(g.page_bytes, 880'640);
  EXPECT_EQ(g.constant_pages_per_seq, 21);
  // Spec: 7.2 GB of growing state at 1 M tokens (1,048,576 x 6,880 = 7,214,202,880), 8,192
  // whole pages.
  EXPECT_EQ((int64_t{1} << 20) / g.page_tokens * g.page_bytes, 7'214'202'880);
  EXPECT_EQ((int64_t{1} << 20) * g.bytes_per_token_x1000 / 1000, 7'214'202'880);
}

TEST(StateGeometry, FlashFp32DoublesKvButNotCompressorState) {
  const StateGeometry g = state_geometry(flash_config(), 4, 16);
  EXPECT_EQ(g.bytes_per_token_x1000, 13'760'000);
  EXPECT_EQ(g.swa_ring_bytes, 11'272'192);
  EXPECT_EQ(g.mtp_ring_bytes, 262'144);
  EXPECT_EQ(g.compressor_state_bytes, 12'206'080);
  EXPECT_EQ(g.page_bytes, 16 * 13'760);
  // 23,740,416 / 220,160 = 107.83 -> 108.
  EXPECT_EQ(g.constant_bytes_per_seq, 23'740'416);
  EXPECT_EQ(g.constant_pages_per_seq, 108);
}

// A small config like the embedded tiny model: layers {sliding, CSA r=4, HCA r=16} + MTP.
TEST(StateGeometry, SmallConfigByHand) {
  Config c;
  c.num_layers = 3;
  c.head_dim = 32;
  c.index_head_dim = 16;
  c.sliding_window = 8;
  c.num_mtp_layers = 1;
  c.compress_ratios = {0, 4, 16, 0};
  const StateGeometry g = state_geometry(c, 4, 16);
  EXPECT_EQ(g.swa_ring_bytes, 3 * 8 * 32 * 4);
  EXPECT_EQ(g.mtp_ring_bytes, 8 * 32 * 4);
  // CSA main 2 x 8 x 64 x 4 + indexer 2 x 8 x 32 x 4 + HCA 2 x 16 x 32 x 4.
  EXPECT_EQ(g.compressor_state_bytes, 4096 + 2048 + 4096);
  // CSA 32 x 4 / 4 = 32, indexer 16 x 4 / 4 = 16, HCA 32 x 4 / 16 = 8 bytes per token.
  EXPECT_EQ(g.compressed_kv_bytes_per_token_x1000, 40'000);
  EXPECT_EQ(g.indexer_key_bytes_per_token_x1000, 16'000);
  EXPECT_EQ(g.page_bytes, 16 * 56);
  // 14,336 = exactly 16 pages of 896: no rounding up at the boundary.
  EXPECT_EQ(g.constant_bytes_per_seq, 14'336);
  EXPECT_EQ(g.constant_pages_per_seq, 16);
}

// head_dim 48 bf16 at ratio 128: 96 / 128 = 0.75 B/token. Three tokens are 2.25 B -> 3.
TEST(StateGeometry, FractionalBytesPerTokenRoundUp) {
  Config c;
  c.num_layers = 1;
  c.head_dim = 48;
  c.sliding_window = 1;
  c.compress_ratios = {128};
  const StateGeometry g = state_geometry(c, 2, 3);
  EXPECT_EQ(g.bytes_per_token_x1000, 750);
  EXPECT_EQ(g.page_bytes, 3);
  EXPECT_EQ(g.indexer_key_bytes_per_token_x1000, 0);
}

}  // namespace
}  // namespace deepinfer::v4
