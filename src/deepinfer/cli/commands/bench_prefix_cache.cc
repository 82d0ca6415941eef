#include "deepinfer/cli/commands/bench_prefix_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/state_geometry.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int fail(const std::string& m) { return command_failed("bench prefix-cache", m); }

struct Timed {
  double ttft_s = 0;
  int64_t cached = 0;
};

// One request, max_tokens 1: submit to the first output carrying a token.
StatusOr<Timed> time_to_first_token(Engine& e, const std::vector<int32_t>& prompt) {
  GenerateRequest r;
  r.prompt_ids = prompt;
  r.params.max_tokens = 1;
  r.params.temperature = 0;
  r.params.ignore_eos = true;
  std::mutex m;
  std::condition_variable cv;
  std::optional<RequestOutput> done;
  std::optional<Clock::time_point> first;
  const auto t0 = Clock::now();
  RETURN_IF_ERROR(e.submit(r, [&](const RequestOutput& o) {
    std::lock_guard<std::mutex> lock(m);
    if (!first && !o.outputs.empty() && !o.outputs[0].token_ids.empty()) first = Clock::now();
    if (o.finished) {
      done = o;
      cv.notify_all();
    }
  }));
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return done.has_value(); });
  if (!done->status.ok()) return done->status;
  Timed t;
  t.ttft_s = std::chrono::duration<double>(first.value_or(Clock::now()) - t0).count();
  t.cached = done->usage.cached_tokens;
  return t;
}

std::vector<int32_t> random_prompt(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& id : p) id = static_cast<int32_t>(2 + rng() % 120000);
  return p;
}

// Drops the unit files from the page cache, so the next read comes from the disk.
void drop_from_page_cache(const std::vector<fs::path>& files) {
  for (const fs::path& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// Sequential read of the files in 1 MiB reads: bytes per second.
double sequential_read_bps(const std::vector<fs::path>& files) {
  std::vector<char> buf(1 << 20);
  int64_t bytes = 0;
  const auto t0 = Clock::now();
  for (const fs::path& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    ssize_t n;
    while ((n = ::read(fd, buf.data(), buf.size())) > 0) bytes += n;
    ::close(fd);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return s > 0 ? bytes / s : 0;
}

std::vector<fs::path> unit_files(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".unit") out.push_back(e.path());
  return out;
}

}  // namespace

int run_prefix_cache_bench(const std::string& model_arg, int input_len, std::string json_path,
                           EngineArgs args) {
  auto dir = resolve_model_dir(model_arg);
  if (!dir.ok()) return fail(dir.status().to_string());
  args.model = *dir;
  args.enable_prefix_cache = true;
  args.max_model_len = std::max<int64_t>(args.max_model_len, input_len + 8);
  const bool own_disk = args.kv_disk_dir.empty();
  if (own_disk) {
    char tmpl[] = "/tmp/deepinfer-bench-kv-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return fail("can't create a temp dir for --kv-disk-dir");
    args.kv_disk_dir = tmpl;
  }
  // A pool that holds the prompt's state and one snapshot beside a sequence, but not a second
  // prompt's as well: a filler prompt then evicts the first from the device, leaving the host
  // tier to serve it.
  EngineArgs probe_args = args;
  probe_args.enable_prefix_cache = false;
  auto probe = Engine::create(probe_args);
  if (!probe.ok()) return fail(probe.status().to_string());
  const EngineCapacity cap = (*probe)->capacity();
  probe->reset();
  const int64_t page_tokens = 128;
  // capacity: max_sequences = num_pages / (constant pages + 1).
  const int64_t constant_pages = cap.num_pages / std::max<int64_t>(1, cap.max_sequences) - 1;
  const int64_t prompt_pages = (input_len + page_tokens - 1) / page_tokens;
  if (args.kv_memory_bytes == 0)
    args.kv_memory_bytes = (prompt_pages + 2 * constant_pages + 4) * cap.page_bytes;

  const std::vector<int32_t> prompt = random_prompt(input_len, 1);
  const std::vector<int32_t> filler = random_prompt(input_len, 2);
  nlohmann::json j = {{"mode", "prefix-cache"}, {"model", *dir}, {"input_len", input_len}};
  auto e = Engine::create(args);
  if (!e.ok()) return fail(e.status().to_string());
  std::fprintf(stderr, "bench prefix-cache: miss, then a device hit...\n");
  auto miss = time_to_first_token(**e, prompt);
  if (!miss.ok()) return fail(miss.status().to_string());
  auto dev = time_to_first_token(**e, prompt);
  if (!dev.ok()) return fail(dev.status().to_string());
  std::fprintf(stderr, "bench prefix-cache: a filler prompt evicts it; a host-tier hit...\n");
  if (auto f = time_to_first_token(**e, filler); !f.ok()) return fail(f.status().to_string());
  const PrefixCacheStats h0 = (*e)->prefix_cache_stats();
  auto host = time_to_first_token(**e, prompt);
  if (!host.ok()) return fail(host.status().to_string());
  const PrefixCacheStats h1 = (*e)->prefix_cache_stats();
  e->reset();  // drains the disk writer

  std::fprintf(stderr, "bench prefix-cache: restart over the disk tier; a disk hit...\n");
  const std::vector<fs::path> files = unit_files(args.kv_disk_dir);
  int64_t disk_bytes = 0;
  for (const fs::path& f : files) disk_bytes += static_cast<int64_t>(fs::file_size(f));
  EngineArgs restart = args;
  restart.kv_host_memory_bytes = 0;
  auto e2 = Engine::create(restart);
  if (!e2.ok()) return fail(e2.status().to_string());
  drop_from_page_cache(files);
  const PrefixCacheStats d0 = (*e2)->prefix_cache_stats();
  auto disk = time_to_first_token(**e2, prompt);
  if (!disk.ok()) return fail(disk.status().to_string());
  const PrefixCacheStats d1 = (*e2)->prefix_cache_stats();
  e2->reset();
  drop_from_page_cache(files);
  const double seq_bps = sequential_read_bps(files);
  if (own_disk) fs::remove_all(args.kv_disk_dir);

  // Bytes per token: the device page layout against the model's state (spec §7's arithmetic).
  double geometry_bpt = 0;
  int64_t constant_bytes = 0;
  if (auto c = v4::load_config(*dir); c.ok()) {
    const v4::StateGeometry g = v4::state_geometry(*c, 4, static_cast<int>(page_tokens));
    geometry_bpt = g.bytes_per_token_x1000 / 1000.0;
    constant_bytes = g.constant_bytes_per_seq;
  }
  const double stored_bpt = static_cast<double>(cap.page_bytes) / page_tokens;
  const double file_bpt = static_cast<double>(cap.page_bytes + 184 + 32) / page_tokens;
  const int64_t snapshot_bytes = constant_pages * cap.page_bytes;
  auto bw = [](const PrefixCacheStats& a, const PrefixCacheStats& b) {
    const double s = b.load_seconds - a.load_seconds;
    return s > 0 ? (b.promoted_bytes - a.promoted_bytes) / s : 0.0;
  };
  const double host_bps = bw(h0, h1), disk_bps = bw(d0, d1);
  std::printf("deepinfer bench prefix-cache  model=%s  device=%s  prompt=%d tokens\n", dir->c_str(),
              cap.device.c_str(), input_len);
  std::printf("| case | TTFT | cached tokens | TTFT / miss |\n|---|---|---|---|\n");
  for (auto [name, t] : {std::pair<const char*, const Timed&>{"miss", *miss},
                         {"hit, device tier", *dev},
                         {"hit, host tier", *host},
                         {"hit, disk tier (after restart, page cache dropped)", *disk}})
    std::printf("| %s | %.1f ms | %lld | %.3f |\n", name, 1e3 * t.ttft_s, (long long)t.cached,
                t.ttft_s / miss->ttft_s);
  std::printf("\n| stored unit | value |\n|---|---|\n");
  std::printf("| growing state per token, pages (%lld B per %lld tokens) | %.1f B |\n",
              (long long)cap.page_bytes, (long long)page_tokens, stored_bpt);
  std::printf("| growing state per token, spec §7 arithmetic for this model (fp32) | %.1f B |\n",
              geometry_bpt);
  std::printf("| unit file per token (header + checksum included) | %.1f B |\n", file_bpt);
  std::printf("| snapshot per persistence point: %lld pages | %lld B (constant state %lld B) |\n",
              (long long)constant_pages, (long long)snapshot_bytes, (long long)constant_bytes);
  std::printf("\n| load | bandwidth |\n|---|---|\n");
  std::printf("| host tier -> device pages | %.2f GB/s |\n", host_bps / 1e9);
  std::printf("| disk tier -> device pages (verified, page cache dropped) | %.2f GB/s |\n",
              disk_bps / 1e9);
  std::printf("| sequential read of the same %zu files (%.1f MB), same run | %.2f GB/s |\n",
              files.size(), disk_bytes / 1e6, seq_bps / 1e9);
  std::printf("| disk-tier load / sequential read | %.2f |\n",
              seq_bps > 0 ? disk_bps / seq_bps : 0.0);
  j["ttft_ms"] = {{"miss", 1e3 * miss->ttft_s},
                  {"device", 1e3 * dev->ttft_s},
                  {"host", 1e3 * host->ttft_s},
                  {"disk", 1e3 * disk->ttft_s}};
  j["cached_tokens"] = {{"device", dev->cached}, {"host", host->cached}, {"disk", disk->cached}};
  j["bytes_per_token"] = {
      {"pages", stored_bpt}, {"geometry", geometry_bpt}, {"unit_file", file_bpt}};
  j["snapshot_bytes"] = snapshot_bytes;
  j["load_gbs"] = {
      {"host", host_bps / 1e9}, {"disk", disk_bps / 1e9}, {"disk_sequential_read", seq_bps / 1e9}};
  if (json_path.empty()) json_path = "bench_prefix_cache.json";
  std::ofstream(json_path) << j.dump(2) << "\n";
  std::printf("\nwrote %s\n", json_path.c_str());
  return 0;
}

}  // namespace deepinfer::cli
