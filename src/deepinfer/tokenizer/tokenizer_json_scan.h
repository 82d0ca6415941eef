// A fast first reader of tokenizer.json: model.vocab and model.merges (about 99% of the file's
// bytes) go straight into flat lists; every other field is parsed into a DOM. A DOM of the whole
// file took most of a tokenizer load (0.9 s here, 1.4 s under ASan, which about 230 test
// processes pay).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::tokenizer {

struct ScannedTokenizerJson {
  nlohmann::json rest;  // the document less model.vocab and model.merges
  std::vector<std::pair<std::string, int32_t>> vocab;       // in file order
  std::vector<std::pair<std::string, std::string>> merges;  // in file order, split in two
};

// The document read as above; nullopt when the text is anything but plain, well-formed JSON of
// the expected shape: a top-level object whose one "model" object holds one "vocab" object of
// ids in [0, 2^30] and one "merges" array of "A B" strings or [A, B] pairs. The caller then
// parses the whole DOM, whose errors name the problem, so this reader needs no messages. Where
// it returns a value, the value is the one the DOM gives (duplicate keys: the last wins).
std::optional<ScannedTokenizerJson> scan_tokenizer_json(std::string_view text);

}  // namespace deepinfer::tokenizer
