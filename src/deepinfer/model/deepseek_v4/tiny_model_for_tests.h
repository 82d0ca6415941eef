// Tests' tiny model: written once per test process (ctest runs each case as its own process, in
// parallel) into the gtest temp dir with the bundled DeepSeek-V3 tokenizer, removed at exit.
// Header-only and used only by tests (it needs gtest and the DEEPINFER_SOURCE_DIR definition
// that deepinfer_test() adds).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/model/deepseek_v4/tiny_model.h"

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
  Status st = write_tiny_model(dir, options);
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
