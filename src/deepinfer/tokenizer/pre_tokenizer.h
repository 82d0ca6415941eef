// tokenizer.json "normalizer" and "pre_tokenizer": text -> pieces that BPE sees independently.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/tokenizer/regex.h"

namespace deepinfer::tokenizer {

// A piece of the input: byte range plus whether ByteLevel(add_prefix_space) put a space before it.
struct Piece {
  size_t begin;
  size_t end;
  bool prefix_space = false;
};

class Normalizer {
 public:
  // Supports null, Sequence, Prepend and Replace (String or Regex pattern); others are refused
  // with an error naming the type rather than silently mis-tokenizing.
  static StatusOr<std::unique_ptr<Normalizer>> from_json(const nlohmann::json& j);
  bool is_identity() const { return steps_.empty(); }
  Status apply(std::string_view in, std::string* out) const;

 private:
  struct Step {
    enum Kind { kPrepend, kReplace } kind;
    std::string pattern;  // literal for String patterns
    std::unique_ptr<Regex> regex;
    std::string content;
  };
  Status add(const nlohmann::json& j, const std::string& where);
  std::vector<Step> steps_;
};

class PreTokenizer {
 public:
  // Supports null, Sequence, Split (Regex or String; all five behaviours; invert) and ByteLevel.
  static StatusOr<std::unique_ptr<PreTokenizer>> from_json(const nlohmann::json& j);
  // Splits text[0, size) into pieces, appended to *out.
  Status split(std::string_view text, std::vector<Piece>* out) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    bool byte_level = false;
    bool add_prefix_space = false;
    std::unique_ptr<Regex> regex;  // null for literal String patterns
    std::string literal;
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
  };
  Status add(const nlohmann::json& j, const std::string& where);
  Status apply_step(const Step& step, std::string_view text, const std::vector<Piece>& in,
                    std::vector<Piece>* out) const;
  std::vector<Step> steps_;
};

}  // namespace deepinfer::tokenizer
