#include "deepinfer/model/deepseek_v4/random_tensors.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::v4 {
namespace {

namespace fs = std::filesystem;

// Power-of-two scale that maps amax to at most `top` (E8M0-representable).
float pow2_scale(float amax, float top) {
  if (amax <= 0) return 1.0f;
  return std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(amax / top))));
}

}  // namespace

std::string scale_name(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - 7) + ".scale";  // drop ".weight"
}

PlannedTensor planned_tensor(std::string name, DType dtype, std::vector<int64_t> shape) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return PlannedTensor{std::move(name), dtype, std::move(shape), n};
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::vector<uint8_t> as_bytes(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

std::vector<uint8_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_bf16(v[i]);
  return as_bytes(h.data(), h.size() * 2);
}

ValueMoments value_moments(const std::string& name, const std::vector<int64_t>& shape) {
  if (ends_with(name, "norm.weight")) return {1, 0.1f};
  if (ends_with(name, "_scale")) return {1, 0.2f};
  if (ends_with(name, "_base") || ends_with(name, ".ape")) return {0, 0.5f};
  if (ends_with(name, ".bias")) return {0, 0.3f};
  if (shape.size() == 2 && name != "embed.weight")
    return {0, 1.0f / std::sqrt(static_cast<float>(shape[1]))};
  return {0, 1};
}

std::vector<float> random_values(const std::string& name, const std::vector<int64_t>& shape,
                                 std::mt19937_64& rng, std::normal_distribution<float>& normal) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const ValueMoments m = value_moments(name, shape);
  std::vector<float> v(numel);
  for (auto& x : v) x = m.mean + m.stddev * normal(rng);
  return v;
}

void add_fp8(std::vector<TensorRecord>& out, const std::string& name, const std::vector<float>& v,
             int64_t rows, int64_t cols, int br, int bc) {
  const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
  std::vector<uint8_t> q(rows * cols), s(sr * sc);
  for (int64_t bi = 0; bi < sr; ++bi)
    for (int64_t bj = 0; bj < sc; ++bj) {
      float amax = 0;
      for (int64_t r = bi * br; r < std::min(rows, (bi + 1) * br); ++r)
        for (int64_t c = bj * bc; c < std::min(cols, (bj + 1) * bc); ++c)
          amax = std::max(amax, std::fabs(v[r * cols + c]));
      float scale = pow2_scale(amax, 448.0f);
      s[bi * sc + bj] = float_to_e8m0_pow2(scale);
      for (int64_t r = bi * br; r < std::min(rows, (bi + 1) * br); ++r)
        for (int64_t c = bj * bc; c < std::min(cols, (bj + 1) * bc); ++c)
          q[r * cols + c] = float_to_fp8e4m3(v[r * cols + c] / scale);
    }
  out.push_back({name, DType::kF8E4M3, {rows, cols}, std::move(q)});
  out.push_back({scale_name(name), DType::kF8E8M0, {sr, sc}, std::move(s)});
}

void add_mxfp4(std::vector<TensorRecord>& out, const std::string& name, const std::vector<float>& v,
               int64_t rows, int64_t cols) {
  std::vector<uint8_t> q(rows * cols / 2, 0), s(rows * cols / 32);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float* x = &v[r * cols + b * 32];
      float amax = 0;
      for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[k]));
      const float scale = pow2_scale(amax, 6.0f);
      const float inv = 1.0f / scale;  // exact: a power of two, so x * inv == x / scale
      s[r * (cols / 32) + b] = float_to_e8m0_pow2(scale);
      uint8_t codes[32];
      for (int k = 0; k < 32; ++k) codes[k] = fp4_code(x[k] * inv);  // vectorizes
      uint8_t* dst = &q[r * (cols / 2) + b * 16];
      for (int k = 0; k < 16; ++k)  // low nibble first
        dst[k] = static_cast<uint8_t>(codes[2 * k] | (codes[2 * k + 1] << 4));
    }
  out.push_back({name, DType::kI8, {rows, cols / 2}, std::move(q)});
  out.push_back({scale_name(name), DType::kF8E8M0, {rows, cols / 32}, std::move(s)});
}

}  // namespace deepinfer::v4

namespace deepinfer::v4 {

void generate_tensors(size_t count, bool parallel, uint64_t seed,
                      const std::function<void(size_t, size_t)>& progress, const MakeTensor& make) {
  if (!parallel) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < count; ++i) {
      make(i, rng, normal);
      if (progress) progress(i + 1, count);
    }
    return;
  }
  std::atomic<size_t> done{0};
  std::mutex progress_mu;
  ThreadPool::default_pool().parallel_for(
      static_cast<int64_t>(count), 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
          std::normal_distribution<float> normal(0.0f, 1.0f);
          make(static_cast<size_t>(i), rng, normal);
          const size_t n = ++done;
          if (progress) {
            std::lock_guard<std::mutex> lock(progress_mu);
            progress(n, count);
          }
        }
      });
}

namespace {

namespace fs = std::filesystem;

Status copy_into_model(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    return not_found("cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
  fs::permissions(to, fs::perms::owner_write, fs::perm_options::add, ec);
  return ok_status();
}

}  // namespace

Status prepare_model_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return not_found("cannot create " + dir + ": " + ec.message());
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors" ||
        e.path().filename() == "model.safetensors.index.json")
      fs::remove(e.path());
  return ok_status();
}

Status finish_model_dir(const std::string& dir, const std::string& config_json,
                        const std::string& tokenizer_dir) {
  {
    std::ofstream f(dir + "/config.json");
    f << config_json << "\n";
    if (!f) return data_loss(dir + "/config.json: write failed");
  }
  if (!tokenizer_dir.empty())
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
      RETURN_IF_ERROR(copy_into_model(fs::path(tokenizer_dir) / name, fs::path(dir) / name));
  return ok_status();
}

// Fails before anything is deleted or written when the model cannot fit (the full preset needs
// about 160 GB; the single-GPU machine's disk has 64 GiB).
Status check_model_room(const std::string& dir, uint64_t needed) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return not_found("cannot create " + dir + ": " + ec.message());
  uint64_t room = fs::space(dir, ec).available;
  if (ec) return ok_status();  // no figure: let the writes tell
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") room += e.file_size(ec);  // replaced
  if (room >= needed + (uint64_t{64} << 20)) return ok_status();
  return resource_exhausted(dir + ": the model needs " + std::to_string(needed >> 20) +
                            " MiB but its file system has " + std::to_string(room >> 20) +
                            " MiB free");
}

Status write_model_dir(const std::string& dir, std::vector<TensorRecord> tensors,
                       size_t max_shard_bytes, const std::string& config_json,
                       const std::string& tokenizer_dir) {
  RETURN_IF_ERROR(prepare_model_dir(dir));
  RETURN_IF_ERROR(
      write_sharded_safetensors(dir, std::move(tensors), max_shard_bytes, {{"format", "pt"}}));
  return finish_model_dir(dir, config_json, tokenizer_dir);
}

}  // namespace deepinfer::v4
