// Structured access log: one JSON object per line per HTTP request, to stderr or a file.
// Written by the io thread only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::server {

struct AccessRecord {
  std::string remote, method, path, request_id, finish_reason;
  int status = 0;
  bool stream = false;
  double duration_s = 0;
  int64_t prompt_tokens = -1, completion_tokens = -1;  // -1: not a generation (omitted)
};

class AccessLog {
 public:
  // "-": stderr; "": disabled; else a file opened for append.
  static StatusOr<std::unique_ptr<AccessLog>> open(const std::string& path);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  void write(const AccessRecord& r);

 private:
  explicit AccessLog(std::FILE* f, bool owned) : f_(f), owned_(owned) {}
  std::FILE* f_;
  bool owned_;
};

}  // namespace deepinfer::server
