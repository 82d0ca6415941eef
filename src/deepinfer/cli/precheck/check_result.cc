#include "deepinfer/cli/precheck/check_result.h"

#include <algorithm>

namespace deepinfer::cli::precheck {

const char* level_name(Level l) {
  switch (l) {
    case Level::kPass:
      return "pass";
    case Level::kWarn:
      return "warn";
    case Level::kFail:
      return "fail";
  }
  return "fail";
}

std::string to_text(const std::vector<CheckResult>& results) {
  std::string out;
  for (const CheckResult& r : results)
    out += std::string(level_name(r.level)) + "  " + r.name + ": " + r.detail + "\n";
  return out;
}

nlohmann::json to_json(const std::vector<CheckResult>& results) {
  nlohmann::json checks = nlohmann::json::array();
  for (const CheckResult& r : results)
    checks.push_back({{"name", r.name}, {"status", level_name(r.level)}, {"detail", r.detail}});
  return {{"ok", !any_failed(results)}, {"checks", checks}};
}

bool any_failed(const std::vector<CheckResult>& results) {
  return std::any_of(results.begin(), results.end(),
                     [](const CheckResult& r) { return r.level == Level::kFail; });
}

}  // namespace deepinfer::cli::precheck
