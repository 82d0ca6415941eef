// Incremental parser of model output (§6): reasoning, content and tool-call deltas as text
// arrives, never leaking partial tags or DSML markup. For well-formed output its final message
// equals parse_completion's; malformed output is parsed leniently, and finish() then reports
// what parse_completion rejects it for (malformed()).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/markers.h"
#include "deepinfer/recipe/parsed_message.h"

namespace deepinfer::recipe {

struct ToolCallDelta {
  int index = 0;
  std::string name;       // set only in the first delta of a call
  std::string arguments;  // next fragment of the arguments JSON text
};

struct StreamDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class StreamingParser {
 public:
  // With `parse_tool_calls` off (no tools offered, or tool_choice "none") DSML markup is
  // ordinary text: it stays in content (or reasoning) verbatim and no tool call is emitted.
  explicit StreamingParser(bool thinking, Variant variant = Variant::kV41,
                           bool parse_tool_calls = true);

  // Consumes a chunk of completion text (any split, even inside a UTF-8 character) and
  // appends what became certain to *out.
  void feed(std::string_view chunk, StreamDelta* out);
  // End of stream: flushes held-back text, closes an open reasoning or tool call, and checks the
  // whole completion as parse_completion does. eos_in_text: the text carries its final EOS (as
  // `recipe parse` input does); false for callers whose text stops before it (the engine stops
  // on the EOS id without its text), whose EOS is then taken as read.
  void finish(StreamDelta* out, bool eos_in_text = true);
  // After finish(): ok, or parse_completion's error for the whole completion (reasoning that
  // never ends, text after the tool calls, text before <think>, bad DSML...). message() stays
  // the lenient reading either way.
  const Status& malformed() const { return malformed_; }
  // Everything emitted so far, assembled.
  const ParsedMessage& message() const { return msg_; }
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State {
    kReasoning,
    kContent,
    kToolBody,
    kToolName,
    kParamName,
    kParamFlag,
    kParamValue,
    kDone
  };
  enum class Action {
    kToContent,
    kToReasoning,
    kAbsorb,
    kCallsOpen,
    kCallsClose,
    kInvokeOpen,
    kInvokeClose,
    kParamOpen,
    kParamClose,
    kNameEnd,
    kFlagBegin,
    kFlagEnd,
    kEos
  };
  struct Terminal {
    std::string text;
    Action action;
  };
  const std::vector<Terminal>& terminals() const;
  void process(bool final, StreamDelta* out);
  void emit_text(std::string_view text, StreamDelta* out);
  void apply(Action a, StreamDelta* out);
  void add_args(std::string_view text, StreamDelta* out);
  void end_value(StreamDelta* out);
  void close_call(StreamDelta* out);

  State state_;
  bool thinking_;
  Variant variant_;
  bool parse_tool_calls_;
  std::string raw_;  // everything fed, for the end-of-stream check
  Status malformed_;
  bool checked_ = false;
  std::vector<Terminal> by_state_[8];
  std::string buf_;  // unconsumed input (a possible partial terminal, or a partial character)
  std::string name_, key_, flag_;
  bool in_call_ = false;
  int params_ = 0;
  bool value_is_string_ = false;
  ParsedMessage msg_;
};

}  // namespace deepinfer::recipe
