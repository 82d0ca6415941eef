#include "deepinfer/engine/cache_fingerprint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "deepinfer/kv/unit_key.h"

namespace deepinfer {
namespace {

constexpr int kSamples = 8;
constexpr int64_t kSampleBytes = 64 << 10;

StatusOr<std::string> read_range(const std::string& path, int64_t offset, int64_t n) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("can't open " + path);
  std::string buf(static_cast<size_t>(n), '\0');
  f.seekg(offset);
  f.read(buf.data(), n);
  if (f.gcount() != n) return data_loss("short read of " + path);
  return buf;
}

// SHA-256 of bytes, through the key hash (SHA-256 of a fixed prefix and the bytes).
std::string digest(const std::string& bytes) { return kv::root_key(bytes).hex(); }

}  // namespace

StatusOr<std::string> cache_fingerprint(const std::string& model_dir,
                                        const runtime::ModelInfo& info, const kv::PageSpec& spec,
                                        const std::string& salt) {
  namespace fs = std::filesystem;
  std::string fp = "deepinfer-unit-v1;model_type=" + info.model_type +
                   ";numerics=" + info.numerics + ";device=" + runtime::device_name(info.device) +
                   ";page_tokens=" + std::to_string(spec.page_tokens) +
                   ";page_bytes=" + std::to_string(spec.page_bytes) +
                   ";constant_pages=" + std::to_string(spec.constant_pages_per_seq) +
                   ";salt=" + salt;
  const std::string config = model_dir + "/config.json";
  std::error_code ec;
  // Read again after the load; only a regular file (a pipe was consumed by the loader, and the
  // weights' samples below still pin the model).
  if (fs::is_regular_file(config, ec)) {
    const int64_t config_size = static_cast<int64_t>(fs::file_size(config, ec));
    if (ec)
      return not_found("prefix cache fingerprint: can't read " + config + ": " + ec.message());
    ASSIGN_OR_RETURN(std::string cfg, read_range(config, 0, config_size));
    fp += ";config=" + digest(cfg);
  }
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(model_dir, ec))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path());
  if (ec)
    return not_found("prefix cache fingerprint: can't list " + model_dir + ": " + ec.message());
  std::sort(shards.begin(), shards.end());
  for (const fs::path& p : shards) {
    const int64_t size = static_cast<int64_t>(fs::file_size(p, ec));
    if (ec) return not_found("prefix cache fingerprint: can't stat " + p.string());
    std::string sampled;
    const int64_t n = std::min(size, kSampleBytes);
    for (int i = 0; i < kSamples && n > 0; ++i) {
      const int64_t off = (size - n) * i / (kSamples - 1);
      ASSIGN_OR_RETURN(std::string s, read_range(p.string(), off, n));
      sampled += s;
    }
    fp += ";" + p.filename().string() + ":" + std::to_string(size) + ":" + digest(sampled);
  }
  return fp;
}

}  // namespace deepinfer
