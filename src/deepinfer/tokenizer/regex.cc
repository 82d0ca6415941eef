#include "deepinfer/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace deepinfer::tokenizer {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match scratch, so matching allocates nothing after warm-up and needs no lock.
struct Scratch {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mc = nullptr;
  pcre2_jit_stack* js = nullptr;
  Scratch() {
    md = pcre2_match_data_create(16, nullptr);
    mc = pcre2_match_context_create(nullptr);
    // Long whitespace runs with lookahead recurse deeply; 64 MiB covers multi-megabyte pieces.
    js = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(mc, nullptr, js);
  }
  ~Scratch() {
    pcre2_jit_stack_free(js);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
  }
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<Regex>> Regex::compile(std::string_view pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (!code) {
    return invalid_argument("regex '" + std::string(pattern) + "' does not compile at offset " +
                            std::to_string(off) + ": " + pcre2_message(err));
  }
  // JIT is an optimisation; the interpreter gives the same matches if it is unavailable.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::unique_ptr<Regex> r(new Regex());
  r->pattern_ = std::string(pattern);
  r->code_ = code;
  return r;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status Regex::find_all(std::string_view subject,
                       std::vector<std::pair<size_t, size_t>>* out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  Scratch& s = scratch();
  auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    int rc = pcre2_match(code, subj, subject.size(), pos, 0, s.md, s.mc);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return resource_exhausted("regex '" + pattern_ + "': " + pcre2_message(rc));
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      out->emplace_back(b, e);
      pos = e;
    } else {
      // Empty match: step over one whole character so we never split a UTF-8 sequence.
      pos = e + 1;
      while (pos < subject.size() && (static_cast<unsigned char>(subject[pos]) & 0xC0) == 0x80)
        ++pos;
    }
  }
  return ok_status();
}

}  // namespace deepinfer::tokenizer
