// Engram row gather from host memory (issue 17): the cost per token of reading one Engram
// layer's 24 rows (n = 2..4 x 8 heads, spec §11.2.7) of 256 F8_E4M3 values + 8 E8M0 scales
// from a table mapped in place and dequantizing them to fp32, at uniformly random rows as the
// hashes give. Prints the measured time per token beside a floor: the same bytes at this
// machine's sequential read bandwidth (measured here), and the ratio.
//
//   engram_gather_bench [table GiB (default 2)] [tokens (default 200000)] [threads (default 1)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/model/deepseek_v41/engram_rows.h"

namespace fs = std::filesystem;
using deepinfer::Checkpoint;
using deepinfer::DType;
using deepinfer::SafetensorsWriter;
using deepinfer::v41::EngramRows;

namespace {

constexpr int64_t kDim = 256, kRowsPerToken = 24;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Sequential read bandwidth of a buffer far larger than the caches (GB/s).
double sequential_read_gbps(const uint8_t* p, size_t n) {
  uint64_t sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i + 8 <= n; i += 64) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    sum += v;
  }
  const double s = seconds_since(t0);
  if (sum == 42) std::puts("");  // keeps the loop
  return double(n) / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 200000;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  const int64_t rows = static_cast<int64_t>(gib * double(int64_t{1} << 30)) / kDim;
  const fs::path dir = fs::temp_directory_path() / "deepinfer_engram_gather_bench";
  fs::create_directories(dir);
  {
    std::vector<uint8_t> values(size_t(rows) * kDim), scales(size_t(rows) * (kDim / 32));
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < values.size(); i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      uint64_t v = x & 0x7e7e7e7e7e7e7e7eull;  // no NaN encodings
      std::memcpy(&values[i], &v, std::min<size_t>(8, values.size() - i));
    }
    std::fill(scales.begin(), scales.end(), uint8_t{127});
    SafetensorsWriter w;
    w.add("layers.1.engram.embed.weight", DType::kF8E4M3, {rows, kDim}, std::move(values));
    w.add("layers.1.engram.embed.scale", DType::kF8E8M0, {rows, kDim / 32}, std::move(scales));
    if (!w.write((dir / "model.safetensors").string()).ok()) return 1;
  }
  auto ckpt = Checkpoint::open(dir.string());
  if (!ckpt.ok()) return std::fprintf(stderr, "%s\n", ckpt.status().to_string().c_str()), 1;
  auto table = EngramRows::open(**ckpt, "layers.1.engram.embed.weight");
  if (!table.ok()) return std::fprintf(stderr, "%s\n", table.status().to_string().c_str()), 1;
  const deepinfer::TensorInfo& t = *(*ckpt)->find("layers.1.engram.embed.weight");
  sequential_read_gbps(t.data, t.nbytes);  // brings the file into the page cache
  const double seq_gbps = sequential_read_gbps(t.data, t.nbytes);

  std::vector<int64_t> ids(size_t(tokens) * kRowsPerToken);
  std::mt19937_64 rng(1);
  for (auto& id : ids) id = static_cast<int64_t>(rng() % uint64_t(rows));
  std::vector<std::thread> pool;
  std::vector<std::vector<float>> out(threads, std::vector<float>(kRowsPerToken * kDim));
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < threads; ++k)
    pool.emplace_back([&, k] {
      for (int64_t tok = k; tok < tokens; tok += threads)
        table->gather(&ids[size_t(tok) * kRowsPerToken], kRowsPerToken, out[k].data());
    });
  for (auto& th : pool) th.join();
  const double s = seconds_since(t0);
  const double per_token_us = s / double(tokens) * 1e6;
  const double bytes_per_token = double(kRowsPerToken * table->row_bytes());
  const double floor_us = bytes_per_token / (seq_gbps * 1e9) * 1e6;
  std::printf(
      "engram gather: table %.2f GiB (%lld rows of %lld F8_E4M3 + %lld E8M0 scales, page cache "
      "warm), %lld tokens x %lld rows, %d thread(s)\n",
      gib, static_cast<long long>(rows), static_cast<long long>(kDim),
      static_cast<long long>(kDim / 32), static_cast<long long>(tokens),
      static_cast<long long>(kRowsPerToken), threads);
  std::printf(
      "| measured us/token/layer | floor us (%.0f B at %.2f GB/s sequential read) | ratio |\n",
      bytes_per_token, seq_gbps);
  std::printf("|---:|---:|---:|\n| %.3f | %.3f | %.1fx |\n", per_token_us, floor_us,
              per_token_us / floor_us);
  fs::remove_all(dir);
  return 0;
}
