// A prefill worker's parked sequence states: each handoff waits here, in host memory, until a
// decode worker fetches it (then it is erased) or its time to live runs out. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "deepinfer/base/clock.h"
#include "deepinfer/base/status.h"

namespace deepinfer::disagg {

struct Handoff {
  std::string meta;     // the engine's JSON header
  std::string payload;  // the page bytes (none when they stay on the device: CUDA IPC)
  // What must live while the handoff is parked or being fetched: a CUDA IPC state's device
  // buffer, which the decode worker maps before it says DONE.
  std::shared_ptr<void> keep;
  int64_t expires_at_s = 0;
  int64_t bytes() const { return static_cast<int64_t>(meta.size() + payload.size()); }
};

struct HandoffStoreOptions {
  int64_t capacity_bytes = int64_t{8} << 30;  // --disagg-handoff-bytes
  int64_t ttl_s = 60;                         // --disagg-handoff-ttl
  const Clock* clock = nullptr;               // null: the system clock
};

struct HandoffStoreStats {
  int64_t handoffs = 0, bytes = 0;             // held now
  int64_t stored = 0, taken = 0, expired = 0;  // running totals
  int64_t refused_full = 0;
};

class HandoffStore {
 public:
  explicit HandoffStore(HandoffStoreOptions o);

  // Parks a handoff under a fresh random id (32 hex digits: 128 bits, so only the worker it was
  // handed to can name it). Expired handoffs go first; resource_exhausted naming the flag when
  // it still does not fit.
  StatusOr<std::string> put(std::string meta, std::string payload,
                            std::shared_ptr<void> keep = nullptr);
  // The handoff under `id` (shared: a fetch in progress keeps it alive past an erase); null
  // when unknown or expired.
  std::shared_ptr<const Handoff> get(const std::string& id);
  // Fetched: forget it.
  void erase(const std::string& id);
  void sweep();
  HandoffStoreStats stats() const;

 private:
  int64_t now() const;
  void sweep_locked(int64_t now);

  HandoffStoreOptions o_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Handoff>> by_id_;
  HandoffStoreStats stats_;
};

}  // namespace deepinfer::disagg
