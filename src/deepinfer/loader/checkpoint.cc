#include "deepinfer/loader/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "deepinfer/loader/name_map.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

StatusOr<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return data_loss(path + ": read failed");
  return ss.str();
}

// Shard names come from the index; they must stay inside the checkpoint directory.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

// weight_map: tensor name (on disk) -> shard file name, preserving the index's order of shards.
Status parse_index(const std::string& index_path, std::map<std::string, std::string>* weight_map,
                   std::vector<std::string>* shards) {
  ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& e) {
    return data_loss(index_path + ": not valid JSON: " + e.what());
  }
  if (!index.is_object()) return data_loss(index_path + ": not a JSON object");
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object())
    return data_loss(index_path + ": missing 'weight_map' object");
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string())
      return data_loss(index_path + ": weight_map entry for '" + it.key() + "' is not a string");
    const std::string shard = it.value().get<std::string>();
    if (!is_plain_file_name(shard)) {
      return data_loss(index_path + ": weight_map entry for '" + it.key() + "' names '" + shard +
                       "', which is not a file name in the checkpoint directory");
    }
    (*weight_map)[it.key()] = shard;
    if (std::find(shards->begin(), shards->end(), shard) == shards->end()) shards->push_back(shard);
  }
  std::sort(shards->begin(), shards->end());
  return ok_status();
}

}  // namespace

StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found(dir + ": not a directory");
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  const fs::path root(dir);

  const std::string index_path = (root / kIndexName).string();
  if (fs::exists(index_path, ec)) {
    std::map<std::string, std::string> weight_map;
    std::vector<std::string> shards;
    RETURN_IF_ERROR(parse_index(index_path, &weight_map, &shards));
    for (const std::string& shard : shards) {
      const std::string path = (root / shard).string();
      if (!fs::exists(path, ec)) {
        std::string example;
        for (const auto& [name, s] : weight_map) {
          if (s == shard) {
            example = name;
            break;
          }
        }
        return not_found(index_path + ": shard '" + shard + "' (holding e.g. tensor '" + example +
                         "') does not exist");
      }
      ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(path));
      RETURN_IF_ERROR(ckpt->add_file(std::move(file)));
    }
    for (const auto& [name, shard] : weight_map) {
      const std::string path = (root / shard).string();
      const TensorInfo* t = ckpt->find(canonical_tensor_name(name));
      if (t == nullptr || t->name != name || t->file != path) {
        return not_found(index_path + ": tensor '" + name + "' is mapped to shard '" + shard +
                         "', which does not contain it" +
                         (t ? " (found in " + t->file + " as '" + t->name + "')" : ""));
      }
    }
    return ckpt;
  }

  std::vector<std::string> paths;
  const std::string single = (root / kSingleName).string();
  if (fs::exists(single, ec)) {
    paths.push_back(single);
  } else {
    for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
      if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
    }
    if (ec) return invalid_argument(dir + ": cannot list directory: " + ec.message());
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) {
    return not_found(dir + ": no " + kIndexName + ", " + kSingleName + " or *.safetensors file");
  }
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(path));
    RETURN_IF_ERROR(ckpt->add_file(std::move(file)));
  }
  return ckpt;
}

Status Checkpoint::add_file(std::unique_ptr<SafetensorsFile> file) {
  for (const TensorInfo& t : file->tensors()) {
    std::string canonical = canonical_tensor_name(t.name);
    auto [it, inserted] = by_name_.emplace(canonical, &t);
    if (!inserted) {
      const TensorInfo& prev = *it->second;
      return data_loss(dir_ + ": tensor '" + canonical + "' appears twice: as '" + prev.name +
                       "' in " + prev.file + " and as '" + t.name + "' in " + t.file);
    }
  }
  files_.push_back(std::move(file));
  return ok_status();
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    it = by_name_.find(canonical_tensor_name(name));
    if (it == by_name_.end()) return nullptr;
  }
  return it->second;
}

std::vector<std::string> Checkpoint::canonical_names() const {
  std::vector<std::string> names;
  names.reserve(by_name_.size());
  for (const auto& [name, t] : by_name_) names.push_back(name);
  return names;
}

}  // namespace deepinfer
