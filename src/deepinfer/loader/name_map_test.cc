#include "deepinfer/loader/name_map.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

TEST(NameMap, HubNamesAreCanonicalAlready) {
  for (const char* n :
       {"embed.weight", "head.weight", "norm.weight", "hc_head_fn", "layers.3.attn.wq_a.weight",
        "layers.3.attn.wq_a.scale", "layers.3.attn.kv_norm.weight", "layers.3.attn_norm.weight",
        "layers.2.attn.compressor.norm.weight", "layers.2.attn.indexer.compressor.norm.weight",
        "layers.9.ffn.experts.17.w2.scale", "mtp.0.attn.kv_norm.weight"}) {
    EXPECT_EQ(canonical_tensor_name(n), n);
  }
}

TEST(NameMap, TransformersSpelling) {
  EXPECT_EQ(canonical_tensor_name("model.layers.3.attn.wq_a.weight"), "layers.3.attn.wq_a.weight");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.attn.norm.weight"),
            "layers.3.attn.kv_norm.weight");
  EXPECT_EQ(canonical_tensor_name("layers.3.attn.norm.weight"), "layers.3.attn.kv_norm.weight");
  EXPECT_EQ(canonical_tensor_name("model.mtp.0.attn.norm.weight"), "mtp.0.attn.kv_norm.weight");
  EXPECT_EQ(canonical_tensor_name("model.embed_tokens.weight"), "embed.weight");
  EXPECT_EQ(canonical_tensor_name("lm_head.weight"), "head.weight");
  EXPECT_EQ(canonical_tensor_name("model.hc_head.hc_fn"), "hc_head_fn");
  EXPECT_EQ(canonical_tensor_name("model.hc_head.hc_base"), "hc_head_base");
  EXPECT_EQ(canonical_tensor_name("model.hc_head.hc_scale"), "hc_head_scale");
  EXPECT_EQ(canonical_tensor_name("model.norm.weight"), "norm.weight");
}

TEST(NameMap, OnlyWholeComponentsAndOnlyALeadingPrefix) {
  EXPECT_EQ(canonical_tensor_name("layers.0.xattn.norm.weight"), "layers.0.xattn.norm.weight");
  EXPECT_EQ(canonical_tensor_name("layers.0.model.w"), "layers.0.model.w");
  EXPECT_EQ(canonical_tensor_name("modelx.w"), "modelx.w");
  // Idempotent.
  EXPECT_EQ(canonical_tensor_name(canonical_tensor_name("model.layers.1.attn.norm.weight")),
            "layers.1.attn.kv_norm.weight");
}

}  // namespace
}  // namespace deepinfer
