// libFuzzer target for the OpenAI request mapping (server/protocol): parse_request must answer
// any bytes on both endpoints with a request or a 4xx error, never crash, recurse without bound
// or throw, and every error body must serialize (leniently: messages may quote invalid UTF-8) with
// a non-null code.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "deepinfer/server/protocol.h"

namespace {

using deepinfer::server::ApiError;
using deepinfer::server::Endpoint;
using deepinfer::server::ParsedRequest;
using nlohmann::json;

std::string lenient(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void check_error(const ApiError& e) {
  if (e.http_status < 400 || e.http_status > 599 || e.message.empty()) std::abort();
  const json body = deepinfer::server::error_body(e);
  if (!body["error"]["code"].is_string() || body["error"]["code"].get<std::string>().empty())
    std::abort();
  if (lenient(body).empty()) std::abort();
}

// Engine errors quote the request (a grammar error can quote half a character): whatever they
// say must serialize.
void check_quoted(std::string_view body, const ParsedRequest& req) {
  const std::string quoted = "so_args.regex: bad pattern '" + std::string(body.substr(0, 64)) + "'";
  check_error(deepinfer::server::error_from_status(deepinfer::invalid_argument(quoted), req));
  check_error(deepinfer::server::error_from_status(deepinfer::internal_error(quoted), req));
}

void run(Endpoint ep, std::string_view body, int64_t vocab, deepinfer::recipe::Variant variant) {
  ParsedRequest req;
  ApiError err;
  if (!deepinfer::server::parse_request(ep, body, vocab, variant, &req, &err)) {
    if (err.http_status != 400) std::abort();
    check_error(err);
    check_quoted(body, req);
    return;
  }
  if (deepinfer::server::json_nesting_depth(body) > deepinfer::server::kMaxJsonDepth) std::abort();
  const int n = req.gen.params.n;
  if (n < 1 || n > deepinfer::server::kMaxChoices) std::abort();
  if (ep == Endpoint::kCompletions) {
    if (req.prompts.empty() ||
        req.prompts.size() * static_cast<size_t>(n) > deepinfer::server::kMaxChoices)
      std::abort();
    for (size_t i = 0; i < req.prompts.size(); ++i) {
      const deepinfer::GenerateRequest g = deepinfer::server::request_for_prompt(req, i);
      if (g.prompt.has_value() == req.prompts[i].is_ids) std::abort();
      for (int32_t id : g.prompt_ids)
        if (id < 0 || id >= vocab) std::abort();
    }
    if (req.echo && req.gen.params.logprobs) std::abort();
  } else {
    if (!req.gen.chat || !req.gen.chat->is_object()) std::abort();
    (void)lenient(*req.gen.chat);
  }
  check_quoted(body, req);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  // A small vocabulary makes id range checks reachable; DeepSeek's is the real one.
  const int64_t vocab = size % 2 ? 129280 : 50;
  // The chat format (tool-call tags) depends on the model family: both are reachable.
  for (const auto variant : {deepinfer::recipe::Variant::kV4, deepinfer::recipe::Variant::kV41}) {
    run(Endpoint::kCompletions, body, vocab, variant);
    run(Endpoint::kChatCompletions, body, vocab, variant);
  }
  return 0;
}
