// Whether this build runs under AddressSanitizer. The CPU model runs ~20x slower there, so the
// heaviest randomized tests run the same checks on a smaller workload in that tree (CI time).
#pragma once

namespace deepinfer {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

}  // namespace deepinfer
