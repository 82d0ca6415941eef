// Byte-level BPE: vocab, merges by rank, and the merge loop for one pre-token.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::tokenizer {

class BpeModel {
 public:
  using Vocab = std::vector<std::pair<std::string, int32_t>>;       // token -> id, file order
  using Merges = std::vector<std::pair<std::string, std::string>>;  // by rank

  // `model` is tokenizer.json's "model" object (type BPE). Errors name the offending field.
  static StatusOr<std::unique_ptr<BpeModel>> from_json(const nlohmann::json& model);
  // The same, from `model` less its vocab and merges, which come as lists (ids in [0, 2^30];
  // a repeated token keeps its last id, as in the DOM).
  static StatusOr<std::unique_ptr<BpeModel>> from_lists(const nlohmann::json& model, Vocab vocab,
                                                        Merges merges);
  // A merges entry written as one string "A B": false unless it holds exactly one space past
  // its first byte.
  static bool split_merge(std::string_view s, std::string* left, std::string* right);
  ~BpeModel();

  // Appends the ids of one pre-token given as raw bytes. Thread-safe: the word cache is
  // per thread.
  void encode_word(std::string_view bytes, std::vector<int32_t>* out) const;

  // Vocab strings as written in tokenizer.json (byte-level alphabet), indexed by id; empty
  // for ids the vocab does not define.
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }
  int32_t lookup(std::string_view token) const;  // -1 if absent

 private:
  BpeModel();
  // from_lists after check_model_fields (which both entry points run once).
  static StatusOr<std::unique_ptr<BpeModel>> build(const nlohmann::json& model, Vocab vocab,
                                                   Merges merges);
  struct MergeSlot {
    uint64_t key = ~0ull;  // (left << 32) | right; ~0 marks an empty slot
    int32_t rank = 0;
    int32_t merged = 0;
  };
  bool find_merge(int32_t left, int32_t right, int32_t* rank, int32_t* merged) const;
  void insert_merge(int32_t left, int32_t right, int32_t rank, int32_t merged);
  void merge_word(std::string_view bytes, std::vector<int32_t>* out) const;

  std::vector<std::string> id_to_token_;
  std::vector<std::pair<std::string, int32_t>> sorted_vocab_;  // for lookup()
  std::array<int32_t, 256> byte_id_{};
  std::vector<MergeSlot> merges_;  // open addressing, power-of-two size
  uint64_t mask_ = 0;
  bool ignore_merges_ = false;
  std::unique_ptr<class WordLookup> whole_words_;  // only with ignore_merges
  uint64_t uid_ = 0;                               // tags per-thread caches
};

}  // namespace deepinfer::tokenizer
