#include "deepinfer/recipe/completion_parser.h"

#include <initializer_list>

namespace deepinfer::recipe {
namespace {

struct Cursor {
  std::string_view text;
  size_t pos = 0;

  // Reads up to the earliest of `stops`; returns the text before it and which stop matched
  // (-1: none, then everything up to the end was read).
  int read_until(std::initializer_list<std::string_view> stops, std::string_view* before) {
    size_t best = std::string_view::npos;
    int which = -1, k = 0;
    for (std::string_view s : stops) {
      size_t p = text.find(s, pos);
      if (p != std::string_view::npos && p < best) best = p, which = k;
      ++k;
    }
    if (which < 0) {
      *before = text.substr(pos);
      pos = text.size();
      return -1;
    }
    *before = text.substr(pos, best - pos);
    pos = best + std::data(stops)[which].size();
    return which;
  }
};

// Python's str.isspace for the characters a model could plausibly emit.
size_t leading_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) ++i;
  return i;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string quote(std::string_view s) {
  std::string out;
  python_json_quote(s, &out);
  return out;
}

// `^\s*name="(.*?)">\n$` (Python: `$` may also sit before one final newline).
bool match_tool_name(std::string_view seg, std::string* name) {
  seg.remove_prefix(leading_space(seg));
  constexpr std::string_view kPre = "name=\"";
  if (seg.substr(0, kPre.size()) != kPre) return false;
  std::string_view rest = seg.substr(kPre.size());
  if (ends_with(rest, "\">\n\n")) {
    *name = rest.substr(0, rest.size() - 4);
    return true;
  }
  if (ends_with(rest, "\">\n")) {
    *name = rest.substr(0, rest.size() - 3);
    return true;
  }
  return false;
}

// `^ name="(.*?)" string="(true|false)">(.*?)<$` with DOTALL.
bool match_param(std::string_view seg, std::string* key, bool* is_string, std::string* value) {
  constexpr std::string_view kPre = " name=\"";
  if (seg.substr(0, kPre.size()) != kPre) return false;
  std::string_view rest = seg.substr(kPre.size());
  std::string_view tail;
  if (ends_with(rest, "<\n")) {
    tail = "<\n";
  } else if (ends_with(rest, "<")) {
    tail = "<";
  } else {
    return false;
  }
  constexpr std::string_view kTrue = "\" string=\"true\">", kFalse = "\" string=\"false\">";
  for (size_t p = 0; p < rest.size(); ++p) {
    for (std::string_view tag : {kTrue, kFalse}) {
      if (rest.substr(p, tag.size()) != tag) continue;
      size_t vbeg = p + tag.size();
      if (vbeg + tail.size() > rest.size()) continue;
      *key = rest.substr(0, p);
      *is_string = tag == kTrue;
      *value = rest.substr(vbeg, rest.size() - tail.size() - vbeg);
      return true;
    }
  }
  return false;
}

}  // namespace

Json to_json(const ParsedMessage& m) {
  Json calls = Json::array();
  for (const ToolCall& c : m.tool_calls)
    calls.push_back(
        {{"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return Json{{"role", "assistant"},
              {"reasoning_content", m.reasoning_content},
              {"content", m.content},
              {"tool_calls", calls}};
}

StatusOr<ParsedMessage> parse_completion(std::string_view text, bool thinking, Variant variant,
                                         bool parse_tool_calls) {
  const DsmlTags& tags = DsmlTags::of(variant);
  // Without tools a calls block is never found, so the markup stays where it is.
  const std::string calls_start =
      parse_tool_calls ? "\n\n" + tags.calls_open.substr(0, tags.calls_open.size() - 1)
                       : std::string(kEos);
  const std::string invoke_close = tags.invoke_close.substr(0, tags.invoke_close.size() - 1);
  const std::string param_close = tags.param_close.substr(1, tags.param_close.size() - 2);
  ParsedMessage msg;
  Cursor c{text};
  std::string_view seg;
  if (thinking) {
    int w = c.read_until({kThinkClose, calls_start}, &seg);
    if (w != 0) return invalid_argument("completion: invalid thinking format, missing </think>");
    msg.reasoning_content = seg;
  }
  int w = c.read_until({kEos, calls_start}, &seg);
  msg.content = seg;
  if (w == 1) {
    // Tool calls: `>\n` before each invoke, the name segment, then parameters.
    while (c.pos < text.size()) {
      int s = c.read_until({tags.invoke_open, tags.calls_close}, &seg);
      if (seg != ">\n")
        return invalid_argument("completion: tool call format error, expected '>\\n' but got '" +
                                std::string(seg) + "'");
      if (s == 1) break;
      if (s < 0) return invalid_argument("completion: missing special token in tool calls");
      s = c.read_until({tags.param_open, invoke_close}, &seg);
      ToolCall call;
      if (!match_tool_name(seg, &call.name))
        return invalid_argument("completion: tool name format error: '" + std::string(seg) + "'");
      std::vector<std::string> keys;
      std::string args = "{";
      while (s == 0) {
        c.read_until({param_close}, &seg);
        std::string key, value;
        bool is_string = false;
        if (!match_param(seg, &key, &is_string, &value))
          return invalid_argument("completion: parameter format error: '" + std::string(seg) + "'");
        for (const auto& k : keys)
          if (k == key)
            return invalid_argument("completion: duplicate parameter name: '" + key + "'");
        if (!keys.empty()) args += ", ";
        keys.push_back(key);
        // string=false values are copied verbatim, not re-serialised (3.0 stays 3.0).
        args += quote(key) + ": " + (is_string ? quote(value) : value);
        s = c.read_until({tags.param_open, invoke_close}, &seg);
        if (seg != ">\n")
          return invalid_argument("completion: parameter format error, expected '>\\n' but got '" +
                                  std::string(seg) + "'");
      }
      call.arguments = args + "}";
      msg.tool_calls.push_back(std::move(call));
    }
    int e = c.read_until({kEos}, &seg);
    if (!seg.empty()) return invalid_argument("completion: unexpected content after tool calls");
    w = e < 0 ? -1 : 0;
  } else if (w != 0) {
    return invalid_argument("completion: invalid format, missing EOS token");
  }
  if (c.pos != text.size()) return invalid_argument("completion: unexpected content at end");
  for (const char* sp : {kBos, kEos, kThinkOpen, kThinkClose, kDsml}) {
    if (!parse_tool_calls && sp == kDsml) continue;
    if (msg.content.find(sp) != std::string::npos ||
        msg.reasoning_content.find(sp) != std::string::npos)
      return invalid_argument(std::string("completion: unexpected special token '") + sp +
                              "' in content");
  }
  return msg;
}

}  // namespace deepinfer::recipe
