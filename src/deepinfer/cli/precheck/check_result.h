// One line of `deepinfer precheck`: what was checked, whether it passed, and what was found.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace deepinfer::cli::precheck {

// kFail: something required is missing (precheck exits non-zero); kWarn: works, but not at
// full capability (no GPU, an unsupported GPU, no NCCL).
enum class Level { kPass, kWarn, kFail };

struct CheckResult {
  std::string name;  // "gpu 0", "cmake", "host memory", ...
  Level level = Level::kPass;
  std::string detail;
};

const char* level_name(Level l);  // "pass" | "warn" | "fail"
// "pass  cmake: 3.25.1" lines, one per result.
std::string to_text(const std::vector<CheckResult>& results);
// {"ok": bool, "checks": [{"name", "status", "detail"}...]}.
nlohmann::json to_json(const std::vector<CheckResult>& results);
bool any_failed(const std::vector<CheckResult>& results);

}  // namespace deepinfer::cli::precheck
