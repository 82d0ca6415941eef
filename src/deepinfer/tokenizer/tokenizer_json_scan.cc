#include "deepinfer/tokenizer/tokenizer_json_scan.h"

#include <cstring>

#include "deepinfer/tokenizer/bpe_model.h"
#include "deepinfer/tokenizer/byte_level.h"
#include "deepinfer/tokenizer/utf8_lossy.h"

namespace deepinfer::tokenizer {
namespace {

// A cursor over the text. Every method returns false on anything unexpected; the caller then
// gives up and leaves the text to the DOM parser.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool at_end() {
    skip_ws();
    return p_ == end_;
  }
  bool eat(char c) {
    skip_ws();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  // A JSON string, unescaped, with the checks nlohmann's lexer makes: no raw control
  // characters, well-formed UTF-8 (RFC 3629), \u escapes with surrogates only in pairs.
  bool string(std::string* out) {
    out->clear();
    if (!eat('"')) return false;
    while (p_ != end_) {
      const char* run = p_;
      while (p_ != end_ && static_cast<unsigned char>(*p_) >= 0x20 &&
             static_cast<unsigned char>(*p_) < 0x80 && *p_ != '"' && *p_ != '\\')
        ++p_;
      out->append(run, p_);
      if (p_ == end_) return false;
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        if (!escape(out)) return false;
      } else if (!utf8_char(out)) {
        return false;
      }
    }
    return false;
  }

  // A non-negative integer without fraction or exponent, at most `max`.
  bool integer(int64_t max, int64_t* v) {
    skip_ws();
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0' && p_ + 1 != end_ && p_[1] >= '0' && p_[1] <= '9') return false;
    int64_t x = 0;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
      x = x * 10 + (*p_++ - '0');
      if (x > max) return false;
    }
    if (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    *v = x;
    return true;
  }

  // Any value, parsed by nlohmann from its extent (found by bracket depth outside strings).
  bool value(nlohmann::json* out) {
    skip_ws();
    const char* begin = p_;
    int depth = 0;
    while (p_ != end_) {
      const char c = *p_;
      if (c == '"') {
        if (!skip_string()) return false;
      } else if (c == '{' || c == '[') {
        ++depth, ++p_;
      } else if (c == '}' || c == ']') {
        if (depth == 0) break;
        --depth, ++p_;
      } else if (c == ',' && depth == 0) {
        break;
      } else {
        ++p_;
      }
      if (depth == 0 && (c == '"' || c == '}' || c == ']')) break;
    }
    if (depth != 0 || p_ == begin) return false;
    *out = nlohmann::json::parse(begin, p_, nullptr, /*allow_exceptions=*/false);
    return !out->is_discarded();
  }

 private:
  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool skip_string() {
    ++p_;  // the opening quote
    while (p_ != end_) {
      if (*p_ == '\\') {
        if (++p_ == end_) return false;
      } else if (*p_ == '"') {
        ++p_;
        return true;
      }
      ++p_;
    }
    return false;
  }

  bool hex4(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    uint32_t x = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      x <<= 4;
      if (c >= '0' && c <= '9')
        x |= c - '0';
      else if (c >= 'a' && c <= 'f')
        x |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        x |= c - 'A' + 10;
      else
        return false;
    }
    *v = x;
    return true;
  }

  bool escape(std::string* out) {
    if (++p_ == end_) return false;
    const char c = *p_++;
    if (c != 'u') {
      static constexpr std::string_view kEscaped = "\"\\/bfnrt", kMeant = "\"\\/\b\f\n\r\t";
      const size_t k = kEscaped.find(c);
      if (k == std::string_view::npos) return false;
      out->push_back(kMeant[k]);
      return true;
    }
    uint32_t cp;
    if (!hex4(&cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate first
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      uint32_t low;
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
      p_ += 2;
      if (!hex4(&low) || low < 0xDC00 || low > 0xDFFF) return false;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(static_cast<char32_t>(cp), out);
    return true;
  }

  // One multi-byte UTF-8 character, copied when well-formed.
  bool utf8_char(std::string* out) {
    const auto [n, lo, hi] = utf8_lead(static_cast<unsigned char>(*p_));
    if (n == 0 || end_ - p_ < n) return false;
    for (int i = 1; i < n; ++i) {
      const unsigned char b = static_cast<unsigned char>(p_[i]);
      if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return false;
    }
    out->append(p_, p_ + n);
    p_ += n;
    return true;
  }

  const char* p_;
  const char* end_;
};

// Members of an object, after its '{': calls member(key) at each value; false on a bad shape.
template <typename Member>
bool members(Cursor& c, Member&& member) {
  std::string key;
  if (c.eat('}')) return true;
  do {
    if (!c.string(&key) || !c.eat(':') || !member(key)) return false;
  } while (c.eat(','));
  return c.eat('}');
}

bool read_vocab(Cursor& c, std::vector<std::pair<std::string, int32_t>>* vocab) {
  if (!c.eat('{')) return false;
  return members(c, [&](const std::string& key) {
    int64_t id;
    if (!c.integer(int64_t{1} << 30, &id)) return false;
    vocab->emplace_back(key, static_cast<int32_t>(id));
    return true;
  });
}

bool read_merges(Cursor& c, std::vector<std::pair<std::string, std::string>>* merges) {
  if (!c.eat('[')) return false;
  if (c.eat(']')) return true;
  std::string s, right;
  do {
    if (c.eat('[')) {
      if (!c.string(&s) || !c.eat(',') || !c.string(&right) || !c.eat(']')) return false;
      merges->emplace_back(s, right);
    } else {
      auto& m = merges->emplace_back();
      if (!c.string(&s) || !BpeModel::split_merge(s, &m.first, &m.second)) return false;
    }
  } while (c.eat(','));
  return c.eat(']');
}

}  // namespace

std::optional<ScannedTokenizerJson> scan_tokenizer_json(std::string_view text) {
  Cursor c(text);
  ScannedTokenizerJson out;
  out.rest = nlohmann::json::object();
  bool seen_model = false;
  if (!c.eat('{')) return std::nullopt;
  const bool ok = members(c, [&](const std::string& key) {
    if (key != "model") return c.value(&out.rest[key]);
    if (seen_model || !c.eat('{')) return false;
    seen_model = true;
    nlohmann::json& model = out.rest["model"] = nlohmann::json::object();
    bool seen_vocab = false, seen_merges = false;
    return members(c,
                   [&](const std::string& field) {
                     if (field == "vocab") {
                       if (seen_vocab) return false;
                       seen_vocab = true;
                       return read_vocab(c, &out.vocab);
                     }
                     if (field == "merges") {
                       if (seen_merges) return false;
                       seen_merges = true;
                       return read_merges(c, &out.merges);
                     }
                     return c.value(&model[field]);
                   }) &&
           seen_vocab && seen_merges;
  });
  if (!ok || !seen_model || !c.at_end()) return std::nullopt;
  return out;
}

}  // namespace deepinfer::tokenizer
