// OpenAI-style chat request -> DeepSeek V4.1 (or V4) prompt text, byte-exact with DeepSeek's
// encoding.py (and vLLM's port for the serving extras). See shared/spec/chat_recipe.md §2-3, §7.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/markers.h"
#include "deepinfer/recipe/python_json.h"

namespace deepinfer::recipe {

struct EncodeOptions {
  Variant variant = Variant::kV41;
  bool thinking = false;
  bool drop_thinking = true;
  int reasoning_budget = 75;              // the number rendered in V4.1's effort line
  std::string reasoning_effort = "high";  // the name, for V4's effort texts
  bool add_bos = true;
  // Unset: the official encoder's behaviour at the end of the conversation. Set: vLLM's
  // add_generation_prompt (false = no header after the last message; true = a header even
  // after a trailing assistant / index-0 system message).
  std::optional<bool> add_generation_prompt;
  // The final assistant message is a prefill: no EOS, and reasoning-only is left open.
  bool continue_final_message = false;
};

// The encoder's own input: message dicts (DeepSeek's field names) plus options.
struct EncoderInput {
  Json messages;
  EncodeOptions options;
};

// §2: validates the request and maps it. Errors name the offending field, e.g.
// "messages[2].role: unknown role 'robot'".
StatusOr<EncoderInput> map_chat_request(const Json& request, Variant variant = Variant::kV41);

// One stretch of a rendered prompt. `markup` is the recipe's own text: BOS/EOS, role, think,
// task and image markers, DSML tags, the fixed tool/effort/format instructions, separators.
// Everything else came from the request (contents, reasoning, tool schemas, call names and
// arguments, tool results) and is to be tokenized as plain text, so that text spelling a
// control token cannot forge turns or tool calls.
struct PromptPiece {
  std::string text;
  bool markup = false;
};
// Pieces alternate between markup and request text; none is empty.
using SegmentedPrompt = std::vector<PromptPiece>;

// The pieces' texts concatenated: encode_messages' string.
std::string join_prompt(const SegmentedPrompt& pieces);

// §3: renders encoder input. Errors name the message field.
StatusOr<std::string> encode_messages(const Json& messages, const EncodeOptions& options);
StatusOr<SegmentedPrompt> encode_messages_segmented(const Json& messages,
                                                    const EncodeOptions& options);

// map_chat_request + encode_messages.
StatusOr<std::string> encode_chat_request(const Json& request, Variant variant = Variant::kV41);
// Same, from JSON text; catches JSON syntax errors.
StatusOr<std::string> encode_chat_request_text(std::string_view request_json,
                                               Variant variant = Variant::kV41);
// map_chat_request + encode_messages_segmented (what the engine tokenizes).
StatusOr<SegmentedPrompt> encode_chat_request_segmented(const Json& request,
                                                        Variant variant = Variant::kV41);

}  // namespace deepinfer::recipe
