#include "deepinfer/cli/precheck/probes.h"

#include <dlfcn.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>

#include "deepinfer/cli/precheck/gpu_query.h"
#include "deepinfer/loader/checkpoint.h"

namespace deepinfer::cli::precheck {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The first "N.M" (or "N") in text after `after`, as (major, minor); nullopt when absent.
std::optional<std::pair<int, int>> version_after(const std::string& text,
                                                 const std::string& after) {
  const std::regex re(after + "[^0-9]*([0-9]+)(?:\\.([0-9]+))?");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return std::nullopt;
  // The last two groups are the numbers (the marker may hold groups of its own).
  const auto& major = m[m.size() - 2];
  const auto& minor = m[m.size() - 1];
  return std::make_pair(std::stoi(major), minor.matched ? std::stoi(minor) : 0);
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / kGiB);
  return b;
}

CheckResult versioned_tool(const std::string& name, const std::string& command,
                           const std::string& marker, std::pair<int, int> least) {
  const auto out = command_output(command);
  if (!out) return {name, Level::kWarn, "not found (needed to rebuild)"};
  const auto v = version_after(*out, marker);
  if (!v) return {name, Level::kWarn, "unrecognized version: " + first_line(*out)};
  const bool ok = *v >= least;
  return {name, ok ? Level::kPass : Level::kWarn,
          first_line(*out) + (ok ? ""
                                 : " (older than " + std::to_string(least.first) + "." +
                                       std::to_string(least.second) + ")")};
}

bool library_loads(const char* soname) {
  void* h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

int64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return -1;
}

}  // namespace

std::optional<std::string> command_output(const std::string& command) {
  FILE* p = popen((command + " 2>/dev/null").c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return pclose(p) == 0 ? std::optional<std::string>(out) : std::nullopt;
}

std::vector<CheckResult> build_tool_checks() {
  std::vector<CheckResult> out;
  // C++20 as the tree uses it: GCC 12 or Clang 14 (Debian 12's); CMake 3.25 (presets).
  out.push_back(
      versioned_tool("c++ compiler", "c++ --version", "(g\\+\\+|clang version|c\\+\\+)", {12, 0}));
  out.push_back(versioned_tool("cmake", "cmake --version", "cmake version", {3, 25}));
  const char* pkgs[] = {
      "build-essential",    "cmake",        "ninja-build",   "pkg-config",   "libgtest-dev",
      "nlohmann-json3-dev", "libpcre2-dev", "libcli11-dev",  "pybind11-dev", "libboost-dev",
      "libicu-dev",         "libssl-dev",   "libhiredis-dev"};
  std::string missing;
  for (const char* p : pkgs) {
    const auto s = command_output(std::string("dpkg-query -W -f='${Status}' ") + p);
    if (!s || s->find("install ok installed") == std::string::npos)
      missing += std::string(missing.empty() ? "" : ", ") + p;
  }
  if (!command_output("dpkg-query --version"))
    out.push_back({"debian packages", Level::kWarn, "dpkg-query not found: not a Debian system?"});
  else if (missing.empty())
    out.push_back({"debian packages", Level::kPass, "every package the build needs is installed"});
  else
    out.push_back(
        {"debian packages", Level::kWarn,
         "missing (needed to rebuild; scripts/install_deps.sh installs them): " + missing});
  return out;
}

std::vector<GpuInfo> query_gpus(std::vector<CheckResult>* problems) {
  const auto smi = command_output(kNvidiaSmiQuery);
  if (!smi) return {};
  auto parsed = parse_gpu_csv(*smi);
  if (parsed.ok()) return std::move(*parsed);
  problems->push_back({"gpu", Level::kWarn, parsed.status().message()});
  return {};
}

std::vector<CheckResult> gpu_stack_checks(const std::vector<GpuInfo>& gpus) {
  std::vector<CheckResult> out;
  const auto nvcc = command_output("/usr/local/cuda/bin/nvcc --version");
  if (!nvcc) {
    out.push_back({"cuda toolkit", Level::kWarn,
                   "no /usr/local/cuda/bin/nvcc (needed to build the CUDA backend)"});
  } else if (const auto v = version_after(*nvcc, "release")) {
    out.push_back({"cuda toolkit", v->first >= 12 ? Level::kPass : Level::kWarn,
                   "nvcc release " + std::to_string(v->first) + "." + std::to_string(v->second)});
  } else {
    out.push_back({"cuda toolkit", Level::kWarn, "unrecognized nvcc --version output"});
  }
  for (CheckResult& r : gpu_checks(gpus)) out.push_back(std::move(r));
  out.push_back(library_loads("libnccl.so.2")
                    ? CheckResult{"nccl", Level::kPass, "libnccl.so.2 loads"}
                    : CheckResult{"nccl", Level::kWarn, "libnccl.so.2 not found (multi-GPU)"});
  out.push_back(library_loads("libucp.so.0")
                    ? CheckResult{"ucx", Level::kPass, "libucp.so.0 loads"}
                    : CheckResult{"ucx", Level::kWarn,
                                  "libucp.so.0 not found (KV transfer over RDMA/CUDA IPC)"});
  return out;
}

std::vector<CheckResult> model_checks(const std::string& dir, bool cuda,
                                      const std::vector<GpuInfo>& gpus) {
  std::vector<CheckResult> out;
  auto ckpt = Checkpoint::open(dir);
  if (!ckpt.ok()) return {{"model", Level::kFail, ckpt.status().message()}};
  double stored = 0, fp32 = 0;
  for (const std::string& name : (*ckpt)->canonical_names()) {
    const TensorInfo* t = (*ckpt)->find(name);
    stored += static_cast<double>(t->nbytes);
    fp32 += 4.0 * static_cast<double>(t->numel());
  }
  out.push_back({"model", Level::kPass,
                 dir + ": " + std::to_string((*ckpt)->canonical_names().size()) + " tensors, " +
                     gib(stored) + " stored"});
  if (cuda) {
    int64_t largest_mib = 0;
    for (const GpuInfo& g : gpus) largest_mib = std::max(largest_mib, g.memory_mib);
    const double have = static_cast<double>(largest_mib) * 1024 * 1024;
    out.push_back({"gpu memory", stored < have ? Level::kPass : Level::kFail,
                   "weights need " + gib(stored) + " as stored; the largest GPU has " + gib(have)});
  } else {
    const double have = static_cast<double>(mem_available_bytes());
    out.push_back(
        {"host memory", fp32 < have ? Level::kPass : Level::kFail,
         "the CPU runner holds the weights as fp32: " + gib(fp32) + "; available " + gib(have)});
  }
  struct statvfs fs;
  if (statvfs(dir.c_str(), &fs) == 0)
    out.push_back(
        {"disk", Level::kPass,
         gib(static_cast<double>(fs.f_bavail) * fs.f_frsize) + " free where the model is"});
  return out;
}

CheckResult redis_check(const std::string& url) {
  const std::string name = "redis";
  const std::string prefix = "redis://";
  if (url.rfind(prefix, 0) != 0) return {name, Level::kFail, "not a redis:// URL: '" + url + "'"};
  std::string hostport = url.substr(prefix.size());
  hostport = hostport.substr(0, hostport.find('/'));
  const size_t colon = hostport.rfind(':');
  const std::string host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  const std::string port = colon == std::string::npos ? "6379" : hostport.substr(colon + 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr)
    return {name, Level::kFail, "cannot resolve " + host};
  const int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const bool connected = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0;
  freeaddrinfo(res);
  std::string reply(64, '\0');
  bool pong = false;
  if (connected && write(fd, "PING\r\n", 6) == 6) {
    const ssize_t n = read(fd, reply.data(), reply.size());
    pong = n > 0 && reply.rfind("+PONG", 0) == 0;
  }
  if (fd >= 0) close(fd);
  if (!connected) return {name, Level::kFail, url + " is not reachable"};
  return {name, pong ? Level::kPass : Level::kFail,
          pong ? url + " answers PING" : url + " did not answer PING with +PONG"};
}

}  // namespace deepinfer::cli::precheck
