#include "deepinfer/backend/cpu/expert_exchange.h"

#include <cstring>
#include <string>

#include "deepinfer/base/thread_pool.h"

namespace deepinfer::cpu {
namespace {

// Every buffer opens with a tag naming its exchange (dispatch or combine, and of which
// micro-batch), so ranks that disagree on the schedule fail instead of misreading records.
// Dispatch record: token, slot, expert, weight (4 x 4 bytes), then the token's hidden row.
// Combine record: token, slot, then the pair's output row.
constexpr size_t kTag = 4, kHead = 16;
enum Part : uint8_t { kWhole = 0, kFirst = 1, kSecond = 2, kNone, kTaken };
uint32_t dispatch_tag(Part p) { return 0x44000000u | p; }  // 'D'
uint32_t combine_tag(Part p) { return 0x43000000u | p; }   // 'C'

void put(std::string* s, const void* v, size_t n) { s->append(static_cast<const char*>(v), n); }
template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// One exchange's buffers: the tag, then whole records of `record` bytes. Errors name the rank.
Status check_buffers(const std::vector<std::string>& recv, uint32_t tag, size_t record,
                     const char* what) {
  for (size_t s = 0; s < recv.size(); ++s) {
    const std::string& b = recv[s];
    if (b.size() < kTag || get<uint32_t>(b.data()) != tag)
      return failed_precondition(std::string(what) + " from rank " + std::to_string(s) +
                                 ": it is in another exchange (every rank must run the same "
                                 "schedule: two-batch overlap on or off alike)");
    if ((b.size() - kTag) % record != 0)
      return internal_error(std::string(what) + " from rank " + std::to_string(s) + ": " +
                            std::to_string(b.size()) + " bytes is not whole records");
  }
  return ok_status();
}

class Exchange {
 public:
  Exchange(Collective& group, const float* h, int64_t hidden, int64_t n, int K,
           const std::vector<ExpertPair>& pairs, const ExpertCompute& compute, float* contrib)
      : group_(group),
        h_(h),
        hidden_(hidden),
        row_(static_cast<size_t>(hidden) * sizeof(float)),
        K_(K),
        pairs_(pairs),
        compute_(compute),
        contrib_(contrib),
        sent_in_(static_cast<size_t>(n * K), kNone) {}

  // pairs[first, last) (checked by check_pairs), each to its rank.
  std::vector<std::string> dispatch(size_t first, size_t last, Part part) {
    std::vector<std::string> send(group_.size());
    const uint32_t tag = dispatch_tag(part);
    for (std::string& b : send) put(&b, &tag, kTag);
    for (size_t i = first; i < last; ++i) {
      const ExpertPair& p = pairs_[i];
      sent_in_[p.token * K_ + p.slot] = part;
      std::string& b = send[p.rank];
      put(&b, &p.token, 4);
      put(&b, &p.slot, 4);
      put(&b, &p.expert, 4);
      put(&b, &p.weight, 4);
      put(&b, h_ + p.token * hidden_, row_);
    }
    return send;
  }

  // The pairs other ranks sent here, computed on the pool; their outputs to send back.
  Status serve(const std::vector<std::string>& recv, Part part, std::vector<std::string>* back) {
    RETURN_IF_ERROR(check_buffers(recv, dispatch_tag(part), kHead + row_, "expert dispatch"));
    struct Received {
      int src;
      const char* rec;
    };
    std::vector<Received> got;
    for (size_t s = 0; s < recv.size(); ++s)
      for (size_t at = kTag; at < recv[s].size(); at += kHead + row_)
        got.push_back({static_cast<int>(s), recv[s].data() + at});
    std::vector<float> out(got.size() * hidden_, 0.0f);
    ThreadPool::default_pool().parallel_for(
        static_cast<int64_t>(got.size()), 1, [&](int64_t b, int64_t e) {
          std::vector<float> x(hidden_);
          for (int64_t i = b; i < e; ++i) {
            const char* r = got[i].rec;
            std::memcpy(x.data(), r + kHead, row_);
            compute_(get<int32_t>(r + 8), x.data(), get<float>(r + 12), &out[i * hidden_]);
          }
        });
    back->assign(recv.size(), std::string());
    const uint32_t tag = combine_tag(part);
    for (std::string& b : *back) put(&b, &tag, kTag);
    for (size_t i = 0; i < got.size(); ++i) {
      std::string& b = (*back)[got[i].src];
      b.append(got[i].rec, 8);  // token, slot
      put(&b, &out[i * hidden_], row_);
    }
    return ok_status();
  }

  // The outputs of the pairs dispatched in `part`, into their (token, slot).
  Status take(const std::vector<std::string>& recv, Part part) {
    RETURN_IF_ERROR(check_buffers(recv, combine_tag(part), 8 + row_, "expert combine"));
    const int64_t slots = static_cast<int64_t>(sent_in_.size());
    for (size_t s = 0; s < recv.size(); ++s)
      for (size_t at = kTag; at < recv[s].size(); at += 8 + row_) {
        const char* r = recv[s].data() + at;
        const int64_t t = get<int32_t>(r), k = get<int32_t>(r + 4), i = t * K_ + k;
        if (t < 0 || k < 0 || k >= K_ || i >= slots || sent_in_[i] != part)
          return internal_error("expert combine from rank " + std::to_string(s) +
                                ": an unexpected (token, slot)");
        sent_in_[i] = kTaken;
        std::memcpy(contrib_ + i * hidden_, r + 8, row_);
      }
    return ok_status();
  }

  Status check_complete() const {
    for (size_t i = 0; i < sent_in_.size(); ++i)
      if (sent_in_[i] != kTaken)
        return internal_error("expert combine: token " + std::to_string(i / K_) +
                              " is missing slot " + std::to_string(i % K_));
    return ok_status();
  }

 private:
  Collective& group_;
  const float* h_;
  const int64_t hidden_;
  const size_t row_;
  const int K_;
  const std::vector<ExpertPair>& pairs_;
  const ExpertCompute& compute_;
  float* contrib_;
  std::vector<Part> sent_in_;  // per (token, slot): the part it went out in, then kTaken
};

// Every pair names a (token, slot) of the batch once, and a rank of the group.
Status check_pairs(const std::vector<ExpertPair>& pairs, int64_t n, int K, int size) {
  std::vector<char> named(static_cast<size_t>(n * K), 0);
  for (const ExpertPair& p : pairs) {
    if (p.rank < 0 || p.rank >= size)
      return internal_error("expert dispatch: expert " + std::to_string(p.expert) +
                            " sent to rank " + std::to_string(p.rank) + " of a group of " +
                            std::to_string(size));
    if (p.token < 0 || p.token >= n || p.slot < 0 || p.slot >= K || named[p.token * K + p.slot]++)
      return internal_error("expert dispatch: token " + std::to_string(p.token) + " slot " +
                            std::to_string(p.slot) + " is outside the batch or named twice");
  }
  return ok_status();
}

Status run_serial(Exchange& x, Collective& group, size_t pairs, const ExchangeSchedule& schedule) {
  std::vector<std::string> recv, back;
  RETURN_IF_ERROR(group.all_to_all(x.dispatch(0, pairs, kWhole), &recv));
  RETURN_IF_ERROR(x.serve(recv, kWhole, &back));
  RETURN_IF_ERROR(group.all_to_all(std::move(back), &recv));
  RETURN_IF_ERROR(x.take(recv, kWhole));
  if (schedule.local) schedule.local();
  return ok_status();
}

// The micro-batches are the two halves of the pair list (token-major, so whole tokens where
// n >= 2; a one-token decode row's slots split too, so it also has something to overlap).
Status run_two_batch(Exchange& x, Collective& group, size_t pairs,
                     const ExchangeSchedule& schedule) {
  const size_t split = (pairs + 1) / 2;
  std::vector<std::string> recv, back;
  PendingExchange dispatch_a = group.start_all_to_all(x.dispatch(0, split, kFirst));
  PendingExchange dispatch_b = group.start_all_to_all(x.dispatch(split, pairs, kSecond));
  if (schedule.local) schedule.local();
  RETURN_IF_ERROR(dispatch_a.wait(&recv));
  RETURN_IF_ERROR(x.serve(recv, kFirst, &back));
  PendingExchange combine_a = group.start_all_to_all(std::move(back));
  RETURN_IF_ERROR(dispatch_b.wait(&recv));
  RETURN_IF_ERROR(x.serve(recv, kSecond, &back));
  PendingExchange combine_b = group.start_all_to_all(std::move(back));
  RETURN_IF_ERROR(combine_a.wait(&recv));
  RETURN_IF_ERROR(x.take(recv, kFirst));
  RETURN_IF_ERROR(combine_b.wait(&recv));
  return x.take(recv, kSecond);
}

}  // namespace

Status exchange_experts(Collective& group, const float* h, int64_t hidden, int64_t n, int K,
                        const std::vector<ExpertPair>& pairs, const ExpertCompute& compute,
                        const ExchangeSchedule& schedule, float* contrib) {
  Status st = check_pairs(pairs, n, K, group.size());
  Exchange x(group, h, hidden, n, K, pairs, compute, contrib);
  if (st.ok())
    st = schedule.two_batch ? run_two_batch(x, group, pairs.size(), schedule)
                            : run_serial(x, group, pairs.size(), schedule);
  if (st.ok()) st = x.check_complete();
  // The others would wait on this rank's part of the exchanges (some may still be in flight).
  if (!st.ok()) group.abort(st.message());
  return st;
}

}  // namespace deepinfer::cpu
