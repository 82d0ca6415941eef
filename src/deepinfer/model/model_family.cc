#include "deepinfer/model/model_family.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace deepinfer {

const char* model_family_name(ModelFamily family) {
  return family == ModelFamily::kDeepseekV41 ? "deepseek_v41" : "deepseek_v4";
}

StatusOr<ModelFamily> model_family_from_config_json(const std::string& json_text,
                                                    const std::string& origin) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument(origin + ": not a JSON object");
  auto it = j.find("model_type");
  if (it == j.end() || it->is_null())
    return invalid_argument(origin + ": missing required field 'model_type'");
  if (!it->is_string())
    return invalid_argument(origin + ": field 'model_type' has the wrong type (" +
                            std::string(it->type_name()) + ")");
  const std::string type = it->get<std::string>();
  if (type == "deepseek_v4") return ModelFamily::kDeepseekV4;
  if (type == "deepseek_v41" || type == "deepseek_v41_text") return ModelFamily::kDeepseekV41;
  return invalid_argument(origin + ": unsupported model_type '" + type +
                          "' (supported: deepseek_v4, deepseek_v41)");
}

StatusOr<ModelFamily> detect_model_family(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  std::ifstream f(path);
  if (!f) return not_found(path + ": cannot open config.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return model_family_from_config_json(ss.str(), path);
}

}  // namespace deepinfer
