// The deepseek_v41 tensor manifest (what a V4.1 text checkpoint must hold) and fp32 weight loading,
// spec §11 and shared/golden_v41/README.md "Checkpoint tensor names".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/weights.h"  // v4::Weights, v4::LoadProgress
#include "deepinfer/model/deepseek_v41/config.h"

namespace deepinfer {
class Checkpoint;
struct TensorInfo;
}  // namespace deepinfer

namespace deepinfer::v41 {

// How a manifest entry may be stored. Every kind accepts F32/BF16/F16 in its logical shape.
enum class WeightKind {
  kFloat,        // float only (norms, sinks, mHC, router, embeddings, Engram q/k gains)
  kDense,        // also F8_E4M3 + `.scale` in config blocks (32x32 released), or 128x128 blocks
  kExpert,       // also F8_E4M3 block-scaled, or packed MXFP4 (I8/U8 [out, in/2] + E8M0 `.scale`)
  kEngramTable,  // also F8_E4M3 with per-row scales; its `engram.embed.scale` must always exist
};

struct WeightSpec {
  std::string name;            // canonical name (Checkpoint's: "layers.3.attn.wq_b.weight")
  std::vector<int64_t> shape;  // logical shape
  WeightKind kind;
};

// Every tensor a V4.1 text checkpoint of this config holds, in a stable order, by canonical name.
// The transformers save_pretrained spelling (`model.` prefix, `lm_head.weight`) maps onto these
// through loader/name_map.h. Per layer, from the roles in c.layers:
// - all layers: attention (wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, attn_sink), the two
//   norms, the MoE (gate weight/bias/bias_vl, routed and shared experts) and mHC (hc_{attn,ffn}_
//   {fn,base,scale});
// - KV sources: attn.compressor.{wkv, norm} (+ wgate when the ratio is > 1) and
//   attn.indexer.{wk, k_norm};
// - index sources (KV sources and Reindex layers): attn.indexer.{wq_b, weights_proj};
// - Engram layers: engram.{embed.weight, embed.scale, wkv.weight, q_weight, k_weight}.
// No hc_head, no compressor ape, no tid2eid, no vision tensors. head.weight is absent when
// tie_word_embeddings. with_draft appends dspark_weight_manifest(c).
std::vector<WeightSpec> weight_manifest(const Config& c, bool with_draft = false);

// The DSpark drafter's tensors (num_nextn_predict_layers stages, spec §11.2.9), empty without draft
// layers. Names follow DeepSeek's inference code as two independent ports read it (README
// "Weights"): per stage s, "mtp.{s}." + a V4.1 block (attention, norms, mHC, MoE with
// dspark_n_routed_experts experts and gate.bias, no bias_vl); stage 0 adds main_proj.weight
// [hidden, taps * hidden] and main_norm.weight; the last stage adds norm.weight,
// markov_head.{embed,head}.weight [vocab, markov_rank] and confidence_head.proj.weight
// [1, hidden + markov_rank] (no bias). The drafter shares embed.weight and head.weight.
std::vector<WeightSpec> dspark_weight_manifest(const Config& c);

// Whether the checkpoint holds any draft tensor (canonical name "mtp.…"). transformers'
// save_pretrained writes none (the golden_v41 fixtures count one draft layer and hold no draft
// tensor), so draft weights are all or nothing: none loads the target alone.
bool has_draft_weights(const Checkpoint& ckpt);
// Why drafting is off on a checkpoint that config.json says drafts but that holds no draft tensor
// (the CPU's DsparkDrafter::create and the GPU's forward say the same).
std::string no_draft_tensors_reason(const Config& c);

enum class WeightFormat {
  kFloat,     // F32/BF16/F16 as logically shaped
  kFp8Block,  // F8_E4M3 + block `.scale` (block_rows x block_cols)
  kMxfp4,     // packed FP4 [out, in/2] + E8M0 `.scale` per 32 elements
};

// Where a manifest entry lives in a checkpoint and how it is stored; the TensorInfo pointers live
// as long as the Checkpoint.
struct WeightSource {
  WeightSpec spec;
  const TensorInfo* tensor = nullptr;
  const TensorInfo* scale = nullptr;  // quantized formats; the Engram table's (even if float)
  WeightFormat format = WeightFormat::kFloat;
  int block_rows = 0, block_cols = 0;  // kFp8Block
  int64_t numel() const;               // logical
  int64_t stored_bytes() const;        // the tensor and its scale as stored
};

// Validates the checkpoint against the manifest without reading tensor data: missing tensors,
// unexpected tensors, shapes, dtypes, missing or mis-shaped `.scale`. One source per manifest
// entry, in manifest order; the draft tensors are part of it when the config has draft layers and
// has_draft_weights(ckpt). Errors name the tensor (as stored) and its file.
StatusOr<std::vector<WeightSource>> resolve_weights(const Checkpoint& ckpt, const Config& c);

// One source's values as fp32 (numel floats). A float-stored Engram table ignores its scale
// (transformers does not apply it in fp32; the fixtures' are all ones).
Status load_float(const WeightSource& src, float* out);

// resolve_weights, then every tensor but the Engram tables dequantized to fp32, keyed by
// canonical name. The Engram tables and scales are validated but stay in the checkpoint
// (EngramRows reads them in place). With tie_word_embeddings, head.weight is a copy of
// embed.weight. `keep` (null: all) picks the tensors loaded (an expert-parallel rank's share).
StatusOr<v4::Weights> load_weights(
    const Checkpoint& ckpt, const Config& c,
    const std::function<void(const v4::LoadProgress&)>& progress = {},
    const std::function<bool(const std::string&)>& keep = {});

}  // namespace deepinfer::v41
