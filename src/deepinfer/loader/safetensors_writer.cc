#include "deepinfer/loader/safetensors_writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

Status check_record(const TensorRecord& t, const std::string& path) {
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) return invalid_argument(path + ": tensor '" + t.name + "' has a negative dim");
    numel *= static_cast<uint64_t>(d);
  }
  if (numel * dtype_size(t.dtype) != t.bytes.size()) {
    return invalid_argument(path + ": tensor '" + t.name + "' has " +
                            std::to_string(t.bytes.size()) + " bytes, shape needs " +
                            std::to_string(numel * dtype_size(t.dtype)));
  }
  return ok_status();
}

Status write_file_atomically(const std::string& path, const std::string& head,
                             const std::vector<const TensorRecord*>& body) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return invalid_argument(path + ": cannot create " + tmp);
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    for (const TensorRecord* t : body) {
      out.write(reinterpret_cast<const char*>(t->bytes.data()),
                static_cast<std::streamsize>(t->bytes.size()));
    }
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return resource_exhausted(path + ": write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return invalid_argument(path + ": rename from " + tmp + " failed: " + ec.message());
  return ok_status();
}

}  // namespace

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  tensors_.push_back({std::move(name), dtype, std::move(shape), std::move(bytes)});
}

Status SafetensorsWriter::write(const std::string& path,
                                const std::map<std::string, std::string>& metadata) const {
  std::vector<const TensorRecord*> sorted;
  for (const TensorRecord& t : tensors_) {
    RETURN_IF_ERROR(check_record(t, path));
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorRecord* a, const TensorRecord* b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->name == sorted[i - 1]->name)
      return invalid_argument(path + ": tensor '" + sorted[i]->name + "' added twice");
  }
  for (const TensorRecord* t : sorted) {
    if (t->name == "__metadata__")
      return invalid_argument(path + ": '__metadata__' is reserved, not a tensor name");
  }

  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const TensorRecord* t : sorted) {
    ordered_json e = ordered_json::object();
    e["dtype"] = dtype_name(t->dtype);
    e["shape"] = t->shape;
    e["data_offsets"] = {offset, offset + t->bytes.size()};
    offset += t->bytes.size();
    header[t->name] = std::move(e);
  }
  std::string json_text = header.dump();
  json_text.append((8 - json_text.size() % 8) % 8, ' ');
  std::string head(8, '\0');
  uint64_t len = json_text.size();
  for (int i = 0; i < 8; ++i) head[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  head += json_text;
  return write_file_atomically(path, head, sorted);
}

StatusOr<ShardPlan> plan_shards(std::vector<PlannedTensor> tensors, size_t max_shard_bytes) {
  ShardPlan plan;
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const PlannedTensor& a, const PlannedTensor& b) { return a.name < b.name; });
  uint64_t shard_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i > 0 && tensors[i].name == tensors[i - 1].name)
      return invalid_argument("tensor '" + tensors[i].name + "' planned twice");
    const uint64_t n = tensors[i].bytes;
    if (plan.shards.empty() || (shard_bytes > 0 && shard_bytes + n > max_shard_bytes)) {
      plan.shards.emplace_back();
      shard_bytes = 0;
    }
    plan.shards.back().push_back(i);
    shard_bytes += n;
    plan.total_bytes += n;
  }
  if (plan.shards.empty()) plan.shards.emplace_back();  // an empty checkpoint is one empty shard
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", s + 1,
                  plan.shards.size());
    plan.files.push_back(name);
  }
  plan.tensors = std::move(tensors);
  return plan;
}

Status write_shard_index(const std::string& dir, const ShardPlan& plan) {
  ordered_json weight_map = ordered_json::object();
  for (size_t s = 0; s < plan.shards.size(); ++s)
    for (size_t i : plan.shards[s]) weight_map[plan.tensors[i].name] = plan.files[s];
  ordered_json index = ordered_json::object();
  index["metadata"] = {{"total_size", plan.total_bytes}};
  index["weight_map"] = std::move(weight_map);
  const std::string path = (fs::path(dir) / "model.safetensors.index.json").string();
  std::ofstream out(path, std::ios::trunc);
  out << index.dump(2) << "\n";
  out.flush();
  if (!out) return resource_exhausted(path + ": write failed");
  return ok_status();
}

Status write_sharded_safetensors(const std::string& dir, std::vector<TensorRecord> tensors,
                                 size_t max_shard_bytes,
                                 const std::map<std::string, std::string>& metadata) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return invalid_argument(dir + ": cannot create directory: " + ec.message());
  // Sorted the way plan_shards sorts, so the plan's indices are these records' indices.
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorRecord& a, const TensorRecord& b) { return a.name < b.name; });
  std::vector<PlannedTensor> planned;
  for (const TensorRecord& t : tensors)
    planned.push_back({t.name, t.dtype, t.shape, t.bytes.size()});
  StatusOr<ShardPlan> plan = plan_shards(std::move(planned), max_shard_bytes);
  if (!plan.ok()) return invalid_argument(dir + ": " + plan.status().message());
  for (size_t s = 0; s < plan->shards.size(); ++s) {
    SafetensorsWriter writer;
    for (size_t i : plan->shards[s]) writer.add(std::move(tensors[i]));
    RETURN_IF_ERROR(writer.write((fs::path(dir) / plan->files[s]).string(), metadata));
  }
  return write_shard_index(dir, *plan);
}

}  // namespace deepinfer
