#include "deepinfer/engine/cache_retention.h"

namespace deepinfer {

std::optional<CacheRetention> parse_cache_retention(std::string_view s) {
  if (s == "agent") return CacheRetention::kAgent;
  if (s == "chat") return CacheRetention::kChat;
  if (s == "none") return CacheRetention::kNone;
  return std::nullopt;
}

}  // namespace deepinfer
