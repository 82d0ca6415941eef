// DeepSeek's engine switches (DESIGN.md's table) that this engine implements so far: batch
// invariance and YOCO prefill truncation. Each is an EngineArgs field (a CLI flag, a Python
// argument); left unset there, its DEEPINFER_* environment variable decides, else it is off.
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

struct SwitchArgs {
  std::optional<bool> batch_invariant;      // DEEPINFER_BATCH_INVARIANT=1
  std::optional<YocoMode> yoco_mode;        // DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE
  std::optional<int64_t> yoco_keep_tokens;  // DEEPINFER_YOCO_PREFILL_KEEP_TOKENS
};

struct Switches {
  bool batch_invariant = false;
  // Prefill positions before the last yoco_keep_tokens of the known tokens skip the work that
  // feeds nothing cached; 0: truncation off.
  int64_t yoco_keep_tokens = 0;
};

// Given fields win over the environment. Errors name the variable or the field.
StatusOr<Switches> resolve_switches(const SwitchArgs& given);

}  // namespace deepinfer
