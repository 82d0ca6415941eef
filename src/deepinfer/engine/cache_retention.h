#pragma once
// A request's prefix-cache retention class, apart from the engine so that request parsing (and
// its fuzzer) can name it without linking the engine.
#include <optional>
#include <string_view>

#include "deepinfer/kv/unit_record.h"

namespace deepinfer {

// How long the state a request leaves in the prefix cache is kept: DeepSeek's service keeps
// agent traffic 3 days and chat 7 days. kDefault: agent for a chat request with tools, chat
// otherwise. kNone: the request may hit the cache but stores nothing.
enum class CacheRetention { kDefault, kAgent, kChat, kNone };
// "agent" | "chat" | "none" (the API's cache_retention); nullopt for anything else.
std::optional<CacheRetention> parse_cache_retention(std::string_view s);
// The class a request's units are stored under: `given`, or for kDefault agent when the chat
// request has tools (has_tools), else chat.
kv::Retention retention_of(CacheRetention given, bool has_tools);

}  // namespace deepinfer
