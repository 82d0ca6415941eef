# Precompiled headers, for build time on two cores (CI; decision 0021). The standard headers that
# most files include are parsed once into one PCH that every C++ library and program reuses, and
# once more with gtest for the tests. nlohmann/json, boost and the CUDA headers stay out: a
# file that does not use them would still pay for loading them. A target or file with compile
# options of its own (the sanitizer tree's -O2 pieces) keeps plain headers: GCC 12 took the -Og
# PCH into such an -O2 compile and crashed (an ICE in IPA).
option(DEEPINFER_PCH "Precompile the common standard and gtest headers" ON)

set(DEEPINFER_PCH_STD
    <algorithm> <array> <atomic> <chrono> <cmath> <condition_variable> <cstdint> <cstdio>
    <cstdlib> <cstring> <filesystem> <fstream> <functional> <map> <memory> <mutex> <numeric>
    <optional> <random> <set> <span> <sstream> <string> <string_view> <thread> <unordered_map>
    <utility> <vector>)

# Every target under `dir` (recursively) into `out`.
function(deepinfer_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    deepinfer_targets_under(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called once, after every add_subdirectory: gives each C++ target (no CUDA sources) the test PCH
# (targets that link gtest), the program PCH or the library PCH.
function(deepinfer_precompile_headers)
  if(NOT DEEPINFER_PCH)
    return()
  endif()
  # Three owners, since a PCH serves only code built as it was: libraries are position-
  # independent (-fPIC), programs -fPIE, so each kind reuses one built as that kind.
  add_library(deepinfer_pch_lib OBJECT ${CMAKE_SOURCE_DIR}/cmake/pch_anchor.cc)
  target_precompile_headers(deepinfer_pch_lib PRIVATE ${DEEPINFER_PCH_STD})
  add_executable(deepinfer_pch_exe ${CMAKE_SOURCE_DIR}/cmake/pch_main.cc)
  target_precompile_headers(deepinfer_pch_exe PRIVATE ${DEEPINFER_PCH_STD})
  add_executable(deepinfer_pch_test ${CMAKE_SOURCE_DIR}/cmake/pch_anchor.cc)
  target_link_libraries(deepinfer_pch_test PRIVATE GTest::gtest GTest::gtest_main)
  target_precompile_headers(deepinfer_pch_test PRIVATE ${DEEPINFER_PCH_STD} <gtest/gtest.h>)
  set_target_properties(deepinfer_pch_test PROPERTIES DEEPINFER_TEST_PROGRAM ON)  # as the tests
  # The options every target starts with (add_compile_options at the top) are not a target's own:
  # a target's COMPILE_OPTIONS begins with them, so counting them took the PCH from every
  # target of both trees (2026-12-07: 3 of 317 files used it).
  get_directory_property(global_options DIRECTORY ${CMAKE_SOURCE_DIR} COMPILE_OPTIONS)
  deepinfer_targets_under(${CMAKE_SOURCE_DIR} targets)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|EXECUTABLE|MODULE_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY)$"
       OR t MATCHES "^deepinfer_pch_")
      continue()
    endif()
    get_target_property(sources ${t} SOURCES)
    set(cxx FALSE)
    set(cuda FALSE)
    foreach(s ${sources})
      if(s MATCHES "\\.cu$")
        set(cuda TRUE)
      elseif(s MATCHES "\\.(cc|cpp)$")
        set(cxx TRUE)
      endif()
    endforeach()
    # Options of its own: plain headers (see the top of this file).
    get_target_property(own_options ${t} COMPILE_OPTIONS)
    if(own_options AND global_options)
      list(REMOVE_ITEM own_options ${global_options})
    endif()
    if(NOT cxx OR cuda OR own_options)
      continue()
    endif()
    get_target_property(links ${t} LINK_LIBRARIES)
    if(links MATCHES "GTest::")
      target_precompile_headers(${t} REUSE_FROM deepinfer_pch_test)
    elseif(type STREQUAL "EXECUTABLE")
      target_precompile_headers(${t} REUSE_FROM deepinfer_pch_exe)
    else()
      target_precompile_headers(${t} REUSE_FROM deepinfer_pch_lib)
    endif()
  endforeach()
endfunction()
