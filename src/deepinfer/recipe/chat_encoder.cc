// §3 of chat_recipe.md: merging, sorting, dropping old reasoning, and rendering each message.
#include "deepinfer/recipe/chat_encoder.h"

#include <algorithm>
#include <map>

namespace deepinfer::recipe {
namespace {

const std::map<std::string, std::string>& task_tokens() {
  static const std::map<std::string, std::string> t = {
      {"action", "<｜action｜>"}, {"query", "<｜query｜>"}, {"authority", "<｜authority｜>"},
      {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"}};
  return t;
}

constexpr const char* kV4MaxEffort =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate "
    "step, considered alternative, and rejected hypothesis to ensure absolutely no assumption "
    "is left unchecked.\n\n";

std::string str_or_empty(const Json& m, const char* key) {
  if (!m.is_object() || !m.contains(key) || !m[key].is_string()) return "";
  return m[key].get<std::string>();
}

std::string role_of(const Json& m) { return str_or_empty(m, "role"); }

bool non_empty(const Json& m, const char* key) {
  if (!m.contains(key)) return false;
  const Json& v = m[key];
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

bool has_task(const Json& m) { return m.contains("task") && !m["task"].is_null(); }

// Builds the prompt as pieces: recipe markup vs request text. Adjacent pieces of one kind
// merge and empty ones are dropped, so the pieces alternate.
class PromptBuilder {
 public:
  void mark(std::string_view s) { add(s, true); }
  void text(std::string_view s) { add(s, false); }
  SegmentedPrompt take() { return std::move(pieces_); }

 private:
  void add(std::string_view s, bool markup) {
    if (s.empty()) return;
    if (!pieces_.empty() && pieces_.back().markup == markup)
      pieces_.back().text.append(s);
    else
      pieces_.push_back({std::string(s), markup});
  }
  SegmentedPrompt pieces_;
};

class Renderer {
 public:
  Renderer(const EncodeOptions& o) : o_(o), tags_(DsmlTags::of(o.variant)) {}

  StatusOr<SegmentedPrompt> render(const Json& input) {
    Json msgs = merge(input);
    sort_tool_results(&msgs);
    drop_ = o_.drop_thinking;
    for (const Json& m : msgs)
      if (non_empty(m, "tools")) drop_ = false;  // any tools keep all historical reasoning
    if (o_.thinking && drop_) msgs = drop_old_reasoning(msgs);
    last_user_ = last_user_like(msgs);
    PromptBuilder out;
    if (o_.add_bos) out.mark(kBos);
    for (size_t i = 0; i < msgs.size(); ++i) RETURN_IF_ERROR(render_message(msgs, i, &out));
    return out.take();
  }

 private:
  bool user_like(const Json& msgs, size_t i) const {
    std::string r = role_of(msgs[i]);
    if (r == "user" || r == "developer") return true;
    return o_.variant == Variant::kV41 && r == "system" && i > 0;
  }

  int last_user_like(const Json& msgs) const {
    for (size_t i = msgs.size(); i-- > 0;)
      if (user_like(msgs, i)) return static_cast<int>(i);
    return -1;
  }

  // Tool messages become tool_result blocks of a user turn; adjacent user turns merge.
  Json merge(const Json& in) const {
    Json out = Json::array();
    auto last_is_open_user = [&](bool need_no_task) {
      if (out.empty()) return false;
      const Json& b = out.back();
      if (role_of(b) != "user" || !b.contains("content_blocks")) return false;
      return !need_no_task || !has_task(b);
    };
    for (const Json& m : in) {
      std::string role = role_of(m);
      if (role == "tool") {
        Json block = {{"type", "tool_result"},
                      {"tool_use_id", m.value("tool_call_id", Json(""))},
                      {"content", m.value("content", Json(""))}};
        if (last_is_open_user(false)) {
          out.back()["content_blocks"].push_back(block);
        } else {
          out.push_back(Json{{"role", "user"}, {"content_blocks", Json::array({block})}});
        }
      } else if (role == "user") {
        Json text = m.value("content", Json(""));
        Json block = {{"type", "text"}, {"text", text.is_string() ? text : Json("")}};
        if (m.contains(kImageOffsetsField)) block[kImageOffsetsField] = m[kImageOffsetsField];
        if (last_is_open_user(true)) {
          out.back()["content_blocks"].push_back(block);
        } else {
          Json nm;
          if (o_.variant == Variant::kV41) {
            nm = m;
          } else {
            nm = Json{{"role", "user"}, {"content", text}};
            for (const char* k : {"task", "wo_eos", "mask"})
              if (m.contains(k)) nm[k] = m[k];
          }
          nm["content_blocks"] = Json::array({block});
          out.push_back(std::move(nm));
        }
      } else {
        out.push_back(m);
      }
    }
    return out;
  }

  // Tool results follow the order of the calls of the latest assistant that made calls.
  static void sort_tool_results(Json* msgs) {
    std::map<std::string, int> order;
    for (Json& m : *msgs) {
      std::string role = role_of(m);
      if (role == "assistant" && non_empty(m, "tool_calls") && m["tool_calls"].is_array()) {
        order.clear();
        for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
          const Json& tc = m["tool_calls"][i];
          std::string id = str_or_empty(tc, "id");
          if (id.empty() && tc.contains("function")) id = str_or_empty(tc["function"], "id");
          if (!id.empty()) order[id] = static_cast<int>(i);
        }
      } else if (role == "user" && non_empty(m, "content_blocks")) {
        Json& blocks = m["content_blocks"];
        std::vector<Json> results;
        for (const Json& b : blocks)
          if (str_or_empty(b, "type") == "tool_result") results.push_back(b);
        if (results.size() <= 1 || order.empty()) continue;
        auto pos = [&](const Json& b) {
          auto it = order.find(str_or_empty(b, "tool_use_id"));
          return it == order.end() ? 0 : it->second;
        };
        std::stable_sort(results.begin(), results.end(),
                         [&](const Json& a, const Json& b) { return pos(a) < pos(b); });
        size_t k = 0;
        for (Json& b : blocks)
          if (str_or_empty(b, "type") == "tool_result") b = results[k++];
      }
    }
  }

  Json drop_old_reasoning(const Json& msgs) const {
    int last = last_user_like(msgs);
    Json out = Json::array();
    for (size_t i = 0; i < msgs.size(); ++i) {
      std::string role = role_of(msgs[i]);
      if (role == "user" || role == "system" || role == "tool" || role == "latest_reminder" ||
          role == "direct_search_results" || static_cast<int>(i) >= last) {
        out.push_back(msgs[i]);
      } else if (role == "assistant") {
        Json m = msgs[i];
        m.erase("reasoning_content");
        out.push_back(std::move(m));
      }
    }
    return out;
  }

  // Request text of `holder` (a message or a text block); the image markers flatten_content
  // put into it, at the offsets it recorded, stay markup.
  static void content_text(const Json& holder, const std::string& text, PromptBuilder* out) {
    const std::string_view image = kImage;
    size_t at = 0;
    if (holder.is_object() && holder.contains(kImageOffsetsField) &&
        holder[kImageOffsetsField].is_array()) {
      for (const Json& o : holder[kImageOffsetsField]) {
        if (!o.is_number_integer() || o.get<int64_t>() < 0) continue;
        size_t p = o.get<size_t>();
        if (p < at || p > text.size() || text.compare(p, image.size(), image) != 0) continue;
        out->text(std::string_view(text).substr(at, p - at));
        out->mark(image);
        at = p + image.size();
      }
    }
    out->text(std::string_view(text).substr(at));
  }

  void render_tools(const Json& tools, PromptBuilder* out) const {
    const std::string& co = tags_.calls_open;
    const std::string& cc = tags_.calls_close;
    const std::string& io = tags_.invoke_open;
    const std::string& ic = tags_.invoke_close;
    const std::string& po = tags_.param_open;
    const std::string& pc = tags_.param_close;
    out->mark(
        "## Tools\n\nYou have access to a set of tools to help answer the user's question. "
        "You can invoke tools by writing a \"" +
        co + "\" block like the following:\n\n" + co + "\n" + io + " name=\"$TOOL_NAME\">\n" + po +
        " name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE" + pc + "\n...\n" + ic +
        "\n" + io + " name=\"$TOOL_NAME2\">\n...\n" + ic + "\n" + cc +
        "\n\nString parameters should be specified as is and set `string=\"true\"`. For all "
        "other types (numbers, booleans, arrays, objects), pass the value in JSON format and "
        "set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you "
        "MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls "
        "or final response.\n\nOtherwise, output directly after </think> with tool calls or "
        "final response.\n\n### Available Tool Schemas\n\n");
    for (size_t i = 0; i < tools.size(); ++i) {
      if (i) out->mark("\n");
      std::string schema;
      python_json_dump(tools[i].contains("function") ? tools[i]["function"] : tools[i], &schema);
      out->text(schema);
    }
    out->mark(
        "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to "
        "invoke tool calls.\n");
  }

  static void render_response_format(const Json& rf, PromptBuilder* out) {
    out->mark(
        "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n");
    out->text(python_json_dumps(rf));
  }

  // Arguments: an object as is; a string JSON-decoded (twice if it decodes to a string);
  // anything that does not end up an object is wrapped as {"arguments": original}.
  static Json decode_arguments(const Json& args) {
    if (args.is_object()) return args;
    if (args.is_null()) return Json::object();
    Json v;
    if (args.is_string() && python_json_loads(args.get_ref<const std::string&>(), &v)) {
      Json v2;
      if (v.is_string() && python_json_loads(v.get_ref<const std::string&>(), &v2)) v = v2;
      if (v.is_object()) return v;
    }
    return Json{{"arguments", args}};
  }

  void render_tool_calls(const Json& calls, PromptBuilder* out) const {
    out->mark("\n\n" + tags_.calls_open + "\n");
    for (size_t i = 0; i < calls.size(); ++i) {
      const Json& f = calls[i].contains("function") ? calls[i]["function"] : calls[i];
      if (i) out->mark("\n");
      out->mark(tags_.invoke_open + " name=\"");
      out->text(str_or_empty(f, "name"));
      out->mark("\">\n");
      Json args = decode_arguments(f.value("arguments", Json()));
      bool first = true;
      for (auto it = args.begin(); it != args.end(); ++it) {
        if (!first) out->mark("\n");
        first = false;
        bool is_str = it.value().is_string();
        out->mark(tags_.param_open + " name=\"");
        out->text(it.key());
        out->mark(std::string("\" string=\"") + (is_str ? "true" : "false") + "\">");
        if (is_str) {
          out->text(it.value().get_ref<const std::string&>());
        } else {
          std::string v;
          python_json_dump(it.value(), &v);
          out->text(v);
        }
        out->mark(tags_.param_close);
      }
      out->mark("\n" + tags_.invoke_close);
    }
    out->mark("\n" + tags_.calls_close);
  }

  static void render_tool_result(const Json& content, PromptBuilder* out) {
    out->mark("<tool_result>");
    if (content.is_string()) {
      out->text(content.get_ref<const std::string&>());
    } else if (content.is_array()) {
      for (size_t i = 0; i < content.size(); ++i) {
        if (i) out->mark("\n\n");
        const Json& b = content[i];
        std::string t = str_or_empty(b, "type");
        if (t == "text") {
          out->text(str_or_empty(b, "text"));
        } else {
          out->mark("[Unsupported ");
          out->text(t.empty() ? std::string("None") : t);
          out->mark("]");
        }
      }
    }
    out->mark("</tool_result>");
  }

  Status render_message(const Json& msgs, size_t i, PromptBuilder* out) const {
    const Json& m = msgs[i];
    std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return invalid_argument(where + ": expected an object");
    std::string role = role_of(m);
    bool v41 = o_.variant == Variant::kV41;
    std::string content = str_or_empty(m, "content");
    bool last = i + 1 == msgs.size();

    if (i == 0) {
      if (v41) {
        std::string effort;
        if (o_.thinking)
          effort = "Reasoning Effort: " + std::to_string(o_.reasoning_budget) +
                   " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
        if (!effort.empty() || role == "system") out->mark(kSystem);
        out->mark(effort);
      } else if (o_.thinking && o_.reasoning_effort == "max") {
        out->mark(kV4MaxEffort);
      }
    }

    if (role == "system" || role == "developer") {
      if (role == "system" && v41 && i > 0) out->mark(kSystem);
      if (role == "developer") out->mark(kUser);
      content_text(m, content, out);
      if (non_empty(m, "tools")) {
        out->mark("\n\n");
        render_tools(m["tools"], out);
      }
      if (non_empty(m, "response_format")) {
        out->mark("\n\n");
        render_response_format(m["response_format"], out);
      }
    } else if (role == "user") {
      out->mark(kUser);
      if (non_empty(m, "content_blocks")) {
        const Json& blocks = m["content_blocks"];
        for (size_t k = 0; k < blocks.size(); ++k) {
          if (k) out->mark("\n\n");
          std::string t = str_or_empty(blocks[k], "type");
          if (t == "text") {
            content_text(blocks[k], str_or_empty(blocks[k], "text"), out);
          } else if (t == "tool_result") {
            render_tool_result(blocks[k].value("content", Json("")), out);
          } else {
            out->mark("[Unsupported ");
            out->text(t);
            out->mark("]");
          }
        }
      } else {
        content_text(m, content, out);
      }
    } else if (role == "latest_reminder") {
      out->mark(kReminder);
      content_text(m, content, out);
    } else if (role == "assistant") {
      bool has_calls = non_empty(m, "tool_calls") && m["tool_calls"].is_array();
      std::string reasoning = str_or_empty(m, "reasoning_content");
      bool wo_eos = m.value("wo_eos", Json(false)) == true;
      bool prev_task = i > 0 && has_task(msgs[i - 1]);
      if (o_.thinking && !prev_task && (!drop_ || static_cast<int>(i) > last_user_)) {
        out->text(reasoning);
        // A prefill holding only reasoning stays open so the model keeps thinking (vLLM).
        bool open = last && o_.continue_final_message && wo_eos && content.empty() && !has_calls &&
                    !reasoning.empty();
        if (!open) out->mark(kThinkClose);
      }
      content_text(m, content, out);
      if (has_calls) render_tool_calls(m["tool_calls"], out);
      if (!wo_eos) out->mark(kEos);
    } else if (role == "tool") {
      return internal_error(where + ": tool message survived merging");
    } else {
      return invalid_argument(where + ".role: unknown role '" + role + "'");
    }

    // What follows the message: nothing, a task token, or the assistant header.
    if (!last) {
      std::string next = role_of(msgs[i + 1]);
      if (next != "assistant" && next != "latest_reminder") return ok_status();
    }
    if (last && o_.add_generation_prompt.has_value() && !*o_.add_generation_prompt)
      return ok_status();
    if (has_task(m)) {
      if (!m["task"].is_string() || !task_tokens().count(m["task"].get<std::string>()))
        return invalid_argument(where +
                                ".task: unknown task (valid: action, query, authority, "
                                "domain, title, read_url)");
      std::string task = m["task"];
      if (task == "action") {
        out->mark(kAssistant);
        out->mark(o_.thinking ? kThinkOpen : kThinkClose);
      }
      out->mark(task_tokens().at(task));
      return ok_status();
    }
    bool extra_header = last && o_.add_generation_prompt.value_or(false) &&
                        (role == "assistant" || (role == "system" && i == 0));
    if (user_like(msgs, i) || extra_header) {
      out->mark(kAssistant);
      bool open = o_.thinking && (!drop_ || static_cast<int>(i) >= last_user_);
      out->mark(open ? kThinkOpen : kThinkClose);
    }
    return ok_status();
  }

  const EncodeOptions& o_;
  const DsmlTags& tags_;
  bool drop_ = true;
  int last_user_ = -1;
};

}  // namespace

std::string join_prompt(const SegmentedPrompt& pieces) {
  size_t n = 0;
  for (const PromptPiece& p : pieces) n += p.text.size();
  std::string out;
  out.reserve(n);
  for (const PromptPiece& p : pieces) out += p.text;
  return out;
}

StatusOr<SegmentedPrompt> encode_messages_segmented(const Json& messages,
                                                    const EncodeOptions& options) {
  if (!messages.is_array()) return invalid_argument("messages: expected an array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    std::string w = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return invalid_argument(w + ": expected an object");
    if (!m.contains("role") || !m["role"].is_string())
      return invalid_argument(w + ".role: expected a string");
    if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string() &&
        !(m["role"] == "tool" && m["content"].is_array()))
      return invalid_argument(w + ".content: expected a string (flatten list content first)");
  }
  try {
    return Renderer(options).render(messages);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("messages: unexpected field type: ") + e.what());
  }
}

StatusOr<std::string> encode_messages(const Json& messages, const EncodeOptions& options) {
  ASSIGN_OR_RETURN(SegmentedPrompt pieces, encode_messages_segmented(messages, options));
  return join_prompt(pieces);
}

}  // namespace deepinfer::recipe
