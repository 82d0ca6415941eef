#include "deepinfer/router/load_report.h"

#include <nlohmann/json.hpp>
#include <string>

namespace deepinfer::router {

Status parse_load_report(std::string_view body, WorkerLoad& out) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return invalid_argument("GET /load: not a JSON object");
  auto count = [&](const char* field, int64_t& v) -> Status {
    if (!j.contains(field) || !j[field].is_number_integer() || j[field].get<int64_t>() < 0)
      return invalid_argument(std::string("GET /load: '") + field + "' must be an integer >= 0");
    v = j[field].get<int64_t>();
    return ok_status();
  };
  WorkerLoad got = out;
  RETURN_IF_ERROR(count("num_running", got.num_running));
  RETURN_IF_ERROR(count("num_waiting", got.num_waiting));
  RETURN_IF_ERROR(count("max_num_seqs", got.max_num_seqs));
  if (!j.contains("kv_usage") || !j["kv_usage"].is_number() || j["kv_usage"].get<double>() < 0 ||
      j["kv_usage"].get<double>() > 1)
    return invalid_argument("GET /load: 'kv_usage' must be a number in [0, 1]");
  got.kv_usage = j["kv_usage"].get<double>();
  got.load_known = true;
  out = got;
  return ok_status();
}

}  // namespace deepinfer::router
