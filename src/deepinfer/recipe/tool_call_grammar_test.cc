// The forced-tool-call grammar against the recipe's own encoder and parsers, checked with the
// grammar module's byte and token matchers.
#include "deepinfer/recipe/tool_call_grammar.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/grammar/earley_matcher.h"
#include "deepinfer/grammar/ebnf_parser.h"
#include "deepinfer/grammar/grammar_matcher.h"
#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/recipe/completion_parser.h"
#include "deepinfer/recipe/streaming_parser.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::recipe {
namespace {

using grammar::CompiledGrammar;
using grammar::EarleyMatcher;

// Every tools array of the conformance vectors, the e2e client's weather tool and schemas that
// exercise the rest of the lowering (refs, unions, open objects, no parameters).
std::vector<Json> test_tool_sets() {
  std::vector<Json> sets;
  std::ifstream in(std::string(DEEPINFER_SHARED_DIR) + "/conformance/chat_encoding.jsonl");
  EXPECT_TRUE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    Json v = Json::parse(line);
    if (v["request"].contains("tools")) sets.push_back(v["request"]["tools"]);
  }
  EXPECT_GE(sets.size(), 10u);
  sets.push_back(Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "weather forecast", "parameters": {"type": "object", "properties":
      {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])"));
  sets.push_back(Json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "no_params"}},
    {"type": "function", "function": {"name": "empty", "parameters":
      {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "tree", "parameters": {"type": "object",
      "$defs": {"node": {"type": "object", "properties": {"label": {"type": "string",
        "maxLength": 8}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"},
        "maxItems": 2}}, "required": ["label"]}},
      "properties": {"root": {"$ref": "#/$defs/node"}, "any": {},
        "either": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["x", "y"]}]},
        "maybe": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "point": {"type": "object", "properties": {"x": {"type": "number"},
          "y": {"type": "number"}}, "required": ["x", "y"], "additionalProperties": false},
        "meta": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "level": {"const": 3}, "loose": {"type": "any"}},
      "required": ["root", "level"]}}},
    {"type": "function", "function": {"name": "open_extra", "parameters": {"type": "object",
      "properties": {"a": {"type": "string"}}, "additionalProperties": true}}},
    {"type": "function", "function": {"name": "configure", "parameters": {"type": "object",
      "properties": {"opts": {"type": "object", "properties": {"a": {"type": "integer"},
        "b": {"type": "string"}, "c": {"type": "boolean"}, "d": {"type": "array"},
        "e": {"type": "null"}, "f": {"type": "number"}}}}}}}])"));
  return sets;
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& ebnf) {
  auto g = grammar::parse_ebnf(ebnf);
  EXPECT_TRUE(g.ok()) << g.status().to_string() << "\n" << ebnf;
  if (!g.ok()) return nullptr;
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  EarleyMatcher m(g);
  return m.accept_bytes(text) && m.can_terminate();
}

const Json* resolve(const Json& root, const Json* s) {
  for (int i = 0; i < 16 && s->is_object() && s->contains("$ref"); ++i) {
    std::string ref = (*s)["$ref"].get<std::string>();
    s = &root;
    size_t pos = 2;
    while (pos < ref.size() + 1 && ref.size() > 1) {
      size_t end = ref.find('/', pos);
      std::string key = ref.substr(pos, end == std::string::npos ? end : end - pos);
      s = &(*s)[key];
      if (end == std::string::npos) break;
      pos = end + 1;
    }
  }
  return s;
}

// A random value valid under the schema (the subset these tests use), keys in schema order.
class ValueGen {
 public:
  ValueGen(const Json& root, std::mt19937* rng) : root_(root), rng_(*rng) {}

  Json value(const Json& schema, int depth = 0) {
    const Json& s = *resolve(root_, &schema);
    if (!s.is_object() || s.empty()) return any(depth);
    if (s.contains("const")) return s["const"];
    if (s.contains("enum")) return s["enum"][pick(s["enum"].size())];
    if (s.contains("anyOf")) return value(s["anyOf"][pick(s["anyOf"].size())], depth + 1);
    std::string type;
    if (s.contains("type") && s["type"].is_string()) type = s["type"];
    if (s.contains("type") && s["type"].is_array()) type = s["type"][pick(s["type"].size())];
    if (type.empty()) return any(depth);
    if (type == "string") {
      if (s.value("format", "") == "date") return "2024-02-29";
      return text(s.value("maxLength", 12));
    }
    if (type == "integer") {
      int64_t lo = s.value("minimum", -1000), hi = s.value("maximum", 100000);
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
    }
    if (type == "number") {
      static const double kNumbers[] = {0.0, -1.5, 3.0, 1e-7, 1e21, 12345.678, -0.25};
      return kNumbers[pick(std::size(kNumbers))];
    }
    if (type == "boolean") return pick(2) == 0;
    if (type == "null") return nullptr;
    if (type == "array") {
      int lo = s.value("minItems", 0), hi = std::min(s.value("maxItems", 3), 3);
      if (depth > 3) hi = lo;
      Json a = Json::array();
      int n = lo + pick(hi - lo + 1);
      for (int i = 0; i < n; ++i)
        a.push_back(value(s.contains("items") ? s["items"] : Json::object(), depth + 1));
      return a;
    }
    return object(s, depth);
  }

  Json object(const Json& s, int depth) {
    Json o = Json::object();
    std::set<std::string> required;
    for (const Json& r : s.value("required", Json::array())) required.insert(r.get<std::string>());
    if (s.contains("properties"))
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it)
        if (required.count(it.key()) || (depth < 3 && pick(2) == 0))
          o[it.key()] = value(it.value(), depth + 1);
    const Json extra = s.value("additionalProperties", Json(!s.contains("properties")));
    if (!(extra.is_boolean() && !extra.get<bool>()) && pick(2) == 0)
      o["extra_" + std::to_string(pick(100))] =
          value(extra.is_object() ? extra : Json::object(), depth + 1);
    return o;
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  // Up to max_chars characters with quotes, escapes, markup-like characters and non-ASCII (never
  // U+FF5C, which only DSML markup may hold).
  std::string text(int max_chars) {
    static const char* kPieces[] = {"a", "Z", " ", "\"", "\\", "\n", "\t", "<",      ">",
                                    "/", "{", "}", "=",  "中", "😀",  "é",  "\u2028", "\u0007"};
    std::string s;
    int n = pick(std::min(max_chars, 12) + 1);
    for (int i = 0; i < n; ++i) s += kPieces[pick(std::size(kPieces))];
    return s;
  }

  Json any(int depth) {
    switch (pick(depth > 2 ? 4 : 6)) {
      case 0:
        return text(6);
      case 1:
        return static_cast<int64_t>(pick(1000)) - 500;
      case 2:
        return pick(2) == 0;
      case 3:
        return nullptr;
      case 4:
        return Json::array({any(depth + 1), any(depth + 1)});
      default:
        return Json{{"k", any(depth + 1)}};
    }
  }

  const Json& root_;
  std::mt19937& rng_;
};

struct Call {
  std::string name;
  Json arguments;
};

// The completion the encoder writes for these calls, without the final EOS.
std::string encode_calls(const std::vector<Call>& calls) {
  Json tool_calls = Json::array();
  for (const Call& c : calls)
    tool_calls.push_back(
        {{"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  Json messages =
      Json::array({{{"role", "assistant"}, {"content", ""}, {"tool_calls", tool_calls}}});
  EncodeOptions o;
  o.add_bos = false;
  auto text = encode_messages(messages, o);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  std::string t = text.ok() ? *text : "";
  std::string eos = kEos;
  EXPECT_TRUE(t.size() >= eos.size() && t.substr(t.size() - eos.size()) == eos) << t;
  return t.substr(0, t.size() - eos.size());
}

Call random_call(const Json& tool, std::mt19937* rng) {
  const Json& fn = tool["function"];
  Json params = fn.value("parameters", Json::object());
  ValueGen gen(params, rng);
  return {fn["name"].get<std::string>(), gen.object(params, 0)};
}

// The strict and the streaming parser both read the text as these calls (arguments compared as
// JSON values; the text's own number spellings may differ from nlohmann's).
void expect_parses_as(const std::string& completion, const std::vector<Call>& calls) {
  auto strict = parse_completion(completion + kEos, /*thinking=*/false);
  ASSERT_TRUE(strict.ok()) << strict.status().to_string() << "\n" << completion;
  EXPECT_EQ(strict->content, "");
  ASSERT_EQ(strict->tool_calls.size(), calls.size()) << completion;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(strict->tool_calls[i].name, calls[i].name);
    Json args;
    ASSERT_TRUE(python_json_loads(strict->tool_calls[i].arguments, &args))
        << strict->tool_calls[i].arguments;
    EXPECT_EQ(nlohmann::json::parse(args.dump()), nlohmann::json::parse(calls[i].arguments.dump()))
        << completion;
  }
  StreamingParser sp(false);
  StreamDelta d;
  sp.feed(completion, &d);
  sp.finish(&d);
  EXPECT_EQ(sp.message(), *strict);
}

TEST(ToolCallGrammar, CompilesForEveryTestToolSet) {
  for (const Json& tools : test_tool_sets()) {
    for (bool parallel : {true, false}) {
      ToolCallGrammarOptions o;
      o.parallel_tool_calls = parallel;
      auto g = tool_call_grammar(tools, o);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      EXPECT_NE(compile(*g), nullptr);
      for (const Json& t : tools) {
        o.function = t["function"]["name"];
        auto named = tool_call_grammar(tools, o);
        ASSERT_TRUE(named.ok()) << named.status().to_string();
        EXPECT_NE(compile(*named), nullptr);
      }
    }
  }
}

TEST(ToolCallGrammar, AcceptsEveryEncodedValidCallAndTheParsersReadIt) {
  std::mt19937 rng(7);
  int checked = 0;
  for (const Json& tools : test_tool_sets()) {
    auto required = compile(*tool_call_grammar(tools, {}));
    ToolCallGrammarOptions single;
    single.parallel_tool_calls = false;
    auto one = compile(*tool_call_grammar(tools, single));
    for (int round = 0; round < 30; ++round) {
      std::vector<Call> calls;
      int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) calls.push_back(random_call(tools[rng() % tools.size()], &rng));
      std::string text = encode_calls(calls);
      EXPECT_TRUE(accepts(required, text)) << text;
      EXPECT_EQ(accepts(one, text), n == 1) << text;
      ToolCallGrammarOptions named;
      named.function = calls[0].name;
      auto only = compile(*tool_call_grammar(tools, named));
      EXPECT_EQ(accepts(only, text), n == 1) << text;
      expect_parses_as(text, calls);
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

// The weather tool of the conformance vectors: city (string, required), unit (enum).
Json weather_tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object",
    "properties": {"host": {"type": "string"}}}}}])");
}

std::string invoke(const std::string& name, const std::string& params) {
  return std::string("<｜DSML｜ invoke name=\"") + name + "\">\n" + params + "\n</｜DSML｜ invoke>";
}
std::string param(const std::string& key, bool is_string, const std::string& value) {
  return "<｜DSML｜ parameter name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") +
         "\">" + value + "</｜DSML｜ parameter>";
}
std::string calls_block(const std::string& invokes) {
  return "\n\n<｜DSML｜ calls>\n" + invokes + "\n</｜DSML｜ calls>";
}

TEST(ToolCallGrammar, RejectsWrongNamesMissingMarkupAndInvalidParameters) {
  const Json tools = weather_tools();
  auto g = compile(*tool_call_grammar(tools, {}));
  const std::string city = param("city", true, "Paris");
  ASSERT_TRUE(accepts(g, calls_block(invoke("get_weather", city))));
  ASSERT_TRUE(
      accepts(g, calls_block(invoke("get_weather", city + "\n" + param("unit", true, "celsius") +
                                                       "\n" + param("days", false, "3")))));
  ASSERT_TRUE(accepts(g, calls_block(invoke("ping", ""))));
  const std::vector<std::string> rejected = {
      "",
      "Sure." + calls_block(invoke("get_weather", city)),  // content before the calls
      calls_block(invoke("get_wether", city)),             // not an offered tool
      "<｜DSML｜ calls>\n" + invoke("get_weather", city) + "\n</｜DSML｜ calls>",  // no blank line
      calls_block(invoke("get_weather", "")),  // required city missing
      calls_block(invoke("get_weather", param("city", false, "\"Paris\""))),  // string as JSON
      calls_block(invoke("get_weather", city + "\n" + param("unit", true, "kelvin"))),
      calls_block(invoke("get_weather", city + "\n" + param("days", false, "three"))),
      calls_block(invoke("get_weather", city + "\n" + param("days", true, "3"))),
      calls_block(invoke("get_weather", city + "\n" + param("country", true, "FR"))),
      calls_block(invoke("get_weather", param("unit", true, "celsius") + "\n" + city)),  // order
      calls_block(invoke("get_weather", param("city", true, "a｜b"))),
      "{\"city\": \"Paris\"}",
  };
  for (const std::string& s : rejected) EXPECT_FALSE(accepts(g, s)) << s;
  // Unfinished: a prefix, but not a sentence.
  EarleyMatcher m(g);
  EXPECT_TRUE(m.accept_bytes("\n\n<｜DSML｜ calls>\n" + invoke("ping", "")));
  EXPECT_FALSE(m.can_terminate());

  // Nested objects: listed keys only (also where many optional ones make the order free).
  const Json configure = Json::parse(R"([{"type": "function", "function": {"name": "configure",
    "parameters": {"type": "object", "properties": {"opts": {"type": "object", "properties":
    {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}, "d": {}, "e": {}, "f": {}}},
    "point": {"type": "object", "properties": {"x": {"type": "number"}}}}}}}])");
  auto gc = compile(*tool_call_grammar(configure, {}));
  auto opts = [](const std::string& json) {
    return calls_block(invoke("configure", param("opts", false, json)));
  };
  EXPECT_TRUE(accepts(gc, opts(R"({"a": 1, "b": "x", "f": null})")));
  EXPECT_FALSE(accepts(gc, opts(R"({"a": 1, "zz": 2})")));
  EXPECT_FALSE(accepts(gc, opts(R"({"a": "1"})")));
  EXPECT_FALSE(accepts(gc, opts(R"({"a": 1,})")));
  EXPECT_TRUE(
      accepts(gc, calls_block(invoke("configure", param("point", false, R"({"x": 2.5})")))));
  EXPECT_FALSE(accepts(gc, calls_block(invoke("configure", param("point", false, R"({"y": 2})")))));

  ToolCallGrammarOptions named;
  named.function = "ping";
  auto only_ping = compile(*tool_call_grammar(tools, named));
  EXPECT_TRUE(accepts(only_ping, calls_block(invoke("ping", param("host", true, "h")))));
  EXPECT_FALSE(accepts(only_ping, calls_block(invoke("get_weather", city))));
  EXPECT_FALSE(accepts(only_ping, calls_block(invoke("ping", "") + "\n" + invoke("ping", ""))));
}

TEST(ToolCallGrammar, ErrorsNameTheField) {
  ToolCallGrammarOptions named;
  named.function = "nope";
  auto unknown = tool_call_grammar(weather_tools(), named);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message().rfind("tool_choice.function.name", 0), 0u)
      << unknown.status().message();
  auto empty = tool_call_grammar(Json::array(), {});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message().rfind("tools", 0), 0u);
  auto nameless = tool_call_grammar(Json::parse(R"([{"type": "function", "function": {}}])"), {});
  ASSERT_FALSE(nameless.ok());
  EXPECT_EQ(nameless.status().message().rfind("tools[0].function.name", 0), 0u);
}

// The texts that Python's json.loads does not read as an object, one per line.
std::string python_non_objects(const std::vector<std::string>& texts) {
  const std::string path = ::testing::TempDir() + "/tool_call_args_" + std::to_string(getpid());
  {
    std::ofstream out(path);
    for (const std::string& t : texts) out << nlohmann::json(t).dump() << "\n";
  }
  const std::string cmd =
      "python3 -c 'import json,sys\nfor l in open(sys.argv[1]):\n t = json.loads(l)\n"
      " try:\n  ok = isinstance(json.loads(t), dict)\n except ValueError:\n  ok = False\n"
      " print(\"\" if ok else t)' " +
      path;
  std::string bad;
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  char buf[4096];
  while (p && fgets(buf, sizeof(buf), p)) {
    std::string line = buf;
    if (line != "\n") bad += line;
  }
  EXPECT_EQ(p ? pclose(p) : -1, 0);
  std::remove(path.c_str());
  return bad;
}

// Random walks through the grammar (byte by byte, biased to close what they open): whatever it
// accepts, both parsers read as calls of offered tools with JSON-object arguments.
TEST(ToolCallGrammar, StrictParserReadsWhatTheGrammarAccepts) {
  std::mt19937 rng(11);
  const std::string kClose = "</｜DSML｜ parameter>";
  const std::string kAlphabet = "a Z\"\\\n<>{}[],:0-.e";
  int finished = 0;
  std::vector<std::string> arguments;
  for (const Json& tools : test_tool_sets()) {
    std::set<std::string> names;
    for (const Json& t : tools) names.insert(t["function"]["name"].get<std::string>());
    auto g = compile(*tool_call_grammar(tools, {}));
    for (int walk = 0; walk < 12; ++walk) {
      EarleyMatcher m(g);
      std::string text;
      size_t script = 0;  // position in kClose while closing a raw value
      while (text.size() < 4000) {
        grammar::ByteSet allowed = m.allowed_bytes();
        if (allowed.none()) break;
        if (m.can_terminate() && rng() % 4 == 0) break;
        int b = -1;
        if (allowed.count() > 40) {
          bool closing = script > 0 || text.size() > 400 || rng() % 16 == 0;
          if (closing && script < kClose.size() && allowed.test(uint8_t(kClose[script]))) {
            b = uint8_t(kClose[script++]);
          } else if (closing && allowed.test('"')) {
            b = '"';
          } else {
            script = 0;
            std::string options;
            for (char c : kAlphabet)
              if (allowed.test(uint8_t(c))) options += c;
            if (!options.empty()) b = uint8_t(options[rng() % options.size()]);
          }
        } else {
          script = 0;
        }
        if (b < 0) {
          std::vector<int> options;
          for (int c = 0; c < 256; ++c)
            if (allowed.test(c)) options.push_back(c);
          b = options[rng() % options.size()];
        }
        ASSERT_TRUE(m.accept_byte(uint8_t(b)));
        text += static_cast<char>(b);
      }
      if (!m.can_terminate()) continue;
      ++finished;
      auto strict = parse_completion(text + kEos, /*thinking=*/false);
      ASSERT_TRUE(strict.ok()) << strict.status().to_string() << "\n" << text;
      ASSERT_FALSE(strict->tool_calls.empty());
      for (const ToolCall& c : strict->tool_calls) {
        EXPECT_TRUE(names.count(c.name)) << c.name;
        arguments.push_back(c.arguments);
      }
      StreamingParser sp(false);
      StreamDelta d;
      sp.feed(text, &d);
      sp.finish(&d);
      EXPECT_EQ(sp.message(), *strict) << text;
    }
  }
  EXPECT_GT(finished, 60);
  // Python's json module judges the arguments (it reads 1e999 as inf; nlohmann refuses it).
  EXPECT_EQ(python_non_objects(arguments), "");
}

// Token level, with the bundled V3 tokenizer: each token of an encoded call is in the mask when
// it comes, and the finished call leaves the matcher terminated.
TEST(ToolCallGrammar, TokenMatcherFollowsEncodedCalls) {
  auto tok = tokenizer::Tokenizer::from_file(std::string(DEEPINFER_SOURCE_DIR) +
                                             "/assets/tokenizers/deepseek_v3/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto info = grammar::TokenizerInfo::from_tokenizer(**tok, {1});
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  std::mt19937 rng(3);
  const Json tools = weather_tools();
  auto g = compile(*tool_call_grammar(tools, {}));
  std::vector<uint32_t> mask((*info)->mask_words());
  for (int round = 0; round < 10; ++round) {
    std::string text = encode_calls({random_call(tools[round % 2], &rng)});
    auto ids = (*tok)->encode(text, /*parse_special=*/false);
    ASSERT_TRUE(ids.ok());
    grammar::GrammarMatcher matcher(g, *info);
    for (int32_t id : *ids) {
      matcher.fill_next_token_bitmask(mask.data());
      ASSERT_TRUE(mask[id / 32] >> (id % 32) & 1) << "token " << id << " in " << text;
      ASSERT_TRUE(matcher.accept_token(id));
    }
    EXPECT_TRUE(matcher.is_terminated()) << text;
  }
}

}  // namespace
}  // namespace deepinfer::recipe
