#include "deepinfer/model/config_field_reader.h"

#include <fstream>
#include <sstream>

namespace deepinfer::model_config {

StatusOr<std::string> read_config_file(const std::string& model_dir, std::string* path) {
  *path = model_dir + "/config.json";
  std::ifstream f(*path);
  if (!f) return not_found(*path + ": cannot open config.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace deepinfer::model_config
