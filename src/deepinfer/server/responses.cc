// Engine outputs -> OpenAI response bodies, SSE chunks, logprobs and usage (protocol.h).
#include <algorithm>

#include "deepinfer/server/protocol.h"
#include "deepinfer/server/random_id.h"

namespace deepinfer::server {
namespace {

using nlohmann::json;

// vLLM's floor: -inf (a masked token) is not representable in JSON.
double clamp_logprob(float lp) { return std::max(static_cast<double>(lp), -9999.0); }

json token_bytes(const std::string& t) {
  json b = json::array();
  for (unsigned char c : t) b.push_back(static_cast<int>(c));
  return b;
}

json tool_call_json(const recipe::ToolCall& c, const std::string& id) {
  return {{"id", id},
          {"type", "function"},
          {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

}  // namespace

int64_t count_chars(std::string_view utf8) {
  int64_t n = 0;
  for (char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

json usage_json(const Usage& u, int64_t completion_tokens, int64_t reasoning_tokens) {
  // Re-tokenizing the reasoning text can give more tokens than were generated (random output
  // tokenizes differently); it is a part of the completion, never more.
  reasoning_tokens = std::min(reasoning_tokens, completion_tokens);
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", u.prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"completion_tokens_details",
           {{"reasoning_tokens", reasoning_tokens},
            {"accepted_prediction_tokens", u.accepted_prediction_tokens}}},
          {"prompt_cache_hit_tokens", u.cached_tokens},
          {"prompt_cache_miss_tokens", u.prompt_tokens - u.cached_tokens}};
}

recipe::ParsedMessage parse_chat_output(const std::string& text, bool thinking,
                                        recipe::Variant variant, bool parse_tool_calls) {
  // The streaming parser's message is the strict parser's for well-formed output (the recipe
  // conformance tests hold it to that) and its lenient reading otherwise. The engine stops on
  // the EOS id without its text.
  recipe::StreamingParser parser(thinking, variant, parse_tool_calls);
  recipe::StreamDelta ignored;
  parser.feed(text, &ignored);
  parser.finish(&ignored, /*eos_in_text=*/false);
  return parser.message();
}

static int64_t total_completion_tokens(const RequestOutput& out) {
  int64_t n = 0;
  for (const CompletionOutput& c : out.outputs) n += static_cast<int64_t>(c.token_ids.size());
  return n;
}

json chat_logprobs(std::span<const TokenLogprobs> lps, const TokenText& token_text) {
  json content = json::array();
  for (const TokenLogprobs& t : lps) {
    std::string text = token_text(t.token);
    json top = json::array();
    for (const auto& [id, lp] : t.top) {
      std::string alt = token_text(id);
      top.push_back({{"token", alt}, {"logprob", clamp_logprob(lp)}, {"bytes", token_bytes(alt)}});
    }
    content.push_back({{"token", text},
                       {"logprob", clamp_logprob(t.logprob)},
                       {"bytes", token_bytes(text)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs(std::span<const TokenLogprobs> lps, const TokenText& token_text,
                         int64_t* text_offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprobs& t : lps) {
    std::string text = token_text(t.token);
    tokens.push_back(text);
    token_lps.push_back(clamp_logprob(t.logprob));
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[token_text(id)] = clamp_logprob(lp);
    tops.push_back(top);
    // A token that starts inside a character (a continuation byte) is at that character.
    const bool mid_char =
        !text.empty() && (static_cast<unsigned char>(text[0]) & 0xC0) == 0x80 && *text_offset > 0;
    offsets.push_back(*text_offset - (mid_char ? 1 : 0));
    *text_offset += count_chars(text);
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         std::span<const RequestOutput> outs, int n,
                         std::span<const std::string> echo_texts, const TokenText& token_text) {
  json choices = json::array();
  Usage usage;
  int64_t completion_tokens = 0;
  for (size_t p = 0; p < outs.size(); ++p) {
    const RequestOutput& out = outs[p];
    const std::string* echo = p < echo_texts.size() ? &echo_texts[p] : nullptr;
    for (const CompletionOutput& c : out.outputs) {
      int64_t offset = echo ? count_chars(*echo) : 0;
      json lps = token_text && !c.logprobs.empty()
                     ? completion_logprobs(c.logprobs, token_text, &offset)
                     : json();
      choices.push_back({{"index", static_cast<int64_t>(p) * n + c.index},
                         {"text", echo ? *echo + c.text : c.text},
                         {"logprobs", lps},
                         {"finish_reason", c.finish_reason ? json(*c.finish_reason) : json()}});
    }
    usage.prompt_tokens += out.usage.prompt_tokens;
    usage.cached_tokens += out.usage.cached_tokens;
    usage.accepted_prediction_tokens += out.usage.accepted_prediction_tokens;
    completion_tokens += total_completion_tokens(out);
  }
  // Sorted by index, whatever order the samples finished in.
  std::stable_sort(choices.begin(), choices.end(), [](const json& a, const json& b) {
    return a["index"].get<int64_t>() < b["index"].get<int64_t>();
  });
  return {{"id", id},           {"object", "text_completion"},
          {"created", created}, {"model", model},
          {"choices", choices}, {"usage", usage_json(usage, completion_tokens, 0)}};
}

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         const RequestOutput& out, const TokenText& token_text) {
  return completion_response(id, created, model, std::span<const RequestOutput>(&out, 1),
                             std::max<int>(1, static_cast<int>(out.outputs.size())), {},
                             token_text);
}

json chat_response(const std::string& id, int64_t created, const std::string& model,
                   const RequestOutput& out, bool thinking, int64_t reasoning_tokens,
                   recipe::Variant variant, const TokenText& token_text, bool parse_tool_calls) {
  json choices = json::array();
  for (const CompletionOutput& c : out.outputs) {
    recipe::ParsedMessage m = parse_chat_output(c.text, thinking, variant, parse_tool_calls);
    json msg = {{"role", "assistant"}, {"content", m.content}};
    if (thinking) msg["reasoning_content"] = m.reasoning_content;
    std::optional<std::string> finish = c.finish_reason;
    if (!m.tool_calls.empty()) {
      json calls = json::array();
      for (size_t i = 0; i < m.tool_calls.size(); ++i)
        calls.push_back(tool_call_json(m.tool_calls[i], random_id("call_")));
      msg["tool_calls"] = calls;
      if (finish == "stop") finish = "tool_calls";
    }
    json lps = token_text && !c.logprobs.empty() ? chat_logprobs(c.logprobs, token_text) : json();
    choices.push_back({{"index", c.index},
                       {"message", msg},
                       {"logprobs", lps},
                       {"finish_reason", finish ? json(*finish) : json()}});
  }
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", choices},
          {"usage", usage_json(out.usage, total_completion_tokens(out), reasoning_tokens)}};
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model, int index,
                      const std::string& delta_text,
                      const std::optional<std::string>& finish_reason, const json& logprobs) {
  json choice = {{"index", index},
                 {"text", delta_text},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_reason ? json(*finish_reason) : json()}};
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, int index,
                const recipe::StreamDelta& delta, bool first,
                const std::optional<std::string>& finish_reason, const json& logprobs) {
  json d = json::object();
  if (first) d["role"] = "assistant";
  if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
  if (!delta.content.empty() || first) d["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    json calls = json::array();
    for (const recipe::ToolCallDelta& t : delta.tool_calls) {
      json c = {{"index", t.index}, {"function", {{"arguments", t.arguments}}}};
      if (!t.name.empty()) {
        c["id"] = random_id("call_");
        c["type"] = "function";
        c["function"]["name"] = t.name;
      }
      calls.push_back(c);
    }
    d["tool_calls"] = calls;
  }
  json choice = {{"index", index},
                 {"delta", d},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_reason ? json(*finish_reason) : json()}};
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

json usage_chunk(const std::string& id, int64_t created, const std::string& model,
                 Endpoint endpoint, const json& usage) {
  return {{"id", id},
          {"object",
           endpoint == Endpoint::kChatCompletions ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage}};
}

std::string sse_event(const json& j) {
  // error_handler_t::replace: model output may split or contain invalid UTF-8.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json model_response(const std::string& id, int64_t created) {
  return {{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "deepinfer"}};
}

json models_response(const std::vector<std::string>& ids, int64_t created) {
  json data = json::array();
  for (const std::string& id : ids) data.push_back(model_response(id, created));
  return {{"object", "list"}, {"data", data}};
}

}  // namespace deepinfer::server
