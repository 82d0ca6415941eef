// Unpredictable ids for responses and tool calls. Counters leak request volume and collide across
// choices and restarts; ids from the kernel's CSPRNG do neither.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::server {

// Characters after the prefix in random_id(): base62, 24 × log2(62) ≈ 142 bits.
inline constexpr size_t kRandomIdChars = 24;

// `prefix` followed by kRandomIdChars base62 characters drawn from getrandom(2) (unbiased:
// bytes ≥ 248 are redrawn). Thread-safe; never blocks once the kernel's pool is initialised.
std::string random_id(std::string_view prefix);

}  // namespace deepinfer::server
