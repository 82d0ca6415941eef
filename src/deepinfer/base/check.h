// CHECK: invariants of our own code only (never for user input; use Status for that).
#pragma once

#include <cstdio>
#include <cstdlib>

#define DI_CHECK(cond)                                                              \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
