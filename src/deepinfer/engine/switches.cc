#include "deepinfer/engine/switches.h"

#include <cstdlib>
#include <string>

namespace deepinfer {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

StatusOr<bool> env_bool(const char* name) {
  const char* v = env(name);
  if (v == nullptr) return false;
  const std::string s(v);
  if (s == "1" || s == "true") return true;
  if (s == "0" || s == "false") return false;
  return invalid_argument(std::string(name) + " must be 1 or 0, got '" + s + "'");
}

}  // namespace

StatusOr<YocoMode> parse_yoco_mode(std::string_view s) {
  if (s == "off" || s.empty()) return YocoMode::kOff;
  if (s == "compact") return YocoMode::kCompact;
  return invalid_argument("must be off or compact, got '" + std::string(s) + "'");
}

StatusOr<Switches> resolve_switches(const SwitchArgs& given) {
  Switches out;
  if (given.batch_invariant) {
    out.batch_invariant = *given.batch_invariant;
  } else {
    ASSIGN_OR_RETURN(out.batch_invariant, env_bool("DEEPINFER_BATCH_INVARIANT"));
  }
  YocoMode mode = YocoMode::kOff;
  if (given.yoco_mode) {
    mode = *given.yoco_mode;
  } else if (const char* v = env("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE")) {
    StatusOr<YocoMode> m = parse_yoco_mode(v);
    if (!m.ok())
      return invalid_argument("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE " + m.status().message());
    mode = *m;
  }
  int64_t keep = kDefaultYocoKeepTokens;
  if (given.yoco_keep_tokens) {
    keep = *given.yoco_keep_tokens;
    if (keep < 1)
      return invalid_argument("yoco_prefill_keep_tokens must be at least 1, got " +
                              std::to_string(keep));
  } else if (const char* v = env("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS")) {
    char* end = nullptr;
    const long long k = std::strtoll(v, &end, 10);
    if (*end != '\0' || k < 1)
      return invalid_argument(
          std::string("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS must be a positive integer, got '") + v +
          "'");
    keep = k;
  }
  out.yoco_keep_tokens = mode == YocoMode::kCompact ? keep : 0;
  if (given.enable_mtp) {
    out.enable_mtp = *given.enable_mtp;
  } else {
    ASSIGN_OR_RETURN(out.enable_mtp, env_bool("DEEPINFER_ENABLE_MTP_VARLEN"));
  }
  if (given.nextn_decode) {
    out.nextn_decode = *given.nextn_decode;
    if (out.nextn_decode < 1)
      return invalid_argument("num_speculative_tokens must be at least 1, got " +
                              std::to_string(out.nextn_decode));
  } else if (const char* v = env("DEEPINFER_USE_NEXTN_DECODE")) {
    char* end = nullptr;
    const long long k = std::strtoll(v, &end, 10);
    if (*end != '\0' || k < 1)
      return invalid_argument(
          std::string("DEEPINFER_USE_NEXTN_DECODE must be a positive integer, got '") + v + "'");
    out.nextn_decode = k;
  }
  return out;
}

}  // namespace deepinfer
