// Tests' tiny models, kept between the test processes of one program. ctest runs each test case
// as its own process, and writing the same random model again in each took about a fifth of the
// sanitizer tree's test time. ctest sets DEEPINFER_TEST_MODEL_CACHE (deepinfer_test() in
// cmake/deepinfer_helpers.cmake); without it every model is written afresh.
//
// An entry is keyed by the program file (path, size, time: a rebuilt program writes its models
// afresh and drops its older entries) and by what the model is made from. Each process still
// gets its own copy, which it may change and which is removed at its exit as before; an entry
// appears whole or not at all (written under a private name, then renamed), so two processes
// that write the same model at once are both right and one of them keeps its copy to itself.
// Header-only, for tests.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

#include "deepinfer/base/status.h"

namespace deepinfer::v4 {

// Size and modification time of `path`, for cache keys ("" when it cannot be read).
inline std::string file_stamp_for_tests(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return "";
  const auto time = std::filesystem::last_write_time(path, ec);
  if (ec) return "";
  return std::to_string(size) + "@" + std::to_string(time.time_since_epoch().count());
}

// Makes `dir` through `write(dir)`, or copies it from the cache entry of `what` (every input the
// model depends on, spelled out by the caller).
inline Status write_through_test_model_cache(
    const std::string& dir, const std::string& what,
    const std::function<Status(const std::string&)>& write) {
  namespace fs = std::filesystem;
  const char* root_env = std::getenv("DEEPINFER_TEST_MODEL_CACHE");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const std::string exe_stamp = ec ? "" : file_stamp_for_tests(exe);
  if (root_env == nullptr || *root_env == '\0' || exe_stamp.empty()) return write(dir);
  auto hex = [](const std::string& s) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016zx", std::hash<std::string>{}(s));
    return std::string(buf);
  };
  const fs::path root(root_env);
  const std::string program = exe.filename().string() + "-";
  const std::string stamped = program + hex(exe.string() + "|" + exe_stamp) + "-";
  const fs::path entry = root / (stamped + hex(what));

  if (fs::is_directory(entry, ec)) {
    fs::remove_all(dir, ec);
    fs::copy(entry, dir, fs::copy_options::recursive, ec);
    if (!ec) return ok_status();
    fs::remove_all(dir, ec);  // a damaged entry: write the model afresh
  }
  RETURN_IF_ERROR(write(dir));

  fs::create_directories(root, ec);
  std::error_code walk;  // drop this program's entries from its older builds
  for (fs::directory_iterator it(root, walk), end; !walk && it != end; it.increment(walk)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(program, 0) == 0 && name.rfind(stamped, 0) != 0) fs::remove_all(it->path(), ec);
  }
  const fs::path staged = root / (entry.filename().string() + ".tmp" + std::to_string(::getpid()));
  fs::copy(dir, staged, fs::copy_options::recursive, ec);
  if (!ec) fs::rename(staged, entry, ec);  // fails when another process published it first
  fs::remove_all(staged, ec);
  return ok_status();
}

}  // namespace deepinfer::v4
