// Tests' edited copies of a checkpoint directory: without the MTP / DSpark tensors, as
// transformers' save_pretrained writes V4 and V4.1 (config.json still counts the draft layers, no
// shard holds an mtp.* tensor), or with chosen tensors zeroed. Header-only, for tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/loader/test_util.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::testing {

// Whether a stored tensor name is a draft layer's, in either spelling ("mtp.0..." or
// "model.mtp.0...").
inline bool is_draft_tensor(const std::string& name) {
  return name.rfind("mtp.", 0) == 0 || name.rfind("model.mtp.", 0) == 0;
}

enum class TensorEdit { kKeep, kDrop, kZero };

// dst (an existing directory) gets src's files, each stored tensor kept, dropped (also from the
// index's weight_map) or zeroed (every byte: 0 in any float format) as edit(stored name) says.
inline Status copy_checkpoint(const std::string& src, const std::string& dst,
                              const std::function<TensorEdit(const std::string&)>& edit) {
  namespace fs = std::filesystem;
  using nlohmann::json;
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string name = e.path().filename().string();
    const std::string out = dst + "/" + name;
    if (name == "model.safetensors.index.json") {
      std::ifstream f(e.path());
      json index = json::parse(f);
      for (auto it = index["weight_map"].begin(); it != index["weight_map"].end();)
        it = edit(it.key()) == TensorEdit::kDrop ? index["weight_map"].erase(it) : std::next(it);
      std::ofstream(out) << index.dump(2);
    } else if (e.path().extension() == ".safetensors") {
      const std::string bytes = read_file_bytes(e.path().string());
      uint64_t hn = 0;
      for (int i = 0; i < 8; ++i) hn |= uint64_t(uint8_t(bytes[i])) << (8 * i);
      const json h = json::parse(bytes.substr(8, hn));
      const uint8_t* data = reinterpret_cast<const uint8_t*>(bytes.data()) + 8 + hn;
      SafetensorsWriter w;
      for (const auto& [tn, v] : h.items()) {
        if (tn == "__metadata__") continue;
        const TensorEdit what = edit(tn);
        if (what == TensorEdit::kDrop) continue;
        ASSIGN_OR_RETURN(DType dt, parse_dtype(v["dtype"].get<std::string>()));
        const size_t b = v["data_offsets"][0], en = v["data_offsets"][1];
        std::vector<uint8_t> payload(data + b, data + en);
        if (what == TensorEdit::kZero) std::fill(payload.begin(), payload.end(), 0);
        w.add(tn, dt, v["shape"].get<std::vector<int64_t>>(), std::move(payload));
      }
      RETURN_IF_ERROR(w.write(out));
    } else if (fs::is_regular_file(e.path())) {
      fs::copy_file(e.path(), out, fs::copy_options::overwrite_existing);
    }
  }
  return ok_status();
}

inline Status copy_checkpoint_without_draft_tensors(const std::string& src,
                                                    const std::string& dst) {
  return copy_checkpoint(src, dst, [](const std::string& n) {
    return is_draft_tensor(n) ? TensorEdit::kDrop : TensorEdit::kKeep;
  });
}

}  // namespace deepinfer::testing
