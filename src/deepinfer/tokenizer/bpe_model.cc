#include "deepinfer/tokenizer/bpe_model.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "deepinfer/tokenizer/byte_level.h"

namespace deepinfer::tokenizer {

class WordLookup {
 public:
  std::unordered_map<std::string, int32_t> map;
};

namespace {

uint64_t hash_key(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

// Words repeat heavily in real text; caching them is what makes BPE cheap.
struct WordCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};

constexpr size_t kMaxCachedWordBytes = 64;
constexpr size_t kMaxCacheEntries = 1 << 18;

std::atomic<uint64_t> next_uid{1};

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t merged;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

BpeModel::BpeModel() = default;
BpeModel::~BpeModel() = default;

bool BpeModel::find_merge(int32_t left, int32_t right, int32_t* rank, int32_t* merged) const {
  uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  for (uint64_t i = hash_key(key) & mask_;; i = (i + 1) & mask_) {
    const MergeSlot& s = merges_[i];
    if (s.key == key) {
      *rank = s.rank;
      *merged = s.merged;
      return true;
    }
    if (s.key == ~0ull) return false;
  }
}

void BpeModel::insert_merge(int32_t left, int32_t right, int32_t rank, int32_t merged) {
  uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  for (uint64_t i = hash_key(key) & mask_;; i = (i + 1) & mask_) {
    MergeSlot& s = merges_[i];
    if (s.key == key) return;  // first (lowest) rank wins, as in HF
    if (s.key == ~0ull) {
      s = {key, rank, merged};
      return;
    }
  }
}

int32_t BpeModel::lookup(std::string_view token) const {
  auto it = std::lower_bound(sorted_vocab_.begin(), sorted_vocab_.end(), token,
                             [](const auto& a, std::string_view b) { return a.first < b; });
  return it != sorted_vocab_.end() && it->first == token ? it->second : -1;
}

namespace {

// The fields besides vocab and merges; both entry points check them first.
Status check_model_fields(const nlohmann::json& model) {
  if (!model.is_object()) return invalid_argument("model: expected an object");
  std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") return unimplemented("model.type '" + type + "' is not supported (only BPE)");
  for (const char* f : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"}) {
    if (model.contains(f) && !model[f].is_null())
      return unimplemented(std::string("model.") + f + " is not supported");
  }
  if (model.value("byte_fallback", false))
    return unimplemented("model.byte_fallback is not supported (byte-level BPE only)");
  return ok_status();
}

}  // namespace

bool BpeModel::split_merge(std::string_view s, std::string* left, std::string* right) {
  const size_t sp = s.find(' ', 1);
  if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos) return false;
  left->assign(s.substr(0, sp));
  right->assign(s.substr(sp + 1));
  return true;
}

StatusOr<std::unique_ptr<BpeModel>> BpeModel::from_json(const nlohmann::json& model) {
  RETURN_IF_ERROR(check_model_fields(model));
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return invalid_argument("model.vocab: expected an object of token -> id");
  if (!model.contains("merges") || !model["merges"].is_array())
    return invalid_argument("model.merges: expected an array");
  Vocab vocab;
  vocab.reserve(model["vocab"].size());
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > (1 << 30))
      return invalid_argument("model.vocab['" + it.key() + "']: id must be a non-negative integer");
    vocab.emplace_back(it.key(), it.value().get<int32_t>());
  }
  const auto& entries = model["merges"];
  Merges merges(entries.size());
  for (size_t r = 0; r < entries.size(); ++r) {
    const auto& e = entries[r];
    auto& [left, right] = merges[r];
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      if (!split_merge(s, &left, &right))
        return invalid_argument("model.merges[" + std::to_string(r) +
                                "]: expected \"A B\", got \"" + s + "\"");
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      return invalid_argument("model.merges[" + std::to_string(r) +
                              "]: expected a string \"A B\" or a pair of strings");
    }
  }
  return build(model, std::move(vocab), std::move(merges));
}

StatusOr<std::unique_ptr<BpeModel>> BpeModel::from_lists(const nlohmann::json& model, Vocab vocab,
                                                         Merges merges) {
  RETURN_IF_ERROR(check_model_fields(model));
  return build(model, std::move(vocab), std::move(merges));
}

StatusOr<std::unique_ptr<BpeModel>> BpeModel::build(const nlohmann::json& model, Vocab vocab_list,
                                                    Merges merges) {
  auto m = std::unique_ptr<BpeModel>(new BpeModel());
  m->uid_ = next_uid++;
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(vocab_list.size());
  for (auto& [tok, id] : vocab_list) vocab.insert_or_assign(std::move(tok), id);
  vocab_list = Vocab();
  m->sorted_vocab_.assign(vocab.begin(), vocab.end());
  std::sort(m->sorted_vocab_.begin(), m->sorted_vocab_.end());
  int32_t max_id = -1;
  for (const auto& [tok, id] : m->sorted_vocab_) max_id = std::max(max_id, id);
  // In token order, so that of two tokens with one id the same one names it whatever order
  // the file or the hash table gives.
  m->id_to_token_.assign(static_cast<size_t>(max_id) + 1, std::string());
  for (const auto& [tok, id] : m->sorted_vocab_) m->id_to_token_[id] = tok;

  for (int b = 0; b < 256; ++b) {
    std::string sym;
    append_utf8(byte_to_code_point(static_cast<uint8_t>(b)), &sym);
    auto it = vocab.find(sym);
    if (it == vocab.end())
      return invalid_argument("model.vocab: missing the byte-level symbol for byte " +
                              std::to_string(b) + " (needed since there is no byte fallback)");
    m->byte_id_[b] = it->second;
  }

  size_t cap = 1;
  while (cap < merges.size() * 2 + 16) cap <<= 1;
  m->merges_.assign(cap, MergeSlot{});
  m->mask_ = cap - 1;
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [left, right] = merges[r];
    joined.assign(left).append(right);
    auto a = vocab.find(left), b = vocab.find(right), c = vocab.find(joined);
    if (a == vocab.end() || b == vocab.end() || c == vocab.end())
      return invalid_argument("model.merges[" + std::to_string(r) + "]: '" + left + "' + '" +
                              right + "' refers to a token missing from model.vocab");
    m->insert_merge(a->second, b->second, static_cast<int32_t>(r), c->second);
  }
  m->ignore_merges_ = model.value("ignore_merges", false);
  if (m->ignore_merges_) {
    m->whole_words_ = std::make_unique<WordLookup>();
    for (const auto& [tok, id] : m->sorted_vocab_) {  // token order, as above
      std::string raw;
      if (byte_level_decode(tok, &raw)) m->whole_words_->map.emplace(raw, id);
    }
  }
  return m;
}

void BpeModel::merge_word(std::string_view bytes, std::vector<int32_t>* out) const {
  thread_local std::vector<Symbol> syms;
  thread_local std::vector<Candidate> heap_storage;
  syms.clear();
  int32_t n = static_cast<int32_t>(bytes.size());
  for (int32_t i = 0; i < n; ++i)
    syms.push_back({byte_id_[static_cast<uint8_t>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1, true});
  auto& heap = heap_storage;
  heap.clear();
  auto push = [&](Candidate c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  int32_t rank, merged;
  for (int32_t i = 0; i + 1 < n; ++i)
    if (find_merge(syms[i].id, syms[i + 1].id, &rank, &merged)) push({rank, i, merged});
  // Lowest rank first, leftmost on ties: the same order as HF's merge loop.
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    Candidate c = heap.back();
    heap.pop_back();
    Symbol& s = syms[c.pos];
    if (!s.alive || s.next < 0) continue;
    Symbol& r = syms[s.next];
    if (!find_merge(s.id, r.id, &rank, &merged) || merged != c.merged) continue;
    s.id = merged;
    r.alive = false;
    s.next = r.next;
    if (s.next >= 0) syms[s.next].prev = c.pos;
    if (s.prev >= 0 && find_merge(syms[s.prev].id, s.id, &rank, &merged))
      push({rank, s.prev, merged});
    if (s.next >= 0 && find_merge(s.id, syms[s.next].id, &rank, &merged))
      push({rank, c.pos, merged});
  }
  for (int32_t i = 0; i >= 0 && i < n; i = syms[i].next) out->push_back(syms[i].id);
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>* out) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1) {
    out->push_back(byte_id_[static_cast<uint8_t>(bytes[0])]);
    return;
  }
  if (ignore_merges_) {
    auto it = whole_words_->map.find(std::string(bytes));
    if (it != whole_words_->map.end()) {
      out->push_back(it->second);
      return;
    }
  }
  if (bytes.size() > kMaxCachedWordBytes) {
    merge_word(bytes, out);
    return;
  }
  thread_local WordCache cache;
  if (cache.owner != uid_) {
    cache.map.clear();
    cache.owner = uid_;
  }
  auto it = cache.map.find(bytes);
  if (it != cache.map.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  size_t start = out->size();
  merge_word(bytes, out);
  if (cache.map.size() >= kMaxCacheEntries) cache.map.clear();
  cache.map.emplace(std::string(bytes), std::vector<int32_t>(out->begin() + start, out->end()));
}

}  // namespace deepinfer::tokenizer
