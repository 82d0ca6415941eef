// DeepSeek's engine switches (DESIGN.md's table) that this engine implements so far: batch
// invariance, YOCO prefill truncation and MTP speculative decoding (CPU runner). Each is an
// EngineArgs field (a CLI flag, a Python argument); left unset there, its DEEPINFER_* environment
// variable decides, else it is off.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "deepinfer/base/status.h"

namespace deepinfer {

// DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE: "off" (or unset) | "compact".
enum class YocoMode { kOff, kCompact };
StatusOr<YocoMode> parse_yoco_mode(std::string_view s);

// The defaults DeepSeek's engine documents.
inline constexpr int64_t kDefaultYocoKeepTokens = 140;
inline constexpr int64_t kDefaultNextnDecode = 5;

struct SwitchArgs {
  std::optional<bool> batch_invariant;      // DEEPINFER_BATCH_INVARIANT=1
  std::optional<YocoMode> yoco_mode;        // DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE
  std::optional<int64_t> yoco_keep_tokens;  // DEEPINFER_YOCO_PREFILL_KEEP_TOKENS
  std::optional<bool> enable_mtp;           // DEEPINFER_ENABLE_MTP_VARLEN=1
  std::optional<int64_t> nextn_decode;      // DEEPINFER_USE_NEXTN_DECODE: draft length cap
};

struct Switches {
  bool batch_invariant = false;
  // Prefill positions before the last yoco_keep_tokens of the known tokens skip the work that
  // feeds nothing cached; 0: truncation off.
  int64_t yoco_keep_tokens = 0;
  // Speculative decoding with the model's MTP layer, at most nextn_decode drafts per step.
  bool enable_mtp = false;
  int64_t nextn_decode = kDefaultNextnDecode;
};

// Given fields win over the environment. Errors name the variable or the field.
StatusOr<Switches> resolve_switches(const SwitchArgs& given);

}  // namespace deepinfer
