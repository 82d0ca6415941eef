// Shared by the model families' config parsers: typed reads of config.json fields whose errors
// name the file and the field as the file spells it, and reading the file itself.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::model_config {

using nlohmann::json;

// Reads typed fields of one JSON object and remembers the first error. `prefix` ("text_config.")
// makes every message name the field as it is spelled in the file.
class FieldReader {
 public:
  FieldReader(const json& j, std::string origin, std::string prefix = "")
      : j_(j), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  template <typename T>
  void req(const char* key, T* out) {
    if (!status_.ok()) return;
    if (!has(key)) {
      fail("missing required field '" + name(key) + "'");
      return;
    }
    read(key, j_[key], out);
  }
  template <typename T>
  void opt(const char* key, T* out) {
    if (status_.ok() && has(key)) read(key, j_[key], out);
  }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const json& at(const char* key) const { return j_[key]; }
  std::string name(const std::string& key) const { return prefix_ + key; }
  void fail(const std::string& msg) {
    if (status_.ok()) status_ = invalid_argument(origin_ + ": " + msg);
  }
  const Status& status() const { return status_; }

 private:
  template <typename T>
  void read(const char* key, const json& v, T* out) {
    if constexpr (std::is_same_v<T, std::vector<int>> || std::is_same_v<T, std::vector<int64_t>>) {
      if (!v.is_array()) return wrong_type(key, v);
      out->clear();
      for (const json& e : v) {
        if (!e.is_number_integer()) {
          fail("field '" + name(key) + "' must hold integers (found " + e.dump() + ")");
          return;
        }
        out->push_back(e.get<typename T::value_type>());
      }
    } else {
      bool ok;
      if constexpr (std::is_same_v<T, std::string>) {
        ok = v.is_string();
      } else if constexpr (std::is_floating_point_v<T>) {
        ok = v.is_number();
      } else if constexpr (std::is_same_v<T, bool>) {
        ok = v.is_boolean();
      } else {
        ok = v.is_number_integer();
      }
      if (!ok) return wrong_type(key, v);
      *out = v.get<T>();
    }
  }
  void wrong_type(const char* key, const json& v) {
    fail("field '" + name(key) + "' has the wrong type (" + std::string(v.type_name()) + ")");
  }

  const json& j_;
  std::string origin_;
  std::string prefix_;
  Status status_;
};

// The text of MODEL_DIR/config.json; *path gets that path (errors name it).
StatusOr<std::string> read_config_file(const std::string& model_dir, std::string* path);

}  // namespace deepinfer::model_config
