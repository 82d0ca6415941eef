// An approximate record of the prompts each worker has served, as SGLang's cache-aware router
// keeps it: one radix tree over prompt bytes whose nodes list the workers that served a prompt
// through them. It only guesses what a worker's prefix cache holds (the worker evicts on its
// own), so it is bounded per worker and evicts least recently used leaves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deepinfer::router {

class PrefixIndex {
 public:
  // max_chars_per_worker: the bytes of tree one worker may hold before its oldest leaves go.
  PrefixIndex(size_t num_workers, size_t max_chars_per_worker);
  ~PrefixIndex();

  // `worker` served `text`: every node on its path lists the worker, newest use first.
  void insert(std::string_view text, size_t worker);
  // Per worker, the length in bytes of the longest prefix of `text` it has served.
  std::vector<size_t> match(std::string_view text) const;
  // Bytes of tree the worker holds (the sum of the labels of the nodes that list it).
  size_t chars(size_t worker) const { return worker < chars_.size() ? chars_[worker] : 0; }
  // Workers may join after construction (self-registration); indices stay stable.
  void ensure_workers(size_t num_workers);
  // The worker's cache is gone (it was ejected and may come back restarted).
  void remove_worker(size_t worker);
  size_t num_nodes() const;

 private:
  struct Node {
    std::string label;  // the bytes from the parent to here
    Node* parent = nullptr;
    std::map<unsigned char, std::unique_ptr<Node>> children;
    std::unordered_map<size_t, uint64_t> last_use;  // worker -> tick of its latest insert
  };
  void add_worker(Node* node, size_t worker);
  void drop_worker(Node* node, size_t worker);
  void evict(size_t worker);
  Node* split(Node* node, size_t at);

  std::unique_ptr<Node> root_;
  std::vector<size_t> chars_;
  size_t max_chars_;
  uint64_t tick_ = 0;
};

}  // namespace deepinfer::router
