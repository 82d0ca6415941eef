#include "deepinfer/server/access_log.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

namespace deepinfer::server {

StatusOr<std::unique_ptr<AccessLog>> AccessLog::open(const std::string& path) {
  if (path.empty()) return std::unique_ptr<AccessLog>(new AccessLog(nullptr, false));
  if (path == "-") return std::unique_ptr<AccessLog>(new AccessLog(stderr, false));
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return failed_precondition("--access-log: cannot open " + path);
  return std::unique_ptr<AccessLog>(new AccessLog(f, true));
}

AccessLog::~AccessLog() {
  if (owned_) std::fclose(f_);
}

void AccessLog::write(const AccessRecord& r) {
  if (f_ == nullptr) return;
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[80];
  std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count()));
  nlohmann::json j = {
      {"ts", ts},           {"remote", r.remote},
      {"method", r.method}, {"path", r.path},
      {"status", r.status}, {"duration_ms", static_cast<int64_t>(r.duration_s * 1e6) / 1e3}};
  if (!r.request_id.empty()) j["request_id"] = r.request_id;
  if (r.prompt_tokens >= 0) {
    j["stream"] = r.stream;
    j["prompt_tokens"] = r.prompt_tokens;
    j["completion_tokens"] = r.completion_tokens;
    if (!r.finish_reason.empty()) j["finish_reason"] = r.finish_reason;
  }
  std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), f_);
  std::fflush(f_);
}

}  // namespace deepinfer::server
