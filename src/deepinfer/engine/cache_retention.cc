#include "deepinfer/engine/cache_retention.h"

namespace deepinfer {

std::optional<CacheRetention> parse_cache_retention(std::string_view s) {
  if (s == "agent") return CacheRetention::kAgent;
  if (s == "chat") return CacheRetention::kChat;
  if (s == "none") return CacheRetention::kNone;
  return std::nullopt;
}

kv::Retention retention_of(CacheRetention given, bool has_tools) {
  switch (given) {
    case CacheRetention::kAgent:
      return kv::Retention::kAgent;
    case CacheRetention::kChat:
      return kv::Retention::kChat;
    case CacheRetention::kNone:
      return kv::Retention::kNone;
    case CacheRetention::kDefault:
      break;
  }
  return has_tools ? kv::Retention::kAgent : kv::Retention::kChat;
}

}  // namespace deepinfer
