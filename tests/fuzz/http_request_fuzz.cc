// libFuzzer target for the HTTP request reader (server/http_parse, server/request_checks): any
// bytes, read as one connection's pipelined requests, must give requests or a 4xx refusal,
// never a crash, a hang or an exception; every refusal and every check's answer must serialize
// (leniently: they can quote the request) with a non-null code.
#include <strings.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/server/http_parse.h"
#include "deepinfer/server/request_checks.h"

namespace {

using deepinfer::server::ApiError;
using nlohmann::json;

void check_error(const ApiError& e) {
  if (e.http_status < 400 || e.http_status > 499 || e.message.empty()) std::abort();
  const json body = deepinfer::server::error_body(e);
  if (!body["error"]["code"].is_string()) std::abort();
  if (body.dump(-1, ' ', false, json::error_handler_t::replace).empty()) std::abort();
}

std::vector<std::string_view> values(const deepinfer::server::ParsedHttpRequest& r,
                                     std::string_view name) {
  std::vector<std::string_view> out;
  for (const auto& [k, v] : r.fields)
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), name.size()) == 0)
      out.emplace_back(v);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Small limits so that the fuzzer reaches them.
  const deepinfer::server::HttpLimits limits{512, 128, 1024};
  const std::vector<std::string> allowed = {"my.box", "*.bad"};
  for (const auto& r : deepinfer::server::parse_pipelined(bytes, limits)) {
    if (r.error) {
      check_error(*r.error);
      continue;
    }
    if (auto e = deepinfer::server::check_host(values(r, "host"), allowed)) check_error(*e);
    if (auto e = deepinfer::server::check_authorization(values(r, "authorization"), "sk-key"))
      check_error(*e);
    if (auto e = deepinfer::server::check_content_type(values(r, "content-type"))) check_error(*e);
    if (r.body.size() > limits.max_body_bytes) std::abort();
  }
  return 0;
}
