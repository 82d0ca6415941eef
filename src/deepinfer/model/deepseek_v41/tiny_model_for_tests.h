// Tests' tiny V4.1 models: the v41-default (or v41-dspark) preset made once per test process
// (ctest runs each case as its own process) in the gtest temp dir with the bundled tokenizer,
// removed at exit; written, or copied from the program's earlier processes
// (deepseek_v4/tiny_model_cache_for_tests.h). Header-only and used only by tests (gtest,
// DEEPINFER_SOURCE_DIR from deepinfer_test()).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "deepinfer/model/deepseek_v4/tiny_model_cache_for_tests.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"  // tests_source_dir
#include "deepinfer/model/deepseek_v41/tiny_model.h"

namespace deepinfer::v41 {

// The directory of this process's model of `preset` (v41-default or v41-dspark; quantized: FP8
// 32x32 + MXFP4), written on the first call; a failure is a test failure. Not thread-safe (call it
// from the test body).
inline const std::string& tiny_model_dir_for_test(bool quantized = false,
                                                  const std::string& preset = "v41-default") {
  static std::string dirs[4];  // plain, quantized; v41-default, v41-dspark
  const int slot = (quantized ? 1 : 0) + (preset == "v41-dspark" ? 2 : 0);
  std::string& dir = dirs[slot];
  if (!dir.empty()) return dir;
  static const bool hooked = [] {
    std::atexit([] {
      for (const std::string& d : dirs)
        if (!d.empty()) std::filesystem::remove_all(d);
    });
    return true;
  }();
  (void)hooked;
  dir =
      ::testing::TempDir() + "/v41_tiny_" + std::to_string(slot) + "_" + std::to_string(::getpid());
  v4::TinyModelOptions o;
  o.preset = preset;
  o.quantized = quantized;
  o.tokenizer_dir = v4::tests_source_dir() + "/assets/tokenizers/deepseek_v3";
  const std::string what = "v41|" + preset + "|" + std::to_string(quantized) + "|" +
                           o.tokenizer_dir + "|" +
                           v4::file_stamp_for_tests(o.tokenizer_dir + "/tokenizer.json");
  Status st = v4::write_through_test_model_cache(
      dir, what, [&](const std::string& d) { return v41::write_tiny_model(d, o); });
  EXPECT_TRUE(st.ok()) << st.to_string();
  return dir;
}

}  // namespace deepinfer::v41
