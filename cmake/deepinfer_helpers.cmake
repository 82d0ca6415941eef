# deepinfer_test(NAME SOURCES... LIBS ... [TIMEOUT S]): a GoogleTest binary labelled "unit" for
# ctest -L unit. TIMEOUT: each test's limit in seconds (ctest's default otherwise), for tests
# whose failure mode is a hang. With DEEPINFER_UNIT_TESTS_IN_ALL=OFF it builds only when named.
function(deepinfer_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  set_target_properties(${name} PROPERTIES DEEPINFER_TEST_PROGRAM ON)  # no UBSan in its own files
  set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)  # test helpers may share names
  if(NOT DEEPINFER_UNIT_TESTS_IN_ALL)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    DEEPINFER_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    DEEPINFER_SHARED_DIR="${CMAKE_SOURCE_DIR}/../shared")
  # The tiny models that the tests write, kept for the program's later test processes
  # (model/deepseek_v4/tiny_model_for_tests.h).
  set(cache ENVIRONMENT "DEEPINFER_TEST_MODEL_CACHE=${CMAKE_BINARY_DIR}/test_model_cache")
  if(T_TIMEOUT)
    gtest_discover_tests(${name} PROPERTIES LABELS unit TIMEOUT ${T_TIMEOUT} ${cache}
      DISCOVERY_TIMEOUT 60)
  else()
    gtest_discover_tests(${name} PROPERTIES LABELS unit ${cache} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
