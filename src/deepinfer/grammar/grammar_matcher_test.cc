// Token-level matcher with the real DeepSeek tokenizer and with a tiny hand-made vocabulary.
#include "deepinfer/grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/grammar/ebnf_parser.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/grammar/regex_parser.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

constexpr int32_t kEos = 1;  // <｜end▁of▁sentence｜>

const tokenizer::Tokenizer& tok() {
  static auto t = tokenizer::Tokenizer::from_file(std::string(DEEPINFER_SOURCE_DIR) +
                                                  "/assets/tokenizers/deepseek_v3");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return **t;
}

std::shared_ptr<const TokenizerInfo> info() {
  static auto i = TokenizerInfo::from_tokenizer(tok(), {kEos});
  EXPECT_TRUE(i.ok()) << i.status().to_string();
  return *i;
}

bool allowed(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[id / 32] >> (id % 32)) & 1;
}

std::shared_ptr<const CompiledGrammar> regex(const std::string& p) {
  auto g = parse_regex(p);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

std::shared_ptr<const CompiledGrammar> ebnf(const std::string& t) {
  auto g = parse_ebnf(t);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

std::shared_ptr<const CompiledGrammar> schema(const std::string& text) {
  auto g = compile_json_schema_text(text, {});
  EXPECT_TRUE(g.ok()) << text << ": " << g.status().to_string();
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

bool pcre_full_match(const std::string& pattern, const std::string& s) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &off, nullptr);
  EXPECT_NE(code, nullptr);
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data, nullptr);
  pcre2_match_data_free(data);
  pcre2_code_free(code);
  return rc >= 0;
}

// Some extension of s fully matches. PCRE2 rejects a subject that ends inside a UTF-8
// sequence, so an incomplete final sequence is cut off first (a weaker, still sound check).
bool pcre_viable_prefix(const std::string& pattern, std::string s) {
  size_t lead = s.size();
  while (lead > 0 && lead + 4 > s.size() && (static_cast<unsigned char>(s[lead - 1]) >> 6) == 2) {
    --lead;
  }
  if (lead > 0) {
    unsigned char b = s[lead - 1];
    size_t need = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
    if (s.size() - (lead - 1) < need) s.resize(lead - 1);
  }
  if (s.empty() || pcre_full_match(pattern, s)) return true;
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_ANCHORED, &err, &off, nullptr);
  EXPECT_NE(code, nullptr);
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                       PCRE2_PARTIAL_HARD, data, nullptr);
  pcre2_match_data_free(data);
  pcre2_code_free(code);
  return rc == PCRE2_ERROR_PARTIAL;
}

// Tiny vocabulary: the mask must equal trying every token on its own, including tokens that
// split a UTF-8 sequence and tokens that are prefixes of one another.
TEST(GrammarMatcher, MaskEqualsBruteForceOnTinyVocab) {
  std::vector<std::string> vocab = {"<eos>",
                                    "a",
                                    "ab",
                                    "abc",
                                    "b",
                                    "\xC3",
                                    "\xA9",
                                    "\xC3\xA9",
                                    "c",
                                    "ca",
                                    "\xC3\xA9"
                                    "b",
                                    "",
                                    "<sp>"};
  std::vector<bool> usable(vocab.size(), true);
  usable.back() = false;  // a special token: never produced by a grammar
  auto ti = TokenizerInfo::from_vocab(vocab, usable, {0});
  ASSERT_TRUE(ti.ok());
  auto g = ebnf("root ::= (\"a\" | \"b\" | \"\\u00e9\")* \"c\"");
  GrammarMatcher m(g, *ti);
  std::vector<uint32_t> mask((*ti)->mask_words());
  std::mt19937 rng(3);
  for (int step = 0; step < 30 && !m.is_terminated(); ++step) {
    m.fill_next_token_bitmask(mask.data());
    std::vector<int32_t> allowed_ids;
    for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
      bool ok = m.accept_token(id);
      if (ok) m.rollback(1);
      EXPECT_EQ(allowed(mask, id), ok) << "step " << step << " token " << id;
      if (ok) allowed_ids.push_back(id);
    }
    ASSERT_FALSE(allowed_ids.empty());
    int32_t pick =
        allowed_ids[std::uniform_int_distribution<size_t>(0, allowed_ids.size() - 1)(rng)];
    ASSERT_TRUE(m.accept_token(pick));
  }
  EXPECT_FALSE(allowed(mask, 11));  // empty token
  EXPECT_FALSE(allowed(mask, 12));  // special token
}

TEST(GrammarMatcher, StopTokenAndRollback) {
  auto ti = TokenizerInfo::from_vocab({"<eos>", "x", "y"}, {false, true, true}, {0});
  ASSERT_TRUE(ti.ok());
  GrammarMatcher m(ebnf("root ::= \"x\"+ \"y\"?"), *ti);
  EXPECT_FALSE(m.accept_token(0));  // nothing accepted yet: cannot stop
  EXPECT_FALSE(m.accept_token(2));
  ASSERT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.can_terminate());
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token(1));
  std::vector<uint32_t> mask(1);
  m.fill_next_token_bitmask(mask.data());
  EXPECT_EQ(mask[0], 0u);
  m.rollback(1);
  EXPECT_FALSE(m.is_terminated());
  ASSERT_TRUE(m.accept_token(2));
  EXPECT_TRUE(m.is_terminated());  // complete, and nothing can follow "y"
  m.fill_next_token_bitmask(mask.data());
  EXPECT_EQ(mask[0], 1u);  // only the stop token
  m.rollback(2);
  EXPECT_EQ(m.num_tokens(), 0u);
  EXPECT_FALSE(m.can_terminate());
  EXPECT_FALSE(TokenizerInfo::from_vocab({"a"}, {true}, {5}).ok());
}

struct TokenCase {
  bool is_regex;
  std::string grammar;
  std::vector<std::string> valid;
};

const char* kJsonGrammar = R"re(root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n\r]*
)re";

std::vector<TokenCase> token_cases() {
  return {
      {true, R"([0-9]{1,4}(\.[0-9]+)?)", {"3.14159", "2024"}},
      {true,
       R"(\{"name": "[A-Za-z ]{1,12}", "age": \d{1,3}\})",
       {"{\"name\": \"Ada Lovelace\", \"age\": 36}"}},
      {true, R"((yes|no|maybe) \x{1F600}?)", {"maybe \xF0\x9F\x98\x80", "no "}},
      {false,
       "root ::= \"[\" (item (\", \" item)*)? \"]\"\nitem ::= [0-9]+ | root",
       {"[1, [22, 333], []]"}},
      {false,
       "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\n"
       "term ::= [0-9]+ | \"(\" expr \")\"",
       {"(12+3)-(4)"}},
      {false, "root ::= \"\\u4e2d\" [\\u4e00-\\u9fff]{1,3} \"!\"", {"\xE4\xB8\xAD\xE6\x96\x87!"}},
  };
}

// Each valid string's real tokenization is accepted token by token, every token was in the
// mask beforehand, and the stop token is allowed exactly at the end.
TEST(GrammarMatcher, RealTokenizerAcceptsValidTokenizations) {
  auto ti = info();
  std::vector<uint32_t> mask(ti->mask_words());
  for (const TokenCase& c : token_cases()) {
    auto g = c.is_regex ? regex(c.grammar) : ebnf(c.grammar);
    for (const std::string& s : c.valid) {
      auto ids = tok().encode(s, /*parse_special=*/false);
      ASSERT_TRUE(ids.ok());
      GrammarMatcher m(g, ti);
      for (int32_t id : *ids) {
        m.fill_next_token_bitmask(mask.data());
        EXPECT_EQ(allowed(mask, kEos), m.can_terminate()) << c.grammar;
        ASSERT_TRUE(allowed(mask, id)) << c.grammar << " / " << s << " token " << id;
        ASSERT_TRUE(m.accept_token(id)) << c.grammar << " / " << s << " token " << id;
      }
      m.fill_next_token_bitmask(mask.data());
      EXPECT_TRUE(allowed(mask, kEos)) << c.grammar << " / " << s;
      ASSERT_TRUE(m.accept_token(kEos));
      EXPECT_TRUE(m.is_terminated());
      // Rolling everything back gives the initial state again.
      m.rollback(m.num_tokens());
      ASSERT_TRUE(m.accept_token((*ids)[0]));
    }
  }
}

// The trie walk must give exactly what trying each token on its own gives.
TEST(GrammarMatcher, RealTokenizerAcceptsJson) {
  auto ti = info();
  std::vector<uint32_t> mask(ti->mask_words());
  auto g = ebnf(kJsonGrammar);
  // Short on purpose: a mask inside a string admits nearly the whole vocabulary, and this test
  // also runs under ASan.
  const std::string doc = "{\"n\": [0, -1.5e3, true, null]}";
  auto ids = tok().encode(doc, false);
  ASSERT_TRUE(ids.ok());
  GrammarMatcher m(g, ti);
  for (int32_t id : *ids) {
    m.fill_next_token_bitmask(mask.data());
    ASSERT_TRUE(allowed(mask, id)) << "token " << id << " '" << ti->token_bytes(id) << "'";
    ASSERT_TRUE(m.accept_token(id));
  }
  EXPECT_TRUE(m.can_terminate());
  EXPECT_TRUE(m.is_terminated());  // nothing may follow the closing brace
}

TEST(GrammarMatcher, RealTokenizerMaskEqualsBruteForce) {
  auto ti = info();
  std::vector<uint32_t> mask(ti->mask_words());
  GrammarMatcher m(regex(R"(\{"name": "[A-Za-z ]{1,12}", "age": \d{1,3}\})"), ti);
  // Inside the name many tokens fit: the walk over the sorted vocabulary is really exercised.
  auto prefix = tok().encode("{\"name\": \"Ad", false);
  ASSERT_TRUE(prefix.ok());
  for (int32_t id : *prefix) ASSERT_TRUE(m.accept_token(id));
  m.fill_next_token_bitmask(mask.data());
  int n_allowed = 0;
  for (int32_t id = 0; id < ti->vocab_size(); ++id) {
    bool ok = m.accept_token(id);
    if (ok) m.rollback(1);
    ASSERT_EQ(allowed(mask, id), ok) << "token " << id;
    n_allowed += ok;
  }
  EXPECT_GT(n_allowed, 1000);
}

// Leo's shortcut must not change what the recognizer accepts: random byte walks (choosing among
// allowed bytes, sometimes rolling back) see the same allowed bytes and the same verdicts with
// and without it.
TEST(GrammarMatcher, LeoMatchesPlainEarley) {
  const char* grammars[] = {
      kJsonGrammar,
      "root ::= \"<\" [a-z]{0,12} \">\" [0-9]{2,5}",
      "root ::= item*\nitem ::= \"(\" root \")\" | [a-c]",
      "root ::= a\na ::= \"x\" a | \"y\" b | \"\"\nb ::= a | \"z\"",
      "root ::= ([a-z] | \"-\" root){0,6} \".\"",
  };
  std::mt19937_64 rng(5);
  for (const char* text : grammars) {
    auto g = ebnf(text);
    EarleyMatcher leo(g, true), plain(g, false);
    for (int step = 0; step < 400; ++step) {
      ASSERT_EQ(leo.allowed_bytes(), plain.allowed_bytes()) << text << " step " << step;
      ASSERT_EQ(leo.can_terminate(), plain.can_terminate()) << text << " step " << step;
      ByteSet allowed = plain.allowed_bytes();
      if (!allowed.any() || (leo.num_bytes() > 0 && rng() % 8 == 0)) {
        size_t n = 1 + rng() % std::max<size_t>(1, leo.num_bytes());
        n = std::min(n, leo.num_bytes());
        leo.rollback_bytes(n);
        plain.rollback_bytes(n);
        continue;
      }
      std::vector<int> bytes;
      for (int b = 0; b < 256; ++b) {
        if (allowed.test(b)) bytes.push_back(b);
      }
      const uint8_t b = static_cast<uint8_t>(bytes[rng() % bytes.size()]);
      ASSERT_TRUE(leo.accept_byte(b));
      ASSERT_TRUE(plain.accept_byte(b));
    }
  }
}

// Walks `walks` random token paths of at most `steps` tokens, each after the tokens of
// `prefix` (one cache shared across them on purpose, optionally with random rollbacks, which
// invalidate DFA paths) and checks every mask on the way against trying every token of the
// real vocabulary on its own.
void check_masks_on_random_walks(const std::shared_ptr<const CompiledGrammar>& g,
                                 const std::shared_ptr<MaskCache>& cache, int walks, int steps,
                                 bool rollbacks, std::mt19937_64& rng, int* states,
                                 const std::string& prefix = "") {
  auto ti = info();
  std::vector<uint32_t> mask(ti->mask_words());
  auto prefix_ids = tok().encode(prefix, false);
  ASSERT_TRUE(prefix_ids.ok());
  for (int walk = 0; walk < walks; ++walk) {
    GrammarMatcher m(g, ti, cache);
    for (int32_t id : *prefix_ids) ASSERT_TRUE(m.accept_token(id)) << prefix;
    for (int step = 0; step < steps && !m.is_terminated(); ++step) {
      m.fill_next_token_bitmask(mask.data());
      std::vector<int32_t> ids;
      for (int32_t id = 0; id < ti->vocab_size(); ++id) {
        bool ok = m.accept_token(id);
        if (ok) m.rollback(1);
        ASSERT_EQ(allowed(mask, id), ok)
            << g->grammar().to_string() << " step " << step << " token " << id;
        if (ok) ids.push_back(id);
      }
      ++*states;
      ASSERT_FALSE(ids.empty());
      ASSERT_TRUE(m.accept_token(ids[rng() % ids.size()]));
      if (rollbacks && m.num_tokens() >= 2 && rng() % 3 == 0) m.rollback(1 + rng() % 2);
    }
  }
}

// Masks come from the cache, the lazy DFA and the trie walk; on random states they must equal
// trying every token of the real vocabulary on its own.
TEST(GrammarMatcher, RealTokenizerMaskEqualsBruteForceOnRandomStates) {
  auto ti = info();
  std::mt19937_64 rng(11);
  const char* grammars[] = {
      kJsonGrammar,
      "root ::= \"{\\\"k\\\": \\\"\" [a-z\\u00e0-\\u00ff]{0,6} \"\\\"}\"",
  };
  int states = 0;
  for (const char* text : grammars) {
    auto cache = std::make_shared<MaskCache>(ti->mask_words(), 1 << 20);
    check_masks_on_random_walks(ebnf(text), cache, 2, 10, /*rollbacks=*/true, rng, &states);
  }
  EXPECT_GE(states, 20);
}

// The text fast path (tokens taken as accepted from bitsets without a walk) must give the
// same masks as trying every token: JSON strings with and without maxLength (a chain of
// counting states), free text with Unicode, a bounded run of a narrow class, an EBNF text rule.
TEST(GrammarMatcher, TextFastPathMaskEqualsBruteForce) {
  auto ti = info();
  std::mt19937_64 rng(17);
  std::vector<std::pair<std::shared_ptr<const CompiledGrammar>, std::string>> grammars;
  auto schema = compile_json_schema_text(
      R"({"type":"object","properties":{"s":{"type":"string","maxLength":12},)"
      R"("t":{"type":"string"}},"required":["s","t"]})",
      {});
  ASSERT_TRUE(schema.ok()) << schema.status().to_string();
  // The schema walk starts inside the bounded string, so its masks are counting states.
  grammars.emplace_back(std::make_shared<CompiledGrammar>(std::move(*schema)), "{\"s\": \"ab");
  grammars.emplace_back(regex(R"([^\n]{0,40}\n)"), "");
  grammars.emplace_back(regex(R"(x[a-z ]{3,70}!)"), "");
  grammars.emplace_back(ebnf("root ::= \"<b>\" text \"</b>\"\ntext ::= [^<>]*"), "");
  int states = 0;
  for (const auto& [g, prefix] : grammars) {
    auto cache = std::make_shared<MaskCache>(ti->mask_words(), 1 << 20);
    // One walk of 6 states each: a brute-force state costs about 1 s under ASan.
    check_masks_on_random_walks(g, cache, 1, 6, /*rollbacks=*/false, rng, &states, prefix);
    EXPECT_GT(cache->fast_walks, 0) << g->grammar().to_string();
  }
  EXPECT_GE(states, 20);
}

// Near the end of a counted string the chain of counting states ends in a state where no
// text character is alive: the walk then skips the text tokens longer than the room left
// instead of stepping each through the chain. Where the chain ends in a state that still takes
// some of its characters ([a-z]{3} then [a-m]*), those longer tokens must still be walked.
TEST(GrammarMatcher, TextFastPathSkipsLongerTokensOnlyAtADeadEnd) {
  auto ti = info();
  std::mt19937_64 rng(29);
  auto bounded = schema(R"({"type":"string","maxLength":5})");
  int states = 0;
  {
    auto cache = std::make_shared<MaskCache>(ti->mask_words(), 1 << 20);
    for (const char* prefix : {"\"", "\"ab", "\"abcd"})
      check_masks_on_random_walks(bounded, cache, 1, 1, /*rollbacks=*/false, rng, &states, prefix);
    EXPECT_GT(cache->dead_end_walks, 0);
  }
  {
    auto cache = std::make_shared<MaskCache>(ti->mask_words(), 1 << 20);
    check_masks_on_random_walks(regex(R"([^\n]{0,6}\n)"), cache, 1, 1, false, rng, &states);
    EXPECT_GT(cache->dead_end_walks, 0);
  }
  {
    auto cache = std::make_shared<MaskCache>(ti->mask_words(), 1 << 20);
    check_masks_on_random_walks(regex("[a-z]{3}[a-m]*!"), cache, 1, 1, false, rng, &states);
    EXPECT_GT(cache->fast_walks, 0);
    EXPECT_EQ(cache->dead_end_walks, 0);
  }
  EXPECT_EQ(states, 5);
}

// Where the chain's states stop taking multi-byte characters but still take every ASCII run
// byte (three of any character, then up to ten ASCII ones), the fast path keeps accepting ASCII
// tokens past that point and walks the others (a token with a non-ASCII fourth character is
// rejected; one with a non-ASCII second character is accepted).
TEST(GrammarMatcher, TextFastPathKeepsAsciiTokensPastItsUnicodePart) {
  auto ti = info();
  std::mt19937_64 rng(37);
  auto g = regex(R"([^\n]{3}[\x00-\x09\x0b-\x7f]{0,10})");
  auto cache = std::make_shared<MaskCache>(ti->mask_words(), 1 << 20);
  int states = 0;
  check_masks_on_random_walks(g, cache, 1, 1, /*rollbacks=*/false, rng, &states);
  EXPECT_EQ(states, 1);
  EXPECT_GT(cache->fast_walks, 0);
  EXPECT_GT(cache->dead_end_walks, 0);  // ASCII tokens over 13 characters are decided too
  GrammarMatcher m(g, ti, cache);
  std::vector<uint32_t> mask(ti->mask_words());
  ASSERT_TRUE(m.fill_next_token_bitmask(mask.data()));
  int ascii_past = 0, unicode_within = 0, unicode_past = 0;
  for (int32_t id = 0; id < ti->vocab_size(); ++id) {
    const std::string& t = ti->token_bytes(id);
    if (t.size() < 4 || t.find('\n') != std::string::npos) continue;
    const bool ascii = std::all_of(t.begin(), t.end(), [](char c) { return c > 0; });
    if (ascii && t.size() <= 13) ascii_past += allowed(mask, id);
    if (!ascii && t.size() == 4 && static_cast<uint8_t>(t[0]) < 0x80 &&
        static_cast<uint8_t>(t[1]) >= 0xC2 && static_cast<uint8_t>(t[1]) < 0xE0)
      unicode_within += allowed(mask, id);  // e.g. " é": 2 characters
    if (!ascii && t.size() >= 5 && t[0] > 0 && t[1] > 0 && t[2] > 0 && t[3] < 0)
      unicode_past += allowed(mask, id);  // a non-ASCII fourth character
  }
  EXPECT_GT(ascii_past, 1000);
  EXPECT_GT(unicode_within, 10);
  EXPECT_EQ(unicode_past, 0);
}

// Strict UTF-8 (Unicode Table 3-7), written out here apart from the matcher's own table.
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
    const uint8_t c = b(0);
    size_t n = c < 0x80                 ? 1
               : c >= 0xC2 && c <= 0xDF ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if (b(k) < 0x80 || b(k) > 0xBF) return false;
    if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F) || (c == 0xF0 && b(1) < 0x90) ||
        (c == 0xF4 && b(1) > 0x8F))
      return false;
    i += n;
  }
  return true;
}

// A token of `complete` plain JSON-string characters (no '"', '\\' or control) followed by the
// start of a multi-byte character that some continuation bytes complete; -1 for other tokens.
int chars_before_a_cut(const std::string& t) {
  for (size_t cut = 1; cut <= 3 && cut < t.size() + 1; ++cut) {
    const std::string head = t.substr(0, t.size() - cut), tail = t.substr(t.size() - cut);
    if (!valid_utf8(head) || valid_utf8(tail)) continue;
    bool completes = false;
    for (uint8_t x : {0x80, 0x8F, 0x90, 0xA0, 0xBF})
      for (size_t more = 1; more + cut <= 4 && !completes; ++more)
        completes = valid_utf8(tail + std::string(more, static_cast<char>(x)));
    if (!completes) continue;
    int chars = 0;
    for (unsigned char c : head) {
      if (c == '"' || c == '\\' || c < 0x20) return -1;
      chars += (c & 0xC0) != 0x80;
    }
    return chars;
  }
  return -1;
}

// Byte-level tokens that end in the middle of a character are decided by the fast path too:
// such a token is viable exactly where its whole last character could follow, so inside a
// maxLength string it counts as its complete characters plus one. With one character of room a
// bare character start is allowed and one after another character is not; with three, two
// characters and a start are allowed and three and a start are not. Every mask also equals
// trying each token, and the walk steps none of the cut tokens: it visits at most the other
// tokens that start with a byte a string can start with (those neither plain text nor cut, and
// text past the fast path's length limit), plus one per dead first byte, which skips the rest.
TEST(GrammarMatcher, TextFastPathDecidesTokensCutMidCharacter) {
  auto ti = info();
  auto g = schema(R"({"type":"string","maxLength":3})");
  auto cache = std::make_shared<MaskCache>(ti->mask_words(), 1 << 20);
  std::mt19937_64 rng(41);
  int states = 0;
  for (const char* prefix : {"\"", "\"ab"})
    check_masks_on_random_walks(g, cache, 1, 1, /*rollbacks=*/false, rng, &states, prefix);
  EXPECT_EQ(states, 2);
  EXPECT_GT(cache->fast_walks, 0);
  for (auto [prefix, room] : {std::pair{"\"", 3}, std::pair{"\"ab", 1}}) {
    GrammarMatcher m(g, ti, cache);
    auto ids = tok().encode(prefix, false);
    ASSERT_TRUE(ids.ok());
    for (int32_t id : *ids) ASSERT_TRUE(m.accept_token(id));
    std::vector<uint32_t> mask(ti->mask_words());
    auto fresh = std::make_shared<MaskCache>(ti->mask_words(), 1 << 20);
    GrammarMatcher cold(g, ti, fresh);
    for (int32_t id : *ids) ASSERT_TRUE(cold.accept_token(id));
    ASSERT_TRUE(cold.fill_next_token_bitmask(mask.data()));
    int64_t not_text = 0;
    for (int32_t id = 0; id < ti->vocab_size(); ++id) {
      const std::string& t = ti->token_bytes(id);
      int64_t chars = 0;
      bool plain = valid_utf8(t) && !t.empty();
      for (unsigned char c : t) {
        plain = plain && c != '"' && c != '\\' && c >= 0x20;
        chars += (c & 0xC0) != 0x80;
      }
      const auto c0 = static_cast<uint8_t>(t.empty() ? 0 : t[0]);
      const bool viable_start = c0 >= 0x20 && (c0 < 0x80 || (c0 >= 0xC2 && c0 <= 0xF4));
      if (viable_start && (!plain || chars > TextTokens::kMaxChars) && chars_before_a_cut(t) < 0)
        ++not_text;
    }
    EXPECT_GT(fresh->walked_tokens, 0) << prefix;
    EXPECT_LE(fresh->walked_tokens, not_text + 256) << prefix;
    ASSERT_TRUE(m.fill_next_token_bitmask(mask.data()));
    int within = 0, past = 0, within_allowed = 0, past_allowed = 0;
    for (int32_t id = 0; id < ti->vocab_size(); ++id) {
      const int chars = chars_before_a_cut(ti->token_bytes(id));
      if (chars < 0 || chars > room) continue;
      if (chars + 1 <= room) {
        ++within;
        within_allowed += allowed(mask, id);
      } else {
        ++past;
        past_allowed += allowed(mask, id);
      }
    }
    EXPECT_GT(within, 100) << prefix;
    EXPECT_GT(past, 20) << prefix;
    EXPECT_EQ(within_allowed, within) << prefix;
    EXPECT_EQ(past_allowed, 0) << prefix;
  }
}

// Deep inside a long counted string every position is new to the Earley matcher, but the
// state keys treat positions with more than a token's length of room alike (lookahead_canon.cc),
// so one cached mask serves them all. Masks there, near the bounds (where they must differ:
// closing is allowed only from minLength on, nothing but the quote after maxLength) and in the
// pairwise lowering of a bound over 10000 must still equal trying every token.
TEST(GrammarMatcher, LongCountedStringsShareMasksExactly) {
  auto ti = info();
  std::mt19937_64 rng(23);
  struct Case {
    const char* schema;
    std::vector<std::string> prefixes;
  };
  const Case cases[] = {
      {R"({"type":"string","minLength":600,"maxLength":1400})",
       {"\"" + std::string(300, 'a'), "\"" + std::string(310, 'a'), "\"" + std::string(450, 'b'),
        "\"" + std::string(599, 'b'), "\"" + std::string(900, 'c'), "\"" + std::string(1300, 'd'),
        "\"" + std::string(1399, 'd')}},
      {R"({"type":"string","maxLength":20000})",
       {"\"" + std::string(3000, 'e'), "\"" + std::string(19800, 'f')}},
  };
  int states = 0;
  for (const Case& c : cases) {
    auto g = schema(c.schema);
    auto cache = std::make_shared<MaskCache>(ti->mask_words(), 8 << 20);
    for (const std::string& prefix : c.prefixes)
      check_masks_on_random_walks(g, cache, 1, 2, /*rollbacks=*/false, rng, &states, prefix);
  }
  EXPECT_GE(states, 18);
}

// The key of a state deep in a long run names its canonical position: the 300th and the 310th
// character of a 600-character minimum give equal masks from one cache entry.
TEST(GrammarMatcher, DeepCountedPositionsShareOneCachedMask) {
  auto ti = info();
  auto g = schema(R"({"type":"string","minLength":600})");
  auto cache = std::make_shared<MaskCache>(ti->mask_words(), 8 << 20);
  std::vector<uint32_t> first(ti->mask_words()), second(ti->mask_words());
  for (int n : {300, 310}) {
    GrammarMatcher m(g, ti, cache);
    auto ids = tok().encode("\"" + std::string(n, 'a'), false);
    ASSERT_TRUE(ids.ok());
    for (int32_t id : *ids) ASSERT_TRUE(m.accept_token(id));
    ASSERT_TRUE(m.fill_next_token_bitmask(n == 300 ? first.data() : second.data()));
  }
  EXPECT_EQ(first, second);
  EXPECT_EQ(cache->hits, 1);
  // A quote there would end a string of 300 characters: not allowed.
  auto quote = tok().token_to_id("\"");
  ASSERT_TRUE(quote.has_value());
  EXPECT_FALSE(allowed(first, *quote));
}

// Compiled for the tokenizer's own longest token (128 bytes for DeepSeek's, against the
// default 255), a counted string's positions share a key from that much room on: the 100th
// and the 150th character of a 300-character maximum hit one cache entry, where the default
// keys tell them apart. Masks on both sides of the threshold still equal trying every token.
TEST(GrammarMatcher, TokenizerLookaheadSharesMoreCountedPositionsExactly) {
  auto ti = info();
  ASSERT_LT(ti->max_token_bytes(), CompiledGrammar::kMaxLookahead);
  auto compile = [&](uint32_t lookahead) {
    auto schema = compile_json_schema_text(R"({"type":"string","maxLength":300})", {});
    EXPECT_TRUE(schema.ok()) << schema.status().to_string();
    return std::make_shared<const CompiledGrammar>(std::move(*schema), lookahead);
  };
  auto own = compile(ti->max_token_bytes());
  auto hits_between = [&](const std::shared_ptr<const CompiledGrammar>& g) {
    auto cache = std::make_shared<MaskCache>(ti->mask_words(), 8 << 20);
    std::vector<uint32_t> mask(ti->mask_words());
    for (int n : {100, 150}) {
      GrammarMatcher m(g, ti, cache);
      auto ids = tok().encode("\"" + std::string(n, 'a'), false);
      EXPECT_TRUE(ids.ok());
      for (int32_t id : *ids) EXPECT_TRUE(m.accept_token(id));
      EXPECT_TRUE(m.fill_next_token_bitmask(mask.data()));
    }
    return cache->hits;
  };
  EXPECT_EQ(hits_between(own), 1);
  EXPECT_EQ(hits_between(compile(CompiledGrammar::kMaxLookahead)), 0);
  std::mt19937_64 rng(31);
  auto cache = std::make_shared<MaskCache>(ti->mask_words(), 8 << 20);
  int states = 0;
  const int room = static_cast<int>(ti->max_token_bytes());
  for (int left : {room + 40, room + 2, room + 1, room, room - 1, 3})
    check_masks_on_random_walks(own, cache, 1, 1, /*rollbacks=*/false, rng, &states,
                                "\"" + std::string(300 - left, 'b'));
  EXPECT_EQ(states, 6);
}

// Uniform random walks over allowed tokens; finished outputs must satisfy an independent
// checker (PCRE2 for regexes, hand-written recognizers for the EBNF grammars).
bool nested_list(const std::string& s, size_t* i) {
  if (*i >= s.size() || s[*i] != '[') return false;
  ++*i;
  if (*i < s.size() && s[*i] == ']') return ++*i, true;
  while (true) {
    if (*i < s.size() && s[*i] == '[') {
      if (!nested_list(s, i)) return false;
    } else {
      size_t start = *i;
      while (*i < s.size() && isdigit(static_cast<unsigned char>(s[*i]))) ++*i;
      if (*i == start) return false;
    }
    if (s.compare(*i, 2, ", ") == 0) {
      *i += 2;
      continue;
    }
    if (*i < s.size() && s[*i] == ']') return ++*i, true;
    return false;
  }
}

// expr := term (("+"|"-") term)*, term := digits | "(" expr ")"
bool arith_expr(const std::string& s, size_t* i);
bool arith_term(const std::string& s, size_t* i) {
  if (*i < s.size() && s[*i] == '(') {
    ++*i;
    if (!arith_expr(s, i) || *i >= s.size() || s[*i] != ')') return false;
    ++*i;
    return true;
  }
  size_t start = *i;
  while (*i < s.size() && isdigit(static_cast<unsigned char>(s[*i]))) ++*i;
  return *i > start;
}
bool arith_expr(const std::string& s, size_t* i) {
  if (!arith_term(s, i)) return false;
  while (*i < s.size() && (s[*i] == '+' || s[*i] == '-')) {
    ++*i;
    if (!arith_term(s, i)) return false;
  }
  return true;
}

bool han_exclamation(const std::string& s) {
  // "中" then 1..3 code points in U+4E00..U+9FFF (all 3-byte, lead E4..E9) then "!".
  if (s.rfind("\xE4\xB8\xAD", 0) != 0 || s.empty() || s.back() != '!') return false;
  std::string mid = s.substr(3, s.size() - 4);
  if (mid.size() % 3 != 0 || mid.empty() || mid.size() > 9) return false;
  for (size_t i = 0; i < mid.size(); i += 3) {
    unsigned char a = mid[i], b = mid[i + 1], c = mid[i + 2];
    uint32_t cp = ((a & 0x0F) << 12) | ((b & 0x3F) << 6) | (c & 0x3F);
    if ((a >> 4) != 0xE || (b >> 6) != 2 || (c >> 6) != 2 || cp < 0x4E00 || cp > 0x9FFF) {
      return false;
    }
  }
  return true;
}

TEST(GrammarMatcher, RandomWalksAreValid) {
  auto ti = info();
  std::vector<uint32_t> mask(ti->mask_words());
  std::mt19937_64 rng(42);
  int finished = 0;
  auto cases = token_cases();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const TokenCase& c = cases[ci];
    auto g = c.is_regex ? regex(c.grammar) : ebnf(c.grammar);
    for (int walk = 0; walk < 3; ++walk) {
      GrammarMatcher m(g, ti);
      std::string out;
      for (int step = 0; step < 8 && !m.is_terminated(); ++step) {
        m.fill_next_token_bitmask(mask.data());
        std::vector<int32_t> ids;
        for (int32_t id = 0; id < ti->vocab_size(); ++id) {
          if (allowed(mask, id)) ids.push_back(id);
        }
        ASSERT_FALSE(ids.empty()) << c.grammar << " after '" << out << "'";
        int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        ASSERT_TRUE(m.accept_token(id));
        if (id != kEos) out += ti->token_bytes(id);
        // Every step keeps the output completable, independently of our matcher.
        if (c.is_regex) {
          EXPECT_TRUE(pcre_viable_prefix(c.grammar, out)) << c.grammar << ": '" << out << "'";
        }
      }
      if (!m.can_terminate() && !m.is_terminated()) continue;
      ++finished;
      if (c.is_regex) {
        EXPECT_TRUE(pcre_full_match(c.grammar, out)) << c.grammar << " produced '" << out << "'";
      } else if (ci == 3) {
        size_t i = 0;
        EXPECT_TRUE(nested_list(out, &i) && i == out.size()) << "produced '" << out << "'";
      } else if (ci == 4) {
        size_t i = 0;
        EXPECT_TRUE(arith_expr(out, &i) && i == out.size()) << "produced '" << out << "'";
      } else {
        EXPECT_TRUE(han_exclamation(out)) << "produced '" << out << "'";
      }
    }
  }
  EXPECT_GE(finished, 3);
  std::printf("%d of %zu walks finished\n", finished, 3 * cases.size());
}

}  // namespace
}  // namespace deepinfer::grammar
