// Whether this build runs under AddressSanitizer. The CPU model runs ~20x slower there, so the
// heaviest randomized tests run the same checks on a smaller workload in that tree (CI time).
// DEEPINFER_ASAN is the same fact for the preprocessor (sanitizer headers and attributes).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define DEEPINFER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DEEPINFER_ASAN 1
#endif
#endif

namespace deepinfer {

#ifdef DEEPINFER_ASAN
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

}  // namespace deepinfer
