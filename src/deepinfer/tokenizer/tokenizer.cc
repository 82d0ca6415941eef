#include "deepinfer/tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "deepinfer/tokenizer/bpe_model.h"
#include "deepinfer/tokenizer/byte_level.h"
#include "deepinfer/tokenizer/pre_tokenizer.h"
#include "deepinfer/tokenizer/tokenizer_json_scan.h"
#include "deepinfer/tokenizer/utf8_lossy.h"

namespace deepinfer::tokenizer {
namespace {

constexpr uint8_t kKnown = 1, kSpecial = 2, kAdded = 4;

StatusOr<AddedToken> parse_added(const nlohmann::json& j, size_t i) {
  std::string where = "added_tokens[" + std::to_string(i) + "]";
  if (!j.is_object()) return invalid_argument(where + ": expected an object");
  if (!j.contains("id") || !j["id"].is_number_integer() || j["id"].get<int64_t>() < 0 ||
      j["id"].get<int64_t>() > (1 << 30))
    return invalid_argument(where + ".id: expected a non-negative integer");
  if (!j.contains("content") || !j["content"].is_string())
    return invalid_argument(where + ".content: expected a string");
  AddedToken t;
  t.id = j["id"].get<int32_t>();
  t.content = j["content"].get<std::string>();
  if (t.content.empty()) return invalid_argument(where + ".content: empty");
  auto flag = [&](const char* k, bool def) -> StatusOr<bool> {
    if (!j.contains(k)) return def;
    if (!j[k].is_boolean()) return invalid_argument(where + "." + k + ": expected a boolean");
    return j[k].get<bool>();
  };
  ASSIGN_OR_RETURN(t.special, flag("special", false));
  ASSIGN_OR_RETURN(t.lstrip, flag("lstrip", false));
  ASSIGN_OR_RETURN(t.rstrip, flag("rstrip", false));
  ASSIGN_OR_RETURN(t.normalized, flag("normalized", !t.special));
  ASSIGN_OR_RETURN(t.single_word, flag("single_word", false));
  return t;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::from_file(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) p /= "tokenizer.json";
  std::ifstream f(p, std::ios::binary);
  if (!f) return not_found("tokenizer file '" + p.string() + "' cannot be opened");
  std::stringstream ss;
  ss << f.rdbuf();
  return from_json_text(ss.str(), p.string());
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::from_json_text(std::string_view json,
                                                               const std::string& origin) {
  // The fast reader first; anything it does not take goes through the DOM, whose errors name
  // the problem.
  std::optional<ScannedTokenizerJson> scanned = scan_tokenizer_json(json);
  nlohmann::json j;
  if (scanned) {
    j = std::move(scanned->rest);
  } else {
    try {
      j = nlohmann::json::parse(json);
    } catch (const nlohmann::json::exception& e) {
      return invalid_argument(origin + ": not valid JSON: " + e.what());
    }
  }
  if (!j.is_object()) return invalid_argument(origin + ": top level must be an object");
  auto t = std::unique_ptr<Tokenizer>(new Tokenizer());
  auto fail = [&](const Status& s) { return s.with_context(origin); };
  try {
    if (!j.contains("model")) return invalid_argument(origin + ": missing field 'model'");
    auto model = scanned ? BpeModel::from_lists(j["model"], std::move(scanned->vocab),
                                                std::move(scanned->merges))
                         : BpeModel::from_json(j["model"]);
    if (!model.ok()) return fail(model.status());
    t->model_ = std::move(model).value();
    auto norm = Normalizer::from_json(j.value("normalizer", nlohmann::json()));
    if (!norm.ok()) return fail(norm.status());
    t->normalizer_ = std::move(norm).value();
    auto pre = PreTokenizer::from_json(j.value("pre_tokenizer", nlohmann::json()));
    if (!pre.ok()) return fail(pre.status());
    t->pre_tokenizer_ = std::move(pre).value();

    const nlohmann::json& dec = j.value("decoder", nlohmann::json());
    bool byte_level_decoder = false;
    if (dec.is_object() && dec.value("type", std::string()) == "ByteLevel") {
      byte_level_decoder = true;
    } else if (!dec.is_null()) {
      return invalid_argument(origin + ": decoder type '" + dec.value("type", std::string("?")) +
                              "' is not supported (ByteLevel or null)");
    }

    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array())
        return invalid_argument(origin + ": added_tokens: expected an array");
      for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
        auto a = parse_added(j["added_tokens"][i], i);
        if (!a.ok()) return fail(a.status());
        t->added_.push_back(std::move(a).value());
      }
    }

    // Decode table: added tokens override vocab entries with the same id, as in HF.
    const auto& vocab = t->model_->id_to_token();
    size_t n = vocab.size();
    for (const auto& a : t->added_) n = std::max<size_t>(n, a.id + 1);
    std::vector<const std::string*> text(n, nullptr);
    t->flags_.assign(n, 0);
    for (size_t id = 0; id < vocab.size(); ++id)
      if (!vocab[id].empty()) text[id] = &vocab[id], t->flags_[id] = kKnown;
    for (const auto& a : t->added_) {
      text[a.id] = &a.content;
      t->flags_[a.id] = kKnown | kAdded | (a.special ? kSpecial : 0);
    }
    t->bytes_offset_.assign(n + 1, 0);
    std::string raw;
    for (size_t id = 0; id < n; ++id) {
      t->bytes_offset_[id] = static_cast<uint32_t>(t->bytes_.size());
      if (!text[id]) continue;
      // HF's ByteLevel decoder maps a token through the byte alphabet only when every code
      // point is in it; otherwise (e.g. "<｜User｜>") the token's UTF-8 is used as is.
      if (byte_level_decoder && byte_level_decode(*text[id], &raw))
        t->bytes_ += raw;
      else
        t->bytes_ += *text[id];
    }
    t->bytes_offset_[n] = static_cast<uint32_t>(t->bytes_.size());

    for (const auto& a : t->added_) {
      if (a.normalized && !t->normalizer_->is_identity())
        t->normalized_matcher_.add(a);
      else
        t->raw_matcher_.add(a);
    }
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(origin + ": unexpected field type: " + e.what());
  }
  return t;
}

Status Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>* out) const {
  thread_local std::vector<Piece> pieces;
  thread_local std::string scratch;
  pieces.clear();
  RETURN_IF_ERROR(pre_tokenizer_->split(text, &pieces));
  for (const Piece& p : pieces) {
    std::string_view w = text.substr(p.begin, p.end - p.begin);
    if (p.prefix_space) {
      scratch.assign(1, ' ');
      scratch.append(w);
      model_->encode_word(scratch, out);
    } else {
      model_->encode_word(w, out);
    }
  }
  return ok_status();
}

Status Tokenizer::encode_normalized(std::string_view text, bool parse_special,
                                    std::vector<int32_t>* out) const {
  if (normalizer_->is_identity()) return encode_ordinary(text, out);
  std::string norm;
  RETURN_IF_ERROR(normalizer_->apply(text, &norm));
  if (!parse_special || normalized_matcher_.empty()) return encode_ordinary(norm, out);
  std::vector<Segment> segs;
  normalized_matcher_.split(norm, &segs);
  for (const Segment& s : segs) {
    if (s.id >= 0)
      out->push_back(s.id);
    else
      RETURN_IF_ERROR(
          encode_ordinary(std::string_view(norm).substr(s.begin, s.end - s.begin), out));
  }
  return ok_status();
}

Status Tokenizer::encode_into(std::string_view text, bool parse_special,
                              std::vector<int32_t>* out) const {
  if (!parse_special || raw_matcher_.empty()) return encode_normalized(text, parse_special, out);
  thread_local std::vector<Segment> segs;
  segs.clear();
  raw_matcher_.split(text, &segs);
  // Copy: a nested call on this thread would reuse the thread_local vector.
  std::vector<Segment> local(segs.begin(), segs.end());
  for (const Segment& s : local) {
    if (s.id >= 0)
      out->push_back(s.id);
    else
      RETURN_IF_ERROR(encode_normalized(text.substr(s.begin, s.end - s.begin), true, out));
  }
  return ok_status();
}

StatusOr<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  RETURN_IF_ERROR(encode_into(text, parse_special, &ids));
  return ids;
}

Status Tokenizer::encode_spans_into(std::span<const TextSpan> spans,
                                    std::vector<int32_t>* out) const {
  std::string text;
  size_t total = 0;
  for (const TextSpan& s : spans) total += s.text.size();
  text.reserve(total);
  std::vector<std::pair<size_t, size_t>> ranges;  // parse_special bytes, adjacent runs merged
  for (const TextSpan& s : spans) {
    size_t begin = text.size();
    text.append(s.text);
    if (!s.parse_special || s.text.empty()) continue;
    if (!ranges.empty() && ranges.back().second == begin)
      ranges.back().second = text.size();
    else
      ranges.emplace_back(begin, text.size());
  }
  std::vector<Segment> segs;
  if (raw_matcher_.empty()) {
    if (!text.empty()) segs.push_back({0, text.size(), -1});
  } else {
    raw_matcher_.split_in(text, ranges, &segs);
  }
  size_t r = 0;
  for (const Segment& s : segs) {
    if (s.id >= 0) {
      out->push_back(s.id);
      continue;
    }
    // Normalized-matched tokens only where the whole stretch is special text: offsets do not
    // survive normalization, so a mixed stretch cannot be split safely.
    while (r < ranges.size() && ranges[r].second <= s.begin) ++r;
    bool special = r < ranges.size() && ranges[r].first <= s.begin && s.end <= ranges[r].second;
    RETURN_IF_ERROR(
        encode_normalized(std::string_view(text).substr(s.begin, s.end - s.begin), special, out));
  }
  return ok_status();
}

StatusOr<std::vector<int32_t>> Tokenizer::encode_spans(std::span<const TextSpan> spans) const {
  std::vector<int32_t> ids;
  RETURN_IF_ERROR(encode_spans_into(spans, &ids));
  return ids;
}

StatusOr<std::string_view> Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !(flags_[id] & kKnown))
    return out_of_range("unknown token id " + std::to_string(id) + " (vocab size " +
                        std::to_string(vocab_size()) + ")");
  return std::string_view(bytes_).substr(bytes_offset_[id],
                                         bytes_offset_[id + 1] - bytes_offset_[id]);
}

StatusOr<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string raw;
  for (int32_t id : ids) {
    ASSIGN_OR_RETURN(std::string_view b, token_bytes(id));
    if (skip_special && (flags_[id] & kSpecial)) continue;
    raw.append(b);
  }
  return utf8_lossy(raw);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const auto& a : added_)
    if (a.content == token) return a.id;
  int32_t id = model_->lookup(token);
  if (id >= 0) return id;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && (flags_[id] & kSpecial);
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && id < vocab_size() && (flags_[id] & kAdded);
}

}  // namespace deepinfer::tokenizer
