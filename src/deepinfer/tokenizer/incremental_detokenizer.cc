#include "deepinfer/tokenizer/incremental_detokenizer.h"

#include "deepinfer/tokenizer/utf8_lossy.h"

namespace deepinfer::tokenizer {

Status IncrementalDetokenizer::push(int32_t id, std::string* delta) {
  ASSIGN_OR_RETURN(std::string_view b, tok_.token_bytes(id));
  if (skip_special_ && tok_.is_special(id)) return ok_status();
  pending_.append(b);
  size_t used = utf8_lossy_append(pending_, false, delta);
  pending_.erase(0, used);
  return ok_status();
}

void IncrementalDetokenizer::finish(std::string* delta) {
  utf8_lossy_append(pending_, true, delta);
  pending_.clear();
}

}  // namespace deepinfer::tokenizer
