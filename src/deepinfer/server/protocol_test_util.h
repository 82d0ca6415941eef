// Helpers shared by the protocol tests (request_parsing_test, responses_test, tool_choice_test).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "deepinfer/server/protocol.h"

namespace deepinfer::server {

inline constexpr int64_t kVocab = 1000;

inline ApiError parse_error(Endpoint ep, const std::string& body) {
  ParsedRequest req;
  ApiError err;
  EXPECT_FALSE(parse_request(ep, body, kVocab, recipe::Variant::kV41, &req, &err)) << body;
  return err;
}

inline RequestOutput make_output(const std::string& text, int tokens) {
  RequestOutput out;
  out.request_id = "r";
  out.finished = true;
  out.usage.prompt_tokens = 3;
  CompletionOutput c;
  c.text = text;
  c.token_ids.assign(tokens, 1);
  c.finish_reason = "stop";
  out.outputs.push_back(c);
  return out;
}

}  // namespace deepinfer::server
