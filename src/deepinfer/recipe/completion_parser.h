// Strict parser of a full completion (DeepSeek's parse_message_from_completion_text, §5).
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/markers.h"
#include "deepinfer/recipe/parsed_message.h"

namespace deepinfer::recipe {

// `text` is everything after the prompt, including the final EOS text. Malformed output
// (missing </think> or EOS, bad DSML, duplicate parameters, markers inside content) is an
// invalid_argument error saying what was wrong. With `parse_tool_calls` off (no tools offered,
// or tool_choice "none") DSML markup is ordinary text and stays in content verbatim.
StatusOr<ParsedMessage> parse_completion(std::string_view text, bool thinking,
                                         Variant variant = Variant::kV41,
                                         bool parse_tool_calls = true);

}  // namespace deepinfer::recipe
