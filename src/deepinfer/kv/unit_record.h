// One prefix-cache unit as the tiers below the device store it: the growing-state page of one
// block of page_tokens tokens and, at persistence points, a snapshot of the sequence's constant
// pages (sliding-window rings, compressor windows) at the block's end. Bytes are in the runner's
// page layout (ModelRunner::read_pages); the fingerprint in the key chain pins that layout.
#pragma once

#include <cstdint>
#include <string>

#include "deepinfer/kv/unit_key.h"

namespace deepinfer::kv {

// How long a unit lives after its last store or hit: DeepSeek's service keeps agent traffic
// 3 days and chat 7 days. kNone: the request reads the cache but stores nothing.
enum class Retention : uint8_t { kNone = 0, kAgent = 1, kChat = 2 };

struct UnitRecord {
  UnitKey key;
  UnitKey parent;            // zero for a sequence's first block
  int64_t end_tokens = 0;    // the prefix length the unit completes (a multiple of page_tokens)
  std::string page;          // the block's growing-state page (page_bytes)
  std::string snapshot;      // empty, or the constant pages at end_tokens, page after page
  int64_t expires_at_s = 0;  // unix seconds
  Retention retention = Retention::kChat;

  bool has_snapshot() const { return !snapshot.empty(); }
  int64_t bytes() const { return static_cast<int64_t>(page.size() + snapshot.size()); }
};

}  // namespace deepinfer::kv
