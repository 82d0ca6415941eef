#include "deepinfer/kv/unit_key.h"

#include <gtest/gtest.h>

namespace deepinfer::kv {
namespace {

// Expected digests from Python's hashlib (an independent SHA-256):
//   sha256(b'deepinfer-prefix-v1' + b'model-a')
//   sha256(<that digest> + struct.pack('<4i', 1, 2, 3, -5))
TEST(UnitKey, MatchesAnIndependentSha256) {
  const UnitKey root = root_key("model-a");
  EXPECT_EQ(root.hex(), "f7d709ebd9f72544c0291a03124a007bf79352ca7a039ea310889df6c97f1eeb");
  const std::vector<int32_t> t = {1, 2, 3, -5};
  EXPECT_EQ(next_key(root, t).hex(),
            "b1f3535608d83a3dc874405ca47a41f8bc43c4cdca3ac014c384ea36f79f337b");
}

TEST(UnitKey, ChainDependsOnEveryEarlierTokenAndTheFingerprint) {
  std::vector<int32_t> a(12), b(12);
  for (int i = 0; i < 12; ++i) a[i] = b[i] = i;
  b[1] = 99;  // first block differs
  const UnitKey r = root_key("m");
  const auto ka = chain_keys(r, a, 4, 3), kb = chain_keys(r, b, 4, 3);
  ASSERT_EQ(ka.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NE(ka[i], kb[i]) << i;  // later blocks equal, keys not
  EXPECT_EQ(ka[2],
            next_key(next_key(next_key(r, {a.data(), 4}), {a.data() + 4, 4}), {a.data() + 8, 4}));
  EXPECT_NE(chain_keys(root_key("other model"), a, 4, 1)[0], ka[0]);
  EXPECT_TRUE(chain_keys(r, a, 4, 0).empty());
}

TEST(UnitKey, HexRoundTripsAndRejectsMalformed) {
  const UnitKey k = root_key("x");
  EXPECT_EQ(UnitKey::from_hex(k.hex()), k);
  EXPECT_FALSE(UnitKey::from_hex("abc").has_value());
  EXPECT_FALSE(UnitKey::from_hex(std::string(63, 'a') + "g").has_value());
  EXPECT_TRUE(UnitKey{}.is_zero());
  EXPECT_FALSE(k.is_zero());
}

}  // namespace
}  // namespace deepinfer::kv
