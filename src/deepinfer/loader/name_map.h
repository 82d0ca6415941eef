// On-disk tensor names -> canonical (Hub checkpoint, bare) names, spec §3.1.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer {

// Canonical spelling is the Hub's: "embed.weight", "layers.3.attn.kv_norm.weight", "mtp.0.…".
// Maps the transformers save_pretrained spelling onto it: strips a leading "model.", renames the
// component run "attn.norm." to "attn.kv_norm.", and renames a few whole names (lm_head,
// embed_tokens, hc_head.*). Idempotent on canonical names.
std::string canonical_tensor_name(std::string_view on_disk_name);

}  // namespace deepinfer
