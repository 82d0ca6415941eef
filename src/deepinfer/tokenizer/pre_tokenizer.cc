#include "deepinfer/tokenizer/pre_tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

// The GPT-2 pattern ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return "";
  return j["type"].get<std::string>();
}

}  // namespace

// ---- Normalizer ----

StatusOr<std::unique_ptr<Normalizer>> Normalizer::from_json(const nlohmann::json& j) {
  auto n = std::unique_ptr<Normalizer>(new Normalizer());
  if (!j.is_null()) RETURN_IF_ERROR(n->add(j, "normalizer"));
  return n;
}

Status Normalizer::add(const nlohmann::json& j, const std::string& where) {
  std::string type = type_of(j);
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return invalid_argument(where + ".normalizers: expected an array");
    for (size_t i = 0; i < j["normalizers"].size(); ++i)
      RETURN_IF_ERROR(add(j["normalizers"][i], where + ".normalizers[" + std::to_string(i) + "]"));
    return ok_status();
  }
  if (type == "Prepend") {
    if (!j.contains("prepend") || !j["prepend"].is_string())
      return invalid_argument(where + ".prepend: expected a string");
    steps_.push_back({Step::kPrepend, "", nullptr, j["prepend"].get<std::string>()});
    return ok_status();
  }
  if (type == "Replace") {
    if (!j.contains("pattern") || !j["pattern"].is_object() || !j.contains("content") ||
        !j["content"].is_string())
      return invalid_argument(where + ": Replace needs pattern {String|Regex} and content");
    Step s{Step::kReplace, "", nullptr, j["content"].get<std::string>()};
    const auto& p = j["pattern"];
    if (p.contains("String") && p["String"].is_string()) {
      s.pattern = p["String"].get<std::string>();
      if (s.pattern.empty()) return invalid_argument(where + ".pattern.String: empty");
    } else if (p.contains("Regex") && p["Regex"].is_string()) {
      auto r = Regex::compile(p["Regex"].get<std::string>());
      if (!r.ok()) return r.status().with_context(where + ".pattern.Regex");
      s.regex = std::move(r).value();
    } else {
      return invalid_argument(where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}");
    }
    steps_.push_back(std::move(s));
    return ok_status();
  }
  return unimplemented(where + ": normalizer type '" + type + "' is not supported");
}

Status Normalizer::apply(std::string_view in, std::string* out) const {
  std::string cur(in), next;
  std::vector<std::pair<size_t, size_t>> m;
  for (const Step& s : steps_) {
    if (s.kind == Step::kPrepend) {
      if (!cur.empty()) cur = s.content + cur;
      continue;
    }
    m.clear();
    if (s.regex) {
      RETURN_IF_ERROR(s.regex->find_all(cur, &m));
    } else {
      for (size_t p = cur.find(s.pattern); p != std::string::npos;
           p = cur.find(s.pattern, p + s.pattern.size()))
        m.emplace_back(p, p + s.pattern.size());
    }
    next.clear();
    size_t prev = 0;
    for (auto [b, e] : m) {
      next.append(cur, prev, b - prev);
      next += s.content;
      prev = e;
    }
    next.append(cur, prev, std::string::npos);
    cur.swap(next);
  }
  *out = std::move(cur);
  return ok_status();
}

// ---- PreTokenizer ----

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::from_json(const nlohmann::json& j) {
  auto p = std::unique_ptr<PreTokenizer>(new PreTokenizer());
  if (!j.is_null()) RETURN_IF_ERROR(p->add(j, "pre_tokenizer"));
  return p;
}

Status PreTokenizer::add(const nlohmann::json& j, const std::string& where) {
  std::string type = type_of(j);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return invalid_argument(where + ".pretokenizers: expected an array");
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i)
      RETURN_IF_ERROR(
          add(j["pretokenizers"][i], where + ".pretokenizers[" + std::to_string(i) + "]"));
    return ok_status();
  }
  Step s;
  if (type == "ByteLevel") {
    s.byte_level = true;
    s.add_prefix_space = j.value("add_prefix_space", true);
    // The byte mapping itself happens inside BPE (which works on raw bytes); only the
    // optional GPT-2 split is a real pre-tokenization step.
    if (j.value("use_regex", true)) {
      auto r = Regex::compile(kGpt2Pattern);
      if (!r.ok()) return r.status().with_context(where);
      s.regex = std::move(r).value();
    }
    steps_.push_back(std::move(s));
    return ok_status();
  }
  if (type == "Split") {
    if (!j.contains("pattern") || !j["pattern"].is_object())
      return invalid_argument(where + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
    const auto& p = j["pattern"];
    if (p.contains("Regex") && p["Regex"].is_string()) {
      auto r = Regex::compile(p["Regex"].get<std::string>());
      if (!r.ok()) return r.status().with_context(where + ".pattern.Regex");
      s.regex = std::move(r).value();
    } else if (p.contains("String") && p["String"].is_string()) {
      s.literal = p["String"].get<std::string>();
      if (s.literal.empty()) return invalid_argument(where + ".pattern.String: empty");
    } else {
      return invalid_argument(where + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
    }
    std::string b = j.value("behavior", std::string("Isolated"));
    if (b == "Removed") {
      s.behavior = Behavior::kRemoved;
    } else if (b == "Isolated") {
      s.behavior = Behavior::kIsolated;
    } else if (b == "MergedWithPrevious") {
      s.behavior = Behavior::kMergedWithPrevious;
    } else if (b == "MergedWithNext") {
      s.behavior = Behavior::kMergedWithNext;
    } else if (b == "Contiguous") {
      s.behavior = Behavior::kContiguous;
    } else {
      return invalid_argument(where + ".behavior: unknown value '" + b + "'");
    }
    s.invert = j.value("invert", false);
    steps_.push_back(std::move(s));
    return ok_status();
  }
  return unimplemented(where + ": pre_tokenizer type '" + type + "' is not supported");
}

Status PreTokenizer::apply_step(const Step& step, std::string_view text,
                                const std::vector<Piece>& in, std::vector<Piece>* out) const {
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  thread_local std::vector<std::pair<Piece, bool>> ranges;
  for (const Piece& piece : in) {
    bool prefix = piece.prefix_space;
    if (step.byte_level && step.add_prefix_space && !prefix && text[piece.begin] != ' ')
      prefix = true;
    if (!step.regex && step.byte_level) {
      out->push_back({piece.begin, piece.end, prefix});
      continue;
    }
    std::string_view sub = text.substr(piece.begin, piece.end - piece.begin);
    matches.clear();
    if (step.regex) {
      if (prefix && step.byte_level) {
        // The prepended space takes part in matching; it stays attached to the first piece.
        std::string with_space = " " + std::string(sub);
        RETURN_IF_ERROR(step.regex->find_all(with_space, &matches));
        for (auto& [b, e] : matches) b = b == 0 ? 0 : b - 1, e = e - 1;
      } else {
        RETURN_IF_ERROR(step.regex->find_all(sub, &matches));
      }
    } else {
      for (size_t p = sub.find(step.literal); p != std::string_view::npos;
           p = sub.find(step.literal, p + step.literal.size()))
        matches.emplace_back(p, p + step.literal.size());
    }
    // Cover the piece with (range, is_match) like HF's find_matches, then apply behaviour.
    ranges.clear();
    size_t prev = 0;
    for (auto [b, e] : matches) {
      if (e <= prev) continue;
      if (b > prev) ranges.push_back({{piece.begin + prev, piece.begin + b}, step.invert});
      ranges.push_back({{piece.begin + b, piece.begin + e}, !step.invert});
      prev = e;
    }
    if (prev < sub.size()) ranges.push_back({{piece.begin + prev, piece.end}, step.invert});
    size_t first_out = out->size();
    switch (step.behavior) {
      case Behavior::kRemoved:
        for (auto& [r, m] : ranges)
          if (!m) out->push_back(r);
        break;
      case Behavior::kIsolated:
        for (auto& [r, m] : ranges) out->push_back(r);
        break;
      case Behavior::kMergedWithPrevious: {
        bool prev_match = false;
        for (auto& [r, m] : ranges) {
          if (m && !prev_match && out->size() > first_out)
            out->back().end = r.end;
          else
            out->push_back(r);
          prev_match = m;
        }
        break;
      }
      case Behavior::kMergedWithNext: {
        std::vector<Piece> rev;
        bool prev_match = false;
        for (size_t i = ranges.size(); i-- > 0;) {
          auto& [r, m] = ranges[i];
          if (m && !prev_match && !rev.empty())
            rev.back().begin = r.begin;
          else
            rev.push_back(r);
          prev_match = m;
        }
        out->insert(out->end(), rev.rbegin(), rev.rend());
        break;
      }
      case Behavior::kContiguous: {
        bool prev_match = false;
        bool first = true;
        for (auto& [r, m] : ranges) {
          if (!first && m == prev_match)
            out->back().end = r.end;
          else
            out->push_back(r);
          prev_match = m;
          first = false;
        }
        break;
      }
    }
    if (prefix && out->size() > first_out) (*out)[first_out].prefix_space = true;
  }
  return ok_status();
}

Status PreTokenizer::split(std::string_view text, std::vector<Piece>* out) const {
  if (text.empty()) return ok_status();
  thread_local std::vector<Piece> a, b;
  a.clear();
  a.push_back({0, text.size(), false});
  for (const Step& s : steps_) {
    b.clear();
    RETURN_IF_ERROR(apply_step(s, text, a, &b));
    a.swap(b);
  }
  out->insert(out->end(), a.begin(), a.end());
  return ok_status();
}

}  // namespace deepinfer::tokenizer
