#include "deepinfer/router/prefix_index.h"

#include <functional>
#include <queue>
#include <tuple>

namespace deepinfer::router {

namespace {

size_t common_prefix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

PrefixIndex::PrefixIndex(size_t num_workers, size_t max_chars_per_worker)
    : root_(std::make_unique<Node>()), chars_(num_workers, 0), max_chars_(max_chars_per_worker) {}

PrefixIndex::~PrefixIndex() = default;

void PrefixIndex::ensure_workers(size_t num_workers) {
  if (chars_.size() < num_workers) chars_.resize(num_workers, 0);
}

void PrefixIndex::add_worker(Node* node, size_t worker) {
  auto [it, added] = node->last_use.try_emplace(worker, tick_);
  if (added)
    chars_[worker] += node->label.size();
  else
    it->second = tick_;
}

void PrefixIndex::drop_worker(Node* node, size_t worker) {
  if (node->last_use.erase(worker)) chars_[worker] -= node->label.size();
  // A node nobody lists and with no children is garbage; its parent may become so too.
  while (node != root_.get() && node->last_use.empty() && node->children.empty()) {
    Node* parent = node->parent;
    parent->children.erase(static_cast<unsigned char>(node->label[0]));
    node = parent;
  }
}

// Cuts `node`'s label at `at`: a new node holds the first part and the same workers.
PrefixIndex::Node* PrefixIndex::split(Node* node, size_t at) {
  Node* parent = node->parent;
  auto& slot = parent->children[static_cast<unsigned char>(node->label[0])];
  auto mid = std::make_unique<Node>();
  mid->label = node->label.substr(0, at);
  mid->parent = parent;
  mid->last_use = node->last_use;  // each worker's bytes are unchanged: at + (size - at)
  std::unique_ptr<Node> tail = std::move(slot);
  tail->label.erase(0, at);
  tail->parent = mid.get();
  mid->children.emplace(static_cast<unsigned char>(tail->label[0]), std::move(tail));
  slot = std::move(mid);
  return slot.get();
}

void PrefixIndex::insert(std::string_view text, size_t worker) {
  ensure_workers(worker + 1);
  ++tick_;
  Node* node = root_.get();
  size_t pos = 0;
  while (pos < text.size()) {
    auto it = node->children.find(static_cast<unsigned char>(text[pos]));
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->label = std::string(text.substr(pos));
      leaf->parent = node;
      Node* raw = leaf.get();
      node->children.emplace(static_cast<unsigned char>(text[pos]), std::move(leaf));
      add_worker(raw, worker);
      break;
    }
    Node* child = it->second.get();
    size_t k = common_prefix(child->label, text.substr(pos));
    if (k < child->label.size()) child = split(child, k);
    add_worker(child, worker);
    pos += k;
    node = child;
  }
  if (chars_[worker] > max_chars_) evict(worker);
}

std::vector<size_t> PrefixIndex::match(std::string_view text) const {
  std::vector<size_t> matched(chars_.size(), 0);
  const Node* node = root_.get();
  size_t pos = 0;
  while (pos < text.size()) {
    auto it = node->children.find(static_cast<unsigned char>(text[pos]));
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    size_t k = common_prefix(child->label, text.substr(pos));
    // A worker listed here is listed on every ancestor, so the deepest listing wins.
    for (const auto& [w, tick] : child->last_use) matched[w] = pos + k;
    if (k < child->label.size()) break;
    pos += k;
    node = child;
  }
  return matched;
}

// Drops the worker from its least recently used leaves (nodes listing it where no child does)
// until it holds at most max_chars_: a parent becomes a leaf only once its children are gone.
void PrefixIndex::evict(size_t worker) {
  using Entry = std::tuple<uint64_t, Node*>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> leaves;
  auto is_leaf = [&](const Node* n) {
    if (!n->last_use.count(worker)) return false;
    for (const auto& [c, child] : n->children)
      if (child->last_use.count(worker)) return false;
    return true;
  };
  std::function<void(Node*)> collect = [&](Node* n) {
    for (auto& [c, child] : n->children) collect(child.get());
    if (n != root_.get() && is_leaf(n)) leaves.emplace(n->last_use.at(worker), n);
  };
  collect(root_.get());
  while (chars_[worker] > max_chars_ && !leaves.empty()) {
    Node* leaf = std::get<1>(leaves.top());
    leaves.pop();
    Node* parent = leaf->parent;
    drop_worker(leaf, worker);  // may free leaf (and childless parents nobody lists)
    // The parent is still alive if it lists the worker (drop_worker frees only unlisted nodes).
    if (parent != root_.get() && parent->last_use.count(worker) && is_leaf(parent))
      leaves.emplace(parent->last_use.at(worker), parent);
  }
}

void PrefixIndex::remove_worker(size_t worker) {
  if (worker >= chars_.size()) return;
  std::function<void(Node*)> strip = [&](Node* n) {
    for (auto it = n->children.begin(); it != n->children.end();) {
      Node* child = it->second.get();
      strip(child);
      if (child->last_use.erase(worker)) chars_[worker] -= child->label.size();
      if (child->last_use.empty() && child->children.empty())
        it = n->children.erase(it);
      else
        ++it;
    }
  };
  strip(root_.get());
}

size_t PrefixIndex::num_nodes() const {
  std::function<size_t(const Node*)> count = [&](const Node* n) {
    size_t total = 1;
    for (const auto& [c, child] : n->children) total += count(child.get());
    return total;
  };
  return count(root_.get()) - 1;  // the root holds no bytes
}

}  // namespace deepinfer::router
