// Tests' tiny model: made once per test process (ctest runs each case as its own process, in
// parallel) in the gtest temp dir with the bundled DeepSeek-V3 tokenizer, removed at exit;
// written, or copied from the program's earlier processes (tiny_model_cache_for_tests.h).
// Header-only and used only by tests (it needs gtest and the DEEPINFER_SOURCE_DIR definition
// that deepinfer_test() adds).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/model/deepseek_v4/tiny_model.h"
#include "deepinfer/model/deepseek_v4/tiny_model_cache_for_tests.h"

namespace deepinfer::v4 {

// The checkout the tests read: DEEPINFER_SOURCE_DIR in the environment overrides the compiled-in
// one (a binary built here and run on the GPU machine, whose copy of the tree lies elsewhere).
inline std::string tests_source_dir() {
  const char* env = std::getenv("DEEPINFER_SOURCE_DIR");
  return env && *env ? env : DEEPINFER_SOURCE_DIR;
}

// Writes the model to TempDir()/NAME_PID (call it once per name, e.g. from a function-local
// static) and returns the directory; a failure is a test failure.
inline std::string write_tiny_model_for_test(const std::string& name, TinyModelOptions options) {
  static std::mutex mu;
  static std::vector<std::string>* dirs = nullptr;  // leaked: read by the atexit hook
  const std::string dir = ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid());
  {
    std::lock_guard<std::mutex> lock(mu);
    if (dirs == nullptr) {
      dirs = new std::vector<std::string>();
      std::atexit([] {
        for (const std::string& d : *dirs) std::filesystem::remove_all(d);
      });
    }
    dirs->push_back(dir);
  }
  options.tokenizer_dir = tests_source_dir() + "/assets/tokenizers/deepseek_v3";
  Status st;
  if (options.progress || options.stream_progress) {
    st = write_tiny_model(dir, options);  // the callbacks are what the test looks at
  } else {
    std::string config;
    if (!options.config_path.empty()) {
      std::ifstream f(options.config_path, std::ios::binary);
      config.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const std::string what =
        "v4|" + options.preset + "|" + config + "|" + std::to_string(options.seed) + "|" +
        std::to_string(options.quantized) + "|" + options.tokenizer_dir + "|" +
        file_stamp_for_tests(options.tokenizer_dir + "/tokenizer.json") + "|" +
        std::to_string(options.max_shard_bytes) + "|" + std::to_string(options.streamed);
    st = write_through_test_model_cache(
        dir, what, [&](const std::string& d) { return write_tiny_model(d, options); });
  }
  EXPECT_TRUE(st.ok()) << st.to_string();
  return dir;
}

// The quantized tiny model (FP8 block-scaled dense weights, MXFP4 experts) that most engine and
// runner tests run on; call it once per name (e.g. from a function-local static).
inline std::string quantized_tiny_model_for_test(const std::string& name, uint64_t seed) {
  TinyModelOptions options;
  options.quantized = true;
  options.seed = seed;
  return write_tiny_model_for_test(name, options);
}

}  // namespace deepinfer::v4
