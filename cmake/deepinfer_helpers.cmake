# deepinfer_test(NAME SOURCES... LIBS ...): a GoogleTest binary labelled "unit" for ctest -L unit.
function(deepinfer_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    DEEPINFER_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    DEEPINFER_SHARED_DIR="${CMAKE_SOURCE_DIR}/../shared")
  gtest_discover_tests(${name} PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
endfunction()
