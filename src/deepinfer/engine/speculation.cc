#include "deepinfer/engine/speculation.h"

#include <algorithm>
#include <vector>

namespace deepinfer {

void propose_drafts(Drafter& drafter, int64_t max_drafts,
                    const std::unordered_map<uint64_t, SeqState*>& seqs, sched::Scheduler& sched) {
  std::vector<DraftRequest> requests;
  std::vector<SeqState*> asked;
  for (const auto& [id, s] : seqs) {
    s->spec_row.clear();
    if (s->finished || s->out.token_ids.empty()) {  // its prompt is still running
      sched.set_draft(id, 0);
      continue;
    }
    requests.push_back({id, s->tokens, static_cast<int64_t>(s->req->prompt.size()), max_drafts});
    asked.push_back(s);
  }
  std::vector<std::vector<int32_t>> all;
  drafter.propose_all(requests, &all);
  for (size_t i = 0; i < asked.size(); ++i) {
    SeqState* s = asked[i];
    const uint64_t id = requests[i].seq_id;
    std::vector<int32_t>& drafts = all[i];
    drafts.resize(std::min<size_t>(drafts.size(), size_t(max_drafts)));
    if (!drafts.empty()) {
      s->spec_row.push_back(s->tokens.back());
      s->spec_row.insert(s->spec_row.end(), drafts.begin(), drafts.end());
    }
    sched.set_draft(id, static_cast<int64_t>(drafts.size()));  // 0 clears an older count
  }
}

}  // namespace deepinfer
