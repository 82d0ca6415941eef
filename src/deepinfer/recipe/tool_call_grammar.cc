#include "deepinfer/recipe/tool_call_grammar.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace deepinfer::recipe {
namespace {

using Expr = std::optional<std::string>;  // an EBNF expression; nullopt: matches nothing

constexpr int kMaxRepeat = 1000;           // the EBNF front end's bound on {m,n}
constexpr int kMaxDepth = 64;              // nesting past this is left unconstrained
constexpr size_t kMaxOrderedOptional = 4;  // see Lowering::list
constexpr const char* kBar = "\uFF5C";     // U+FF5C, which opens every DSML tag

// The generic pieces. JSON is Python's json.dumps (what the encoder writes) give or take one
// whitespace character per gap, with every escape (surrogate escapes only in pairs). Gaps stay
// small because the EBNF front end sizes a grammar with every reference written out. No text
// inside the calls block may hold U+FF5C, the first character of every DSML tag (and of EOS):
// the parsers would cut the value there. JSON strings can still say it as an escape.
constexpr const char* kGenericRules = R"(ws ::= [ \t\n\r]?
json-value ::= json-string | json-nonstring
json-nonstring ::= json-object | json-array | json-number | "true" | "false" | "null"
json-object ::= "{" ws "}" | "{" ws json-member (ws "," ws json-member)* ws "}"
json-member ::= json-string ws ":" ws json-value
json-array ::= "[" ws "]" | "[" ws json-value (ws "," ws json-value)* ws "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F\uFF5C] | "\\" (["\\/bfnrt] | "u" json-u)
json-u ::= [0-9a-cA-Ce-fE-F] hex hex hex | [dD] [0-7] hex hex
  | [dD] [89abAB] hex hex "\\u" [dD] [c-fC-F] hex hex
hex ::= [0-9a-fA-F]
json-digits ::= "0" | [1-9] [0-9]*
json-integer ::= "-"? json-digits
json-number ::= "-"? json-digits ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
raw-char ::= [^\uFF5C]
raw-string ::= raw-char*
dsml-key ::= [^"\uFF5C\x00-\x1F]+
never ::= [^\x00-\U0010FFFF]
)";

// An EBNF string literal for UTF-8 text.
std::string lit(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\x%02X", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// X{min,max} with the EBNF front end's bounds; a bound past them is dropped (more permissive).
std::string repeat(const std::string& x, int64_t min, int64_t max) {
  if (min > kMaxRepeat) min = kMaxRepeat;
  if (max > kMaxRepeat) max = -1;
  if (min <= 0 && max < 0) return x + "*";
  if (max < 0) return x + "{" + std::to_string(min) + ",}";
  return x + "{" + std::to_string(std::max<int64_t>(min, 0)) + "," + std::to_string(max) + "}";
}

int64_t int_keyword(const Json& s, const char* key, int64_t fallback) {
  auto it = s.find(key);
  if (it == s.end() || !it->is_number()) return fallback;
  double v = it->get<double>();
  return v < 0 ? 0 : v > 1e12 ? int64_t{1} << 40 : static_cast<int64_t>(v);
}

enum class Mode {
  kJson,       // any JSON text of the value
  kNonString,  // JSON text of a value that is not a string (a string=false DSML parameter)
  kRaw,        // the raw text of a string value (a string=true DSML parameter)
};

// Lowers JSON Schema to EBNF rules (the subset in recipe/README.md). Anything it cannot say
// in EBNF is left unconstrained rather than rejected: tool schemas are written for prompts, and
// a grammar that is looser than the schema still guarantees a parsable call.
class Lowering {
 public:
  // Rule names start with `prefix`, so that several lowerings can share one grammar.
  Lowering(const Json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  Expr lower(const Json& s, Mode mode, int depth) {
    if (depth > kMaxDepth) return any(mode);
    if (s.is_boolean()) return s.get<bool>() ? Expr(any(mode)) : std::nullopt;
    if (!s.is_object()) return any(mode);
    if (auto ref = s.find("$ref"); ref != s.end() && ref->is_string())
      return lower_ref(ref->get<std::string>(), mode, depth);
    for (const char* key : {"anyOf", "oneOf"}) {
      auto it = s.find(key);
      if (it == s.end() || !it->is_array()) continue;
      // Siblings apply to every branch; oneOf is taken as anyOf (looser, never wrong).
      Json rest = s;
      rest.erase(key);
      std::vector<std::string> alts;
      for (const Json& branch : *it) {
        Expr e = lower(merge(rest, resolve(branch, depth)), mode, depth + 1);
        if (e) alts.push_back(*e);
      }
      if (alts.empty()) return std::nullopt;
      return alternatives(alts);
    }
    if (auto it = s.find("allOf"); it != s.end() && it->is_array()) {
      Json merged = s;
      merged.erase("allOf");
      for (const Json& part : *it) merged = merge(merged, resolve(part, depth));
      return lower(merged, mode, depth + 1);
    }
    if (s.contains("const") || (s.contains("enum") && s["enum"].is_array())) {
      Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
      std::vector<std::string> alts;
      for (const Json& v : values) {
        if (python_json_dumps(v).find(kBar) != std::string::npos) continue;  // unparsable
        if (mode == Mode::kRaw && v.is_string()) alts.push_back(lit(v.get<std::string>()));
        if (mode == Mode::kNonString && !v.is_string()) alts.push_back(lit(python_json_dumps(v)));
        if (mode == Mode::kJson) alts.push_back(lit(python_json_dumps(v)));
      }
      if (alts.empty()) return std::nullopt;
      return alternatives(alts);
    }
    std::set<std::string> types = types_of(s);
    std::vector<std::string> alts;
    if (types.count("string")) {
      int64_t min = int_keyword(s, "minLength", 0), max = int_keyword(s, "maxLength", -1);
      if (s.contains("maxLength") && max < min) return std::nullopt;
      if (mode == Mode::kRaw) alts.push_back(repeat("raw-char", min, max));
      if (mode == Mode::kJson)
        alts.push_back("\"\\\"\" " + repeat("json-char", min, max) + " \"\\\"\"");
    }
    if (mode != Mode::kRaw) {
      if (types.count("null")) alts.push_back("\"null\"");
      if (types.count("boolean")) alts.push_back("(\"true\" | \"false\")");
      if (types.count("number"))
        alts.push_back("json-number");
      else if (types.count("integer"))
        alts.push_back("json-integer");
      if (types.count("object")) {
        Expr e = object(s, depth);
        if (e) alts.push_back(*e);
      }
      if (types.count("array")) {
        Expr e = array(s, depth);
        if (e) alts.push_back(*e);
      }
    }
    if (alts.empty()) return std::nullopt;
    return alternatives(alts);
  }

  // A new rule; returns its name.
  std::string rule(std::string_view hint, const std::string& body) {
    std::string name = reserve(hint);
    define(name, body);
    return name;
  }
  std::string reserve(std::string_view hint) {
    return prefix_ + std::string(hint) + "-" + std::to_string(counter_++);
  }
  void define(const std::string& name, const std::string& body) {
    rules_ += name + " ::= " + body + "\n";
  }
  const std::string& rules() const { return rules_; }

  // Items in order, each optional one present or not and every required one present, then (if
  // `extra` is set) any number of extras, joined by `sep`. Returns the non-empty lists (nullopt:
  // there are none) and whether the empty list is one. Linear in the items when one is
  // required. Otherwise the choice of the first item costs a chain of rules, quadratic once
  // references are inlined (which is how the EBNF front end sizes a grammar), so past
  // kMaxOrderedOptional items the list is looser: any listed item, any order.
  struct Item {
    std::string expr;
    bool required = false;
  };
  std::pair<Expr, bool> list(const std::vector<Item>& items, const std::string& sep,
                             const Expr& extra, std::string_view hint) {
    const std::string more = extra ? "(" + sep + " " + *extra + ")*" : "";
    auto first_required =
        std::find_if(items.begin(), items.end(), [](const Item& it) { return it.required; });
    if (first_required != items.end()) {
      // Optional items before the first required one carry their separator after them, the
      // others before them.
      std::string body;
      for (auto it = items.begin(); it != items.end(); ++it) {
        std::string part = it < first_required    ? "(" + it->expr + " " + sep + ")?"
                           : it == first_required ? it->expr
                           : it->required         ? sep + " " + it->expr
                                                  : "(" + sep + " " + it->expr + ")?";
        body += (body.empty() ? "" : " ") + part;
      }
      return {rule(std::string(hint) + "-list", body + cat(more)), false};
    }
    if (items.size() > kMaxOrderedOptional) {
      // Any order, any subset (a key may repeat): linear, where the exact list would not be.
      std::vector<std::string> alts;
      for (const Item& it : items) alts.push_back(it.expr);
      if (extra) alts.push_back(*extra);
      std::string member = rule(std::string(hint) + "-member", join_alts(alts));
      return {rule(std::string(hint) + "-list", member + " (" + sep + " " + member + ")*"), true};
    }
    // rest(i): the items from i on after something was written (each led by sep); first(i):
    // a non-empty list of the items from i on, nothing written before.
    std::string rest = extra ? rule(std::string(hint) + "-rest", more) : std::string();
    Expr first =
        extra ? Expr(rule(std::string(hint) + "-first", *extra + cat(rest))) : std::nullopt;
    for (size_t k = items.size(); k-- > 0;) {
      const Item& it = items[k];
      std::vector<std::string> f = {it.expr + cat(rest)};
      if (first) f.push_back(*first);
      rest = rule(std::string(hint) + "-rest", "(" + sep + " " + it.expr + ")?" + cat(rest));
      first = rule(std::string(hint) + "-first", join_alts(f));
    }
    return {first, true};
  }

  // Items in order, each followed by `term`: optional ones present or not, required ones
  // present, then any number of extras. Linear in the items. May be empty ("").
  std::string terminated_list(const std::vector<Item>& items, const std::string& term,
                              const Expr& extra) {
    std::string body;
    for (const Item& it : items) {
      std::string part = "(" + it.expr + " " + term + ")" + (it.required ? "" : "?");
      body += (body.empty() ? "" : " ") + part;
    }
    if (extra) body += (body.empty() ? "" : " ") + ("(" + *extra + " " + term + ")*");
    return body;
  }

 private:
  static std::string cat(const std::string& x) { return x.empty() ? "" : " " + x; }
  static std::string join_alts(const std::vector<std::string>& alts) {
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
  }

  static std::string any(Mode mode) {
    return mode == Mode::kJson  ? "json-value"
           : mode == Mode::kRaw ? "raw-string"
                                : "json-nonstring";
  }

  // `type` as a set; without it, the type the keywords imply, else every type.
  static std::set<std::string> types_of(const Json& s) {
    std::set<std::string> out;
    auto it = s.find("type");
    if (it != s.end() && it->is_string()) out.insert(it->get<std::string>());
    if (it != s.end() && it->is_array())
      for (const Json& t : *it)
        if (t.is_string()) out.insert(t.get<std::string>());
    // A schema that only names unknown types ("any", "float") says nothing we can enforce.
    static const std::set<std::string> kKnown = {"string", "number", "integer", "boolean",
                                                 "null",   "object", "array"};
    if (std::any_of(out.begin(), out.end(), [](const std::string& t) { return kKnown.count(t); }))
      return out;
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
      return {"object"};
    if (s.contains("items") || s.contains("prefixItems")) return {"array"};
    return {"string", "number", "boolean", "null", "object", "array"};
  }

  // A local reference (`#`, `#/$defs/x`, any JSON pointer); null when it does not resolve.
  const Json* pointer(const std::string& ref) const {
    if (ref.empty() || ref[0] != '#') return nullptr;
    const Json* at = &root_;
    size_t pos = 1;
    while (pos < ref.size()) {
      if (ref[pos] != '/') return nullptr;
      size_t end = ref.find('/', pos + 1);
      std::string token = ref.substr(pos + 1, end == std::string::npos ? end : end - pos - 1);
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size() &&
            (token[i + 1] == '0' || token[i + 1] == '1')) {
          key += token[++i] == '0' ? '~' : '/';
        } else {
          key += token[i];
        }
      }
      if (at->is_object()) {
        auto it = at->find(key);
        if (it == at->end()) return nullptr;
        at = &*it;
      } else if (at->is_array()) {
        char* stop = nullptr;
        unsigned long i = strtoul(key.c_str(), &stop, 10);
        if (key.empty() || *stop != '\0' || i >= at->size()) return nullptr;
        at = &(*at)[i];
      } else {
        return nullptr;
      }
      pos = end == std::string::npos ? ref.size() : end;
    }
    return at;
  }

  Json resolve(const Json& s, int depth) const {
    const Json* at = &s;
    for (int hops = 0; hops < kMaxDepth && at->is_object() && at->contains("$ref"); ++hops) {
      const Json& ref = (*at)["$ref"];
      const Json* next = ref.is_string() ? pointer(ref.get<std::string>()) : nullptr;
      if (!next) return Json::object();
      at = next;
    }
    return *at;
  }

  // Shallow merge of two schemas: `required` united, `properties` merged per name, any other
  // keyword taken from `b`.
  static Json merge(const Json& a, const Json& b) {
    if (!a.is_object() || a.empty()) return b;
    if (!b.is_object()) return b.is_boolean() && !b.get<bool>() ? b : a;
    Json out = a;
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (it.key() == "required" && out.contains("required") && out["required"].is_array() &&
          it->is_array()) {
        for (const Json& r : *it) out["required"].push_back(r);
      } else if (it.key() == "properties" && out.contains("properties") &&
                 out["properties"].is_object() && it->is_object()) {
        for (auto p = it->begin(); p != it->end(); ++p) out["properties"][p.key()] = *p;
      } else {
        out[it.key()] = *it;
      }
    }
    return out;
  }

  Expr lower_ref(const std::string& ref, Mode mode, int depth) {
    auto key = std::make_pair(ref, static_cast<int>(mode));
    if (auto it = refs_.find(key); it != refs_.end()) return it->second;
    const Json* target = pointer(ref);
    if (!target) return any(mode);  // unresolvable: unconstrained
    // The name exists before the body, so recursive schemas become recursive rules.
    std::string name = reserve("ref");
    refs_[key] = name;
    Expr body = lower(*target, mode, depth + 1);
    define(name, body ? *body : "never");
    if (!body) refs_[key] = std::nullopt;
    return refs_[key];
  }

  Expr object(const Json& s, int depth) {
    const Json props =
        s.contains("properties") && s["properties"].is_object() ? s["properties"] : Json::object();
    std::set<std::string> required;
    if (s.contains("required") && s["required"].is_array())
      for (const Json& r : s["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    // Strict mode, as the JSON Schema front end: listed properties close the object unless
    // additionalProperties says otherwise.
    Json extra_schema = s.contains("properties") ? Json(false) : Json(true);
    if (s.contains("additionalProperties")) extra_schema = s["additionalProperties"];
    Expr extra_value = lower(extra_schema, Mode::kJson, depth + 1);
    std::vector<Item> items;
    auto member = [&](const std::string& key, const Json& schema) -> bool {
      bool req = required.count(key) > 0;
      Expr value = lower(schema, Mode::kJson, depth + 1);
      if (!value) return !req;  // an optional property that admits nothing is left out
      std::string quoted;
      python_json_quote(key, &quoted);
      items.push_back({lit(quoted) + " ws \":\" ws " + *value, req});
      return true;
    };
    for (auto it = props.begin(); it != props.end(); ++it)
      if (!member(it.key(), *it)) return std::nullopt;
    for (const std::string& r : required) {
      if (props.contains(r)) continue;
      if (!extra_value) return std::nullopt;
      if (!member(r, extra_schema)) return std::nullopt;
    }
    Expr extra = extra_value ? Expr("json-string ws \":\" ws " + *extra_value) : std::nullopt;
    auto [members, empty_ok] = list(items, "ws \",\" ws", extra, "obj");
    std::vector<std::string> alts;
    if (empty_ok) alts.push_back("\"{\" ws \"}\"");
    if (members) alts.push_back("\"{\" ws " + *members + " ws \"}\"");
    if (alts.empty()) return std::nullopt;
    return rule("obj", join_alts(alts));
  }

  Expr array(const Json& s, int depth) {
    Json items = s.contains("items") ? s["items"] : Json(true);
    int64_t min = int_keyword(s, "minItems", 0), max = int_keyword(s, "maxItems", -1);
    if (s.contains("maxItems") && max < min) return std::nullopt;
    Expr item = lower(items, Mode::kJson, depth + 1);
    std::vector<std::string> alts;
    if (min == 0) alts.push_back("\"[\" ws \"]\"");
    if (item && max != 0) {
      std::string more = "(ws \",\" ws " + *item + ")";
      alts.push_back("\"[\" ws " + *item + " " +
                     repeat(more, std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1) +
                     " ws \"]\"");
    }
    if (alts.empty()) return std::nullopt;
    return rule("arr", join_alts(alts));
  }

  const Json& root_;
  const std::string prefix_;
  std::string rules_;
  int counter_ = 0;
  std::map<std::pair<std::string, int>, Expr> refs_;
};

// One DSML invoke of `function` (an OpenAI function object), as the encoder writes it:
// header, parameter lines joined by "\n", close; no parameters leave an empty line.
StatusOr<std::string> invoke_rule(const Json& function, const std::string& where,
                                  const DsmlTags& tags, Lowering* low) {
  const std::string name = function["name"].get<std::string>();
  const Json params = function.contains("parameters") ? function["parameters"] : Json::object();
  std::vector<Lowering::Item> items;
  std::set<std::string> required;
  if (params.is_object() && params.contains("required") && params["required"].is_array())
    for (const Json& r : params["required"])
      if (r.is_string()) required.insert(r.get<std::string>());
  auto param = [&](const std::string& key, const Json& schema) -> Expr {
    std::vector<std::string> alts;
    if (Expr raw = low->lower(schema, Mode::kRaw, 0)) alts.push_back("\"true\\\">\" " + *raw);
    if (Expr js = low->lower(schema, Mode::kNonString, 0)) alts.push_back("\"false\\\">\" " + *js);
    if (alts.empty()) return std::nullopt;
    return lit(tags.param_open + " name=\"" + key + "\" string=\"") + " " + alternatives(alts) +
           " " + lit(tags.param_close);
  };
  const bool listed =
      params.is_object() && params.contains("properties") && params["properties"].is_object();
  if (listed) {
    const Json& props = params["properties"];
    for (auto it = props.begin(); it != props.end(); ++it) {
      Expr p = param(it.key(), *it);
      bool req = required.count(it.key()) > 0;
      if (!p && req)
        return invalid_argument(where + ".parameters.properties." + it.key() +
                                ": the schema accepts no value");
      if (p) items.push_back({*p, req});
    }
  }
  // Parameters the schema does not list: any name, any value (an open schema, or
  // additionalProperties not false).
  bool open = !listed;
  if (params.is_object() && params.contains("additionalProperties"))
    open = !(params["additionalProperties"].is_boolean() &&
             !params["additionalProperties"].get<bool>());
  Expr extra;
  if (open) {
    extra = low->rule("dsml-any-param",
                      lit(tags.param_open + " name=\"") + " dsml-key " + lit("\" string=\"") +
                          " (\"true\\\">\" raw-string | \"false\\\">\" json-nonstring) " +
                          lit(tags.param_close));
  }
  // The encoder ends each parameter line with "\n" before the close and writes an empty line
  // for no parameters. An empty list of optional parameters may also come out as a bare
  // header and close, which both parsers read as no arguments (this keeps the grammar linear).
  const bool any_required =
      std::any_of(items.begin(), items.end(), [](const Lowering::Item& it) { return it.required; });
  std::string header = lit(tags.invoke_open + " name=\"" + name + "\">\n");
  std::string close = lit(tags.invoke_close);
  std::string params_list = low->terminated_list(items, "\"\\n\"", extra);
  std::string body = header + " " + (params_list.empty() ? "" : params_list + " ") + close;
  if (!any_required) body += " | " + header + " " + lit("\n" + tags.invoke_close);
  return low->rule("invoke", body);
}

}  // namespace

StatusOr<std::string> tool_call_grammar(const Json& tools, const ToolCallGrammarOptions& options) {
  if (!tools.is_array() || tools.empty())
    return invalid_argument("tools: a forced tool call needs a non-empty tools array");
  const DsmlTags& tags = DsmlTags::of(options.variant);
  std::string rules;
  std::vector<std::string> invokes;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "].function";
    const Json& t = tools[i];
    const Json* fn = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
    if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      return invalid_argument(where + ".name must be a string");
    const std::string name = (*fn)["name"].get<std::string>();
    if (name.empty() || name.find('"') != std::string::npos)
      return invalid_argument(where + ".name must be non-empty and hold no '\"'");
    if (!options.function.empty() && name != options.function) continue;
    // Each tool's $refs point into its own parameters schema.
    const Json params = fn->contains("parameters") ? (*fn)["parameters"] : Json::object();
    Lowering low(params, "t" + std::to_string(i) + "-");
    auto invoke = invoke_rule(*fn, where, tags, &low);
    if (!invoke.ok()) return invoke.status();
    rules += low.rules();
    invokes.push_back(*invoke);
    if (!options.function.empty()) break;
  }
  if (invokes.empty())
    return invalid_argument("tool_choice.function.name: no tool named '" + options.function +
                            "' was offered");
  std::string root = "root ::= " + lit("\n\n" + tags.calls_open + "\n") + " calls " +
                     lit("\n" + tags.calls_close) + "\ninvoke ::= " + alternatives(invokes) + "\n";
  // Several calls by right recursion: `invoke` is written once (the EBNF front end sizes a
  // grammar with every reference inlined, and a recursive reference counts once).
  const bool several = options.parallel_tool_calls && options.function.empty();
  root += several ? "calls ::= invoke (\"\\n\" calls)?\n" : "calls ::= invoke\n";
  return root + rules + kGenericRules;
}

}  // namespace deepinfer::recipe
