// SchemaCompiler: arrays (items, prefixItems, item counts, uniqueItems).
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "deepinfer/grammar/json_schema_compiler.h"

namespace deepinfer::grammar::json_detail {

StatusOr<Element> SchemaCompiler::unique_subsequence(const std::vector<Json>& values, int64_t min,
                                                     std::optional<int64_t> max,
                                                     const std::string& path) {
  const int64_t k = static_cast<int64_t>(values.size());
  const int64_t most = max ? std::min(*max, k) : k;
  if (min > most) return bad(path, "uniqueItems with minItems accepts no value");
  Element comma = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(",", "c"), jb_.ws()}}, "comma");
  std::vector<Element> lits;
  for (const Json& v : values) lits.push_back(literal_value(v));
  // rest[i][c]: items from values[i..] given c already written (c >= 1); nullopt: impossible.
  std::map<std::pair<int64_t, int64_t>, std::optional<Element>> memo;
  std::function<std::optional<Element>(int64_t, int64_t)> rest = [&](int64_t i, int64_t c) {
    auto key = std::make_pair(i, c);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    Fragment alts;
    if (i == k) {
      if (c >= min) alts.push_back(Sequence{});
    } else {
      if (auto skip = rest(i + 1, c)) alts.push_back(Sequence{*skip});
      if (c < most)
        if (auto take = rest(i + 1, c + 1)) alts.push_back(Sequence{comma, lits[i], *take});
    }
    std::optional<Element> e;
    if (!alts.empty()) e = jb_.rule_of(alts, "unique");
    return memo[key] = e;
  };
  Fragment firsts;  // the first item written is values[i]
  for (int64_t i = 0; i < k && most >= 1; ++i)
    if (auto r = rest(i + 1, 1)) firsts.push_back(Sequence{lits[i], *r});
  Element open = jb_.lit("[", "o"), close = jb_.lit("]", "c");
  Fragment alts;
  if (min == 0) alts.push_back(Sequence{open, jb_.ws(), close});
  if (!firsts.empty())
    alts.push_back(Sequence{open, jb_.ws(), jb_.rule_of(firsts, "unique"), jb_.ws(), close});
  if (alts.empty()) return bad(path, "array accepts no value");
  return jb_.rule_of(alts, "array");
}

StatusOr<Element> SchemaCompiler::array(const Json& s, const std::string& path, int depth) {
  int64_t min = 0;
  std::optional<int64_t> max;
  if (s.contains("minItems")) {
    ASSIGN_OR_RETURN(min, count(s, "minItems", path));
  }
  if (s.contains("maxItems")) {
    ASSIGN_OR_RETURN(max, count(s, "maxItems", path));
  }
  if (max && *max < min) return bad(path, "item count range accepts no value");
  if (s.contains("uniqueItems") && s["uniqueItems"] == true && (!max || *max > 1)) {
    // Distinct items: over a finite item set, a subsequence of it; otherwise at most one item
    // (sound; arrays of two or more distinct items are never written).
    std::optional<std::vector<Json>> values;
    if (!s.contains("prefixItems") && s.contains("items")) values = finite_values(s["items"]);
    if (values) return unique_subsequence(*values, min, max, path);
    if (min > 1)
      return unsupported("uniqueItems", path,
                         "true with minItems above 1 and items that are not a finite set");
    max = 1;
  }
  std::vector<Element> prefix;
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) return bad(path + "/prefixItems", "must be an array");
    for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
      std::string p = path + "/prefixItems/" + std::to_string(i);
      auto e = value(s["prefixItems"][i], p, depth + 1, false);
      if (!e.ok()) {
        if (e.status().message().find("accepts no value") == std::string::npos) return e.status();
        // The array can stop before an impossible position.
        if (min > static_cast<int64_t>(i)) return e.status();
        max = max ? std::min<int64_t>(*max, i) : static_cast<int64_t>(i);
        break;
      }
      prefix.push_back(*e);
    }
  }
  // Items after the prefix: a schema, or none (items false, or strict tuple).
  std::optional<Element> rest;
  bool rest_allowed = true;
  if (s.contains("items")) {
    const Json& it = s["items"];
    if (it.is_boolean() && !it.get<bool>()) {
      rest_allowed = false;
    } else {
      auto e = value(it, path + "/items", depth + 1, false);
      if (!e.ok()) {
        if (e.status().message().find("accepts no value") == std::string::npos) return e.status();
        rest_allowed = false;
      } else {
        rest = *e;
      }
    }
  } else if (!prefix.empty() && options_.strict) {
    rest_allowed = false;
  } else {
    rest = jb_.any_value();
  }
  int64_t k = static_cast<int64_t>(prefix.size());
  if (!rest_allowed) max = max ? std::min<int64_t>(*max, k) : k;
  if (max && *max < min) return bad(path, "array accepts no value");
  Element comma = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(",", "c"), jb_.ws()}}, "comma");
  // tail(i): the items from position i on, given that position i-1 is present.
  std::optional<Element> tail;  // nullopt = nothing more
  if (rest_allowed && (!max || *max > k)) {
    Element item = jb_.rule_of({Sequence{comma, *rest}}, "item");
    int64_t need = std::max<int64_t>(0, min - k);
    std::optional<int64_t> most = max ? std::optional<int64_t>(*max - k) : std::nullopt;
    tail = jb_.repeat(item, need, most, "items");
  }
  // Walk the prefix backwards: tail(i) = "," p_i tail(i+1), optional when i >= min.
  for (int64_t i = k - 1; i >= 1; --i) {
    if (max && i >= *max) continue;
    Sequence seq = {comma, prefix[i]};
    if (tail) seq.push_back(*tail);
    Fragment alts = {seq};
    if (i >= min) alts.push_back(Sequence{});
    tail = jb_.rule_of(alts, "tuple");
  }
  Element first = k > 0 ? prefix[0] : (rest ? *rest : jb_.any_value());
  // With no prefix, "first" is the first rest item, and the rest repeat accounts for it.
  std::optional<Element> body;
  if (k > 0) {
    if (!max || *max >= 1) {
      Sequence seq = {first};
      if (tail) seq.push_back(*tail);
      body = jb_.rule_of({seq}, "elems");
    }
  } else if (rest_allowed && (!max || *max >= 1)) {
    Element item = jb_.rule_of({Sequence{comma, *rest}}, "item");
    int64_t need = std::max<int64_t>(0, min - 1);
    std::optional<int64_t> most = max ? std::optional<int64_t>(*max - 1) : std::nullopt;
    body = jb_.rule_of({Sequence{*rest, jb_.repeat(item, need, most, "items")}}, "elems");
  }
  Element open = jb_.lit("[", "o"), close = jb_.lit("]", "c");
  Fragment alts;
  if (min == 0) alts.push_back(Sequence{open, jb_.ws(), close});
  if (body) alts.push_back(Sequence{open, jb_.ws(), *body, jb_.ws(), close});
  if (alts.empty()) return bad(path, "array accepts no value");
  return jb_.rule_of(alts, "array");
}

}  // namespace deepinfer::grammar::json_detail
