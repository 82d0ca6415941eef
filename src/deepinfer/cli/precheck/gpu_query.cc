#include "deepinfer/cli/precheck/gpu_query.h"

#include <charconv>
#include <cstdio>

namespace deepinfer::cli::precheck {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

template <class T>
bool parse_int(std::string_view s, T* out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

StatusOr<std::vector<GpuInfo>> parse_gpu_csv(std::string_view text) {
  std::vector<GpuInfo> gpus;
  int line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.empty()) continue;
    std::vector<std::string_view> f;
    for (size_t from = 0;;) {
      const size_t comma = line.find(',', from);
      f.push_back(trim(line.substr(from, comma - from)));
      if (comma == std::string_view::npos) break;
      from = comma + 1;
    }
    const std::string where = "nvidia-smi line " + std::to_string(line_no);
    if (f.size() != 5)
      return invalid_argument(where +
                              ": expected 5 fields (index, name, compute_cap, "
                              "memory.total, driver_version), got " +
                              std::to_string(f.size()));
    GpuInfo g;
    if (!parse_int(f[0], &g.index))
      return invalid_argument(where + ": index '" + std::string(f[0]) + "'");
    g.name = f[1];
    const size_t dot = f[2].find('.');
    if (dot == std::string_view::npos || !parse_int(f[2].substr(0, dot), &g.cc_major) ||
        !parse_int(f[2].substr(dot + 1), &g.cc_minor))
      return invalid_argument(where + ": compute_cap '" + std::string(f[2]) + "'");
    if (!parse_int(f[3], &g.memory_mib))
      return invalid_argument(where + ": memory.total '" + std::string(f[3]) + "' (MiB expected)");
    g.driver = f[4];
    gpus.push_back(std::move(g));
  }
  return gpus;
}

std::vector<CheckResult> gpu_checks(const std::vector<GpuInfo>& gpus) {
  std::vector<CheckResult> out;
  if (gpus.empty()) {
    out.push_back({"gpu", Level::kWarn, "no NVIDIA GPU found: only --device cpu will run"});
    return out;
  }
  out.push_back({"nvidia driver", Level::kPass, gpus[0].driver});
  for (const GpuInfo& g : gpus) {
    char detail[256];
    std::snprintf(detail, sizeof detail, "%s, compute capability %d.%d, %.1f GiB", g.name.c_str(),
                  g.cc_major, g.cc_minor, static_cast<double>(g.memory_mib) / 1024.0);
    const bool supported = g.cc_major == 9 || g.cc_major == 10;
    std::string d = detail;
    if (!supported)
      d += " (not supported: deepinfer's kernels are built for SM90, H100/H200, and SM100)";
    out.push_back({"gpu " + std::to_string(g.index), supported ? Level::kPass : Level::kWarn, d});
  }
  return out;
}

}  // namespace deepinfer::cli::precheck
