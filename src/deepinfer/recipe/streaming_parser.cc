#include "deepinfer/recipe/streaming_parser.h"

#include "deepinfer/recipe/completion_parser.h"

namespace deepinfer::recipe {
namespace {

// Length of the longest suffix of s that is a proper prefix of t.
size_t partial_suffix(std::string_view s, std::string_view t) {
  size_t max = std::min(s.size(), t.size() - 1);
  for (size_t n = max; n > 0; --n)
    if (s.substr(s.size() - n) == t.substr(0, n)) return n;
  return 0;
}

// Bytes at the end of s that start an incomplete UTF-8 character.
size_t incomplete_utf8_tail(std::string_view s) {
  size_t n = s.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    unsigned char c = s[n - k];
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > static_cast<int>(k) ? k : 0;
  }
  return 0;
}

void json_escape_body(std::string_view s, std::string* out) {
  std::string q;
  python_json_quote(s, &q);
  out->append(q, 1, q.size() - 2);
}

}  // namespace

StreamingParser::StreamingParser(bool thinking, Variant variant, bool parse_tool_calls)
    : state_(thinking ? State::kReasoning : State::kContent),
      thinking_(thinking),
      variant_(variant),
      parse_tool_calls_(parse_tool_calls) {
  const DsmlTags& t = DsmlTags::of(variant);
  std::string invoke_name = t.invoke_open + " name=\"";
  std::string param_name = t.param_open + " name=\"";
  auto& r = by_state_[static_cast<int>(State::kReasoning)];
  r = {{kThinkClose, Action::kToContent},
       {"\n\n" + t.calls_open, Action::kCallsOpen},
       {t.calls_open, Action::kCallsOpen},
       {kThinkOpen, Action::kAbsorb},
       {kEos, Action::kEos},
       {kBos, Action::kAbsorb}};
  auto& c = by_state_[static_cast<int>(State::kContent)];
  c = {{"\n\n" + t.calls_open, Action::kCallsOpen},
       {t.calls_open, Action::kCallsOpen},
       {kThinkClose, Action::kAbsorb},
       {kThinkOpen, Action::kToReasoning},
       {kEos, Action::kEos},
       {kBos, Action::kAbsorb}};
  for (auto* v : {&r, &c}) {
    if (!parse_tool_calls) {
      // Without tools there are no calls: the markup is text like any other.
      std::erase_if(*v, [](const Terminal& x) { return x.action == Action::kCallsOpen; });
      continue;
    }
    // DSML markup never reaches content or reasoning: an invoke without its calls block opens
    // one implicitly, and any other stray DSML marker is dropped.
    v->push_back({invoke_name, Action::kInvokeOpen});
    v->push_back({kDsml, Action::kAbsorb});
  }
  by_state_[static_cast<int>(State::kToolBody)] = {{invoke_name, Action::kInvokeOpen},
                                                   {param_name, Action::kParamOpen},
                                                   {t.invoke_close, Action::kInvokeClose},
                                                   {t.calls_close, Action::kCallsClose},
                                                   {kEos, Action::kEos}};
  by_state_[static_cast<int>(State::kToolName)] = {{"\">", Action::kNameEnd}, {kEos, Action::kEos}};
  by_state_[static_cast<int>(State::kParamName)] = {{"\" string=\"", Action::kFlagBegin},
                                                    {kEos, Action::kEos}};
  by_state_[static_cast<int>(State::kParamFlag)] = {{"\">", Action::kFlagEnd},
                                                    {kEos, Action::kEos}};
  // A missing parameter close is tolerated when the next parameter or the invoke end follows.
  by_state_[static_cast<int>(State::kParamValue)] = {{t.param_close, Action::kParamClose},
                                                     {param_name, Action::kParamOpen},
                                                     {t.invoke_close, Action::kInvokeClose},
                                                     {kEos, Action::kEos}};
}

const std::vector<StreamingParser::Terminal>& StreamingParser::terminals() const {
  return by_state_[static_cast<int>(state_)];
}

void StreamingParser::add_args(std::string_view text, StreamDelta* out) {
  if (text.empty()) return;
  int idx = static_cast<int>(msg_.tool_calls.size()) - 1;
  msg_.tool_calls.back().arguments += text;
  if (!out->tool_calls.empty() && out->tool_calls.back().index == idx)
    out->tool_calls.back().arguments += text;
  else
    out->tool_calls.push_back({idx, "", std::string(text)});
}

void StreamingParser::emit_text(std::string_view text, StreamDelta* out) {
  if (text.empty()) return;
  switch (state_) {
    case State::kReasoning:
      msg_.reasoning_content += text;
      out->reasoning += text;
      break;
    case State::kContent:
      msg_.content += text;
      out->content += text;
      break;
    case State::kToolName:
      name_ += text;
      break;
    case State::kParamName:
      key_ += text;
      break;
    case State::kParamFlag:
      flag_ += text;
      break;
    case State::kParamValue:
      if (value_is_string_) {
        std::string esc;
        json_escape_body(text, &esc);
        add_args(esc, out);
      } else {
        add_args(text, out);
      }
      break;
    case State::kToolBody:  // whitespace between tags carries nothing
    case State::kDone:
      break;
  }
}

void StreamingParser::end_value(StreamDelta* out) {
  if (state_ != State::kParamValue) return;
  if (value_is_string_) add_args("\"", out);
  state_ = State::kToolBody;
}

void StreamingParser::close_call(StreamDelta* out) {
  if (!in_call_) return;
  add_args(params_ == 0 ? "{}" : "}", out);
  in_call_ = false;
}

void StreamingParser::apply(Action a, StreamDelta* out) {
  switch (a) {
    case Action::kAbsorb:
      break;
    case Action::kToContent:
      state_ = State::kContent;
      break;
    case Action::kToReasoning:
      state_ = State::kReasoning;
      break;
    case Action::kCallsOpen:
      state_ = State::kToolBody;
      break;
    case Action::kInvokeOpen:
      close_call(out);
      name_.clear();
      state_ = State::kToolName;
      break;
    case Action::kNameEnd: {
      msg_.tool_calls.push_back({name_, ""});
      out->tool_calls.push_back({static_cast<int>(msg_.tool_calls.size()) - 1, name_, ""});
      in_call_ = true;
      params_ = 0;
      state_ = State::kToolBody;
      break;
    }
    case Action::kParamOpen:
      end_value(out);
      if (!in_call_) {  // parameter outside an invoke: ignore its text as markup
        state_ = State::kParamName;
        key_.clear();
        break;
      }
      key_.clear();
      state_ = State::kParamName;
      break;
    case Action::kFlagBegin:
      flag_.clear();
      state_ = State::kParamFlag;
      break;
    case Action::kFlagEnd: {
      value_is_string_ = flag_ == "true";
      if (in_call_) {
        std::string head = params_ == 0 ? "{" : ", ";
        python_json_quote(key_, &head);
        head += ": ";
        if (value_is_string_) head += "\"";
        add_args(head, out);
        ++params_;
        state_ = State::kParamValue;
      } else {
        state_ = State::kToolBody;
      }
      break;
    }
    case Action::kParamClose:
      end_value(out);
      break;
    case Action::kInvokeClose:
      end_value(out);
      close_call(out);
      state_ = State::kToolBody;
      break;
    case Action::kCallsClose:
      close_call(out);
      state_ = State::kContent;
      break;
    case Action::kEos:
      end_value(out);
      close_call(out);
      state_ = State::kDone;
      break;
  }
}

void StreamingParser::process(bool final, StreamDelta* out) {
  size_t pos = 0;
  while (state_ != State::kDone && pos < buf_.size()) {
    std::string_view rest = std::string_view(buf_).substr(pos);
    size_t best = std::string_view::npos;
    const Terminal* hit = nullptr;
    for (const Terminal& t : terminals()) {
      size_t p = rest.find(t.text);
      if (p != std::string_view::npos &&
          (p < best || (p == best && t.text.size() > hit->text.size())))
        best = p, hit = &t;
    }
    if (hit && !final) {
      // A longer terminal may start at or before the hit and still be arriving
      // ("\n\n<｜DSML｜ calls>" vs "｜DSML｜"): wait for it.
      size_t wait_from = std::string_view::npos;
      for (const Terminal& t : terminals()) {
        size_t n = partial_suffix(rest, t.text);
        if (n > 0 && rest.size() - n <= best) wait_from = std::min(wait_from, rest.size() - n);
      }
      if (wait_from != std::string_view::npos) {
        emit_text(rest.substr(0, wait_from), out);
        pos += wait_from;
        break;
      }
    }
    if (hit) {
      emit_text(rest.substr(0, best), out);
      pos += best + hit->text.size();
      apply(hit->action, out);
      continue;
    }
    size_t hold = 0;
    if (!final) {
      for (const Terminal& t : terminals()) hold = std::max(hold, partial_suffix(rest, t.text));
      if (hold == 0) hold = incomplete_utf8_tail(rest);
    }
    emit_text(rest.substr(0, rest.size() - hold), out);
    pos += rest.size() - hold;
    break;
  }
  if (state_ == State::kDone) pos = buf_.size();  // anything after EOS is not part of the message
  buf_.erase(0, pos);
}

void StreamingParser::feed(std::string_view chunk, StreamDelta* out) {
  raw_.append(chunk);  // text after EOS too: the strict check rejects it
  if (state_ == State::kDone) return;
  buf_.append(chunk);
  process(false, out);
}

void StreamingParser::finish(StreamDelta* out, bool eos_in_text) {
  // The same verdict as the strict parser by construction: it reads the whole text once.
  if (!checked_) {
    const std::string_view eos = kEos;
    if (!eos_in_text && !std::string_view(raw_).ends_with(eos)) raw_ += eos;
    StatusOr<ParsedMessage> strict = parse_completion(raw_, thinking_, variant_, parse_tool_calls_);
    malformed_ = strict.ok() ? Status() : strict.status();
    raw_ = std::string();
    checked_ = true;
  }
  if (state_ != State::kDone) {
    process(true, out);
    if (state_ == State::kToolName && !name_.empty()) apply(Action::kNameEnd, out);
    end_value(out);
    close_call(out);
    state_ = State::kDone;
  }
  buf_.clear();
}

}  // namespace deepinfer::recipe
