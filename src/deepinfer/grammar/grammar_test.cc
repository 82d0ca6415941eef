// Front ends and the byte-level matcher. Regex results are cross-checked against PCRE2.
#include <gtest/gtest.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/grammar/earley_matcher.h"
#include "deepinfer/grammar/ebnf_parser.h"
#include "deepinfer/grammar/regex_parser.h"

namespace deepinfer::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> compile_ebnf(const std::string& text) {
  auto g = parse_ebnf(text);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  if (!g.ok()) return nullptr;
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

std::shared_ptr<const CompiledGrammar> compile_regex(const std::string& pattern) {
  auto g = parse_regex(pattern);
  EXPECT_TRUE(g.ok()) << pattern << ": " << g.status().to_string();
  if (!g.ok()) return nullptr;
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

bool matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& s) {
  EarleyMatcher m(g);
  return m.accept_bytes(s) && m.can_terminate();
}

// Full match with PCRE2 (UTF mode, so `.` and classes work on code points as ours do).
class Pcre {
 public:
  // ucp: \d \w \s by Unicode properties (as Python's re reads them) instead of ASCII.
  explicit Pcre(const std::string& pattern, bool ucp = false) {
    int err = 0;
    PCRE2_SIZE off = 0;
    const uint32_t flags =
        PCRE2_UTF | PCRE2_ANCHORED | PCRE2_DOLLAR_ENDONLY | (ucp ? PCRE2_UCP : 0);
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          flags | PCRE2_ENDANCHORED, &err, &off, nullptr);
    EXPECT_NE(code_, nullptr) << pattern;
    // Partial matching wants no end anchor: PCRE2 reports a partial match only when it ran
    // into the end of the subject.
    prefix_code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 flags, &err, &off, nullptr);
    data_ = pcre2_match_data_create(4, nullptr);
  }
  ~Pcre() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
    pcre2_code_free(prefix_code_);
  }
  bool full_match(const std::string& s) const {
    int rc =
        pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data_, nullptr);
    return rc >= 0;
  }
  // Some extension of s matches (s may end inside a UTF-8 sequence).
  bool viable_prefix(const std::string& s) const {
    int rc = pcre2_match(prefix_code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                         PCRE2_PARTIAL_HARD, data_, nullptr);
    if (rc == PCRE2_ERROR_PARTIAL) return true;
    return full_match(s);
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_code* prefix_code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

// ---------------------------------------------------------------- EBNF

TEST(EbnfParse, Errors) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"", "empty grammar"},
      {"foo ::= \"a\"", "no rule named 'root'"},
      {"root ::= foo", "line 1:10: rule 'foo' is referenced but not defined"},
      {"root ::= \"abc", "line 1:10: unterminated string literal"},
      {"root ::= (\"a\" | \"b\"", "line 1:10: unclosed '('"},
      {"root \"a\"", "line 1:6: expected '::='"},
      {"root ::= [z-a]", "line 1:13: character range is out of order"},
      {"root ::= \"a\"\n\nroot ::= \"b\"", "line 3:1: rule 'root' is defined twice"},
      {"root ::= * \"a\"", "line 1:10: '*' has nothing to repeat"},
      {"root ::= \"a\")", "line 1:13: unbalanced ')'"},
      {"root ::= [abc", "line 1:10: unterminated character class"},
      {"root ::= \"\\q\"", "line 1:11: unknown escape '\\q'"},
      {"root ::= \"a\"{3,2}", "line 1:13: repetition {m,n} has n < m"},
      {"root ::= \"a\"{5000}", "repetition bound over 1000"},
      {"root ::= \"a\" @", "line 1:14: unexpected character '@'"},
  };
  for (const Case& c : cases) {
    auto g = parse_ebnf(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_NE(g.status().message().find(c.needle), std::string::npos)
        << c.text << " -> " << g.status().message();
  }
}

struct AcceptCase {
  std::string grammar;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

std::vector<AcceptCase> ebnf_cases() {
  return {
      {R"re(# arithmetic
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
)re",
       {"1", "12+3", "(1+2)*3", "((4))", "1*2/3-4+5"},
       {"", "+", "1+", "(1", "1)", "a", "1++2"}},
      {"root ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [a-z]+ | root",
       {"[]", "[a]", "[ab,c]", "[[],[x,[y]]]"},
       {"[", "[,]", "[a,]", "[a]]", "[A]"}},
      {R"re(root ::= "\"" ([^"\\] | "\\" ["\\nt])* "\"")re",
       {"\"\"", "\"abc\"", "\"a\\\"b\"", "\"\\n\\t\"", "\"h\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\""},
       {"\"", "\"\\x\"", "\"a\"b\"", "\"\xC3\"", "\"\xED\xA0\x80\""}},
      {"root ::= root \"a\" | \"b\"", {"b", "ba", "baaaa"}, {"", "a", "ab", "bab"}},
      {"root ::= a b\na ::= \"x\"?\nb ::= a a \"y\"",
       {"y", "xy", "xxy", "xxxy"},
       {"", "xxxxy", "x"}},
      {"root ::= [^\\x00-\\x7F]+", {"\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87"}, {"", "a", "\xC3"}},
      {"root ::= \"a\"{2,3} \"b\"{2,} \"c\"{0,1} \"d\"{2}",
       {"aabbdd", "aaabbbbcdd"},
       {"abbdd", "aaaabbdd", "aabdd", "aabbccdd", "aabbd"}},
      {"root ::= ( \"x\" |\n  \"y\" )  # trailing comment\n  \"z\"", {"xz", "yz"}, {"z", "xyz"}},
      {"root ::= [a-c-]+ [\\u00e9\\x41]", {"a-cA", "b\xC3\xA9"}, {"dA", "a"}},
      {"root ::= \"\" | \"q\"", {"", "q"}, {"qq"}},
      // JSON (RFC 8259), the shape a json_object front end will emit.
      {R"re(root ::= ws value ws
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex ) )* "\""
hex ::= [0-9a-fA-F]
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n\r]*
)re",
       {"{}", " [1, -2.5e3, \"a\\u00e9\\n\", true, null, {\"k\": [[]]}] ",
        "{\"a\":{\"b\":\"\xE2\x82\xAC\"}}", "0", "\"\""},
       {"{", "[1,]", "01", "{\"a\" 1}", "\"\x01\"", "tru", "[1 2]", "\"\\x\"", "1.e5"}},
  };
}

TEST(EbnfMatch, HandWrittenCases) {
  for (const AcceptCase& c : ebnf_cases()) {
    auto g = compile_ebnf(c.grammar);
    ASSERT_NE(g, nullptr) << c.grammar;
    for (const auto& s : c.valid) EXPECT_TRUE(matches(g, s)) << c.grammar << "\nvalid: " << s;
    for (const auto& s : c.invalid) {
      EXPECT_FALSE(matches(g, s)) << c.grammar << "\ninvalid: " << s;
    }
  }
}

// GrammarBuilder::literals left-factors a set of literals into a trie; its language must be
// exactly the set, and its viable prefixes exactly the set's prefixes. Random sets over "abc"
// (duplicates, the empty string, members that are prefixes of others) against every string of
// up to five bytes.
TEST(GrammarBuilder, LiteralsAreExactlyTheSetLeftFactored) {
  std::mt19937_64 rng(5);
  std::vector<std::string> all = {""};
  for (size_t i = 0; i < all.size() && all[i].size() < 5; ++i)
    for (char c : {'a', 'b', 'c'}) all.push_back(all[i] + c);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::string> texts;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) texts.push_back(all[rng() % 121]);  // lengths 0..4
    GrammarBuilder b;
    const uint32_t root = b.add_rule("root");
    b.rule(root).alternatives = b.literals(texts, "lit");
    auto g = std::make_shared<CompiledGrammar>(std::move(b).finish(root));
    const std::set<std::string> members(texts.begin(), texts.end());
    for (const std::string& s : all) {
      bool prefix = false;
      for (const std::string& t : members) prefix = prefix || t.compare(0, s.size(), s) == 0;
      EarleyMatcher m(g);
      EXPECT_EQ(m.accept_bytes(s), prefix) << "trial " << trial << ": '" << s << "'";
      EXPECT_EQ(matches(g, s), members.count(s) == 1) << "trial " << trial << ": '" << s << "'";
    }
  }
}

TEST(EarleyMatcher, RollbackRestoresState) {
  auto g = compile_ebnf("root ::= \"ab\" \"c\"* | \"ax\"");
  EarleyMatcher m(g);
  EXPECT_FALSE(m.can_terminate());
  ASSERT_TRUE(m.accept_bytes("abcc"));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_FALSE(m.is_terminated());
  EXPECT_FALSE(m.accept_byte('x'));
  EXPECT_EQ(m.num_bytes(), 4u);
  m.rollback_bytes(3);
  EXPECT_EQ(m.num_bytes(), 1u);
  EXPECT_FALSE(m.can_terminate());
  ByteSet want;
  want.set('b');
  want.set('x');
  EXPECT_EQ(m.allowed_bytes(), want);
  ASSERT_TRUE(m.accept_byte('x'));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_bytes("ab"));
  EXPECT_EQ(m.num_bytes(), 2u);
}

// ---------------------------------------------------------------- regex

// The char-rule proof (char_rules.cc) holds where one rule reading any character is all that
// scans an ASCII byte and the multi-byte leads, and is refused otherwise: a class short of some
// characters, a second rule reading the byte, a byte that also starts an escape.
TEST(EarleyMatcher, MultibyteCharsFollowOnlyWhereOneCharRuleReadsThem) {
  auto follows = [](const std::string& pattern, const std::string& prefix, uint8_t b) {
    EarleyMatcher m(compile_regex(pattern));
    EXPECT_TRUE(m.accept_bytes(prefix)) << pattern;
    return m.multibyte_chars_follow(b);
  };
  EXPECT_TRUE(follows(R"("[^"\n]*")", "\"", 'a'));
  EXPECT_TRUE(follows(R"("[^"\n]{0,5}")", "\"ab", 'z'));
  EXPECT_TRUE(follows(R"(.{3}x)", "", '!'));
  EXPECT_FALSE(follows(R"("[^"\n\u00e9]*")", "\"", 'a'));  // no e-acute
  EXPECT_FALSE(follows(R"("[a-z\u00e0-\u00ff]*")", "\"", 'a'));
  EXPECT_FALSE(follows(R"([^\n]*|ab)", "", 'a'));  // 'a' also starts "ab"
  EXPECT_TRUE(follows(R"([^\n]*|ab)", "", 'b'));
  EXPECT_FALSE(follows(R"([^\n]*)", "", '\n'));  // not read at all
}

TEST(RegexParse, Errors) {
  struct Case {
    const char* pattern;
    const char* needle;
  };
  const Case cases[] = {
      {"(a)\\1", "offset 3: backreference '\\1' is not supported"},
      {"a(?=b)", "offset 1: lookaround '(?=' is not supported"},
      {"a(?<!b)", "lookaround '(?<'"},
      {"\\bword", "word boundary '\\b' is not supported"},
      {"\\p{L}", "Unicode property '\\p' is not supported"},
      {"(?i)abc", "group modifier '(?i'"},
      {"a++", "possessive quantifier is not supported"},
      {"a$b", "offset 1: '$' before the end"},
      {"a^", "'^' after the start"},
      {"(ab", "offset 0: unclosed '('"},
      {"ab)", "offset 2: unbalanced ')'"},
      {"*a", "offset 0: quantifier '*' has nothing to repeat"},
      {"[z-a]", "offset 2: character range is out of order"},
      {"[abc", "unterminated character class"},
      {"a{3,1}", "quantifier {m,n} has n < m"},
      {"a{2000}", "quantifier bound over 1000"},
      {"abc\\", "pattern ends with '\\'"},
      {"[[:alpha:]]", "POSIX class"},
  };
  for (const Case& c : cases) {
    auto g = parse_regex(c.pattern);
    ASSERT_FALSE(g.ok()) << c.pattern;
    EXPECT_NE(g.status().message().find(c.needle), std::string::npos)
        << c.pattern << " -> " << g.status().message();
  }
}

std::vector<AcceptCase> regex_cases() {
  return {
      {R"([0-9]{1,4}(\.[0-9]+)?)", {"1", "1234", "3.14", "0.5"}, {"", "12345", "1.", ".5", "a"}},
      {"(cat|dog)s?", {"cat", "dogs"}, {"cats?", "catdog", ""}},
      {R"([a-z]+@[a-z]+\.(com|org))", {"a@b.com", "xy@zz.org"}, {"@b.com", "a@b.net", "a@b"}},
      {R"(^\d{3}-\d{4}$)", {"555-1234"}, {"5555-1234", "555-123", "555-1234\n"}},
      {"a*b*c?", {"", "aab", "bbc", "c"}, {"ca", "cc", "ba"}},
      {R"("([^"\\]|\\.)*")", {"\"\"", "\"a\\\"b\"", "\"\xC3\xA9\""}, {"\"", "\"a\"b\""}},
      {"(ab|a)(bc|c)", {"abc", "abbc", "ac"}, {"ab", "abcc"}},
      {R"(\w+\s\w+)", {"hello world", "a_1\tb"}, {"hello  world", "hello"}},
      {".{2,3}", {"ab", "h\xC3\xA9", "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"}, {"a", "abcd", "a\n"}},
      {"[\xCE\xB1-\xCF\x89]+", {"\xCE\xB1\xCE\xB2", "\xCF\x89"}, {"a", ""}},
      {"x{0,2}y{3}z{2,}", {"yyyzz", "xxyyyzzz"}, {"xxxyyyzz", "yyzz", "yyyz"}},
      {"(a|b)*abb", {"abb", "babb", "aababb"}, {"ab", "abba"}},
      {R"(\x{e9}|\x41|\x{1F600})", {"\xC3\xA9", "A", "\xF0\x9F\x98\x80"}, {"e", "a"}},
      {R"([\d\-]+[^a-z])", {"12-3X", "--!"}, {"12a", "1"}},
      {"colou?r", {"color", "colour"}, {"colouur"}},
      {"[]a]+[^]a]", {"]a]b", "a\xC3\xA9"}, {"ab]", "a]"}},
      {"a{,|x{2,}}|\\.", {"a{,", "xx}", "xxx}", "."}, {"x}", "a{", "b"}},
      // Nullable bodies under repetition: Earley sets must stay finite and exact.
      {"(a*)*b", {"b", "aab"}, {"a", "ba"}},
      {"(a?){3,5}c", {"c", "aaaaac"}, {"aaaaaac"}},
      {"(|a)+x|y{0}", {"x", "aax", ""}, {"y", "xa"}},
      {"((a|b)c)+", {"ac", "acbc"}, {"a", "abc"}},
      {"", {""}, {"a"}},
      {"(?:x|(?<n>y)|(?P<m>z))+?", {"x", "xyz"}, {"", "w"}},
      {R"([\D][\W][\S])", {"a!b", "x y"}, {"1!b", "aab", "a! "}},
      {"(a{2}){3}|b{1,}", {"aaaaaa", "bbb"}, {"aa", ""}},
      {R"(\{"[a-z]+": (true|false|\d+)\})", {"{\"ok\": true}", "{\"n\": 42}"}, {"{\"ok\": yes}"}},
  };
}

TEST(RegexMatch, HandWrittenCasesAgreeWithPcre2) {
  for (const AcceptCase& c : regex_cases()) {
    auto g = compile_regex(c.grammar);
    ASSERT_NE(g, nullptr) << c.grammar;
    Pcre pcre(c.grammar);
    for (const auto& s : c.valid) {
      EXPECT_TRUE(matches(g, s)) << c.grammar << "\nvalid: " << s;
      EXPECT_TRUE(pcre.full_match(s)) << "test case is wrong: " << c.grammar << " / " << s;
    }
    for (const auto& s : c.invalid) {
      EXPECT_FALSE(matches(g, s)) << c.grammar << "\ninvalid: " << s;
      EXPECT_FALSE(pcre.full_match(s)) << "test case is wrong: " << c.grammar << " / " << s;
    }
  }
}

// \S generates nothing any regex dialect calls whitespace: PCRE2 without UCP would take these
// (so this is not a PCRE2 agreement case), ECMA-262 and Python's re would not.
TEST(RegexMatch, NonSpaceShorthandExcludesUnicodeWhitespace) {
  auto g = compile_regex(R"(\S+)");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(matches(g, "ab\xC3\xA9"));
  for (const char* ws : {"\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xE2\x80\x89", "\xEF\xBB\xBF",
                         "\x1C", "\xC2\x85", " ", "\t"})
    EXPECT_FALSE(matches(g, std::string("a") + ws + "b")) << "whitespace byte(s) " << ws;
  auto in_class = compile_regex(R"([\Sx]+)");
  ASSERT_NE(in_class, nullptr);
  EXPECT_FALSE(matches(in_class,
                       "a\xC2\xA0"
                       "b"));
  EXPECT_TRUE(matches(in_class, "ax"));
}

// JSON Schema's `pattern` is ECMA-262 (\d and \w ASCII, \s with Unicode whitespace) and
// Python's re validates it (\d every decimal digit, \w every letter and digit, \s Unicode
// whitespace): a complemented shorthand, by its case or a negated class around it, writes only
// what both dialects put outside the set.
TEST(RegexMatch, ComplementedShorthandsWriteWhatEveryDialectExcludes) {
  const char* arabic_three = "\xD9\xA3";        // U+0663, a decimal digit (Nd) to Python
  const char* fullwidth_zero = "\xEF\xBC\x90";  // U+FF10, also Nd
  const char* e_acute = "\xC3\xA9";             // a letter: \w to Python, \W to ECMA-262
  const char* nbsp = "\xC2\xA0";                // whitespace to both
  for (const char* p : {R"(\D+)", R"([^\d]+)", R"([^\d,]+)"}) {
    auto g = compile_regex(p);
    ASSERT_NE(g, nullptr) << p;
    EXPECT_TRUE(matches(g, std::string("ab!") + e_acute)) << p;
    EXPECT_FALSE(matches(g, arabic_three)) << p;
    EXPECT_FALSE(matches(g, fullwidth_zero)) << p;
    EXPECT_FALSE(matches(g, "5")) << p;
  }
  auto digit = compile_regex(R"([^\D])");  // a digit to every dialect: ASCII
  EXPECT_TRUE(matches(digit, "7"));
  EXPECT_FALSE(matches(digit, arabic_three));
  for (const char* p : {R"(\W+)", R"([^\w]+)"}) {
    auto g = compile_regex(p);
    ASSERT_NE(g, nullptr) << p;
    EXPECT_TRUE(matches(g, "!- ")) << p;
    EXPECT_FALSE(matches(g, e_acute)) << p;
    EXPECT_FALSE(matches(g, "_")) << p;
  }
  auto not_space = compile_regex(R"([^\s,]+)");
  EXPECT_TRUE(matches(not_space, std::string("ab") + e_acute));
  EXPECT_FALSE(matches(not_space, nbsp));
  EXPECT_FALSE(matches(not_space, ","));
  auto space = compile_regex(R"([^\S])");  // whitespace to every dialect: ASCII
  EXPECT_TRUE(matches(space, " "));
  EXPECT_FALSE(matches(space, nbsp));
  auto word = compile_regex(R"(\w+)");  // ASCII letters and digits: a word to every dialect
  EXPECT_TRUE(matches(word, "a_1"));
  EXPECT_FALSE(matches(word, e_acute));
}

// Random strings over each pattern's own code points plus a few others. Our recognizer must
// agree with PCRE2 on every ASCII string and on every prefix's viability there; on the others
// a string we accept must match under both of PCRE2's readings of the shorthands, ASCII (as
// ECMA-262) and Unicode properties (PCRE2_UCP, as Python's re), since the grammar writes only
// what every dialect accepts.
TEST(RegexMatch, RandomStringsAgreeWithPcre2) {
  std::mt19937 rng(7);
  for (const AcceptCase& c : regex_cases()) {
    auto g = compile_regex(c.grammar);
    ASSERT_NE(g, nullptr);
    Pcre pcre(c.grammar), pcre_ucp(c.grammar, /*ucp=*/true);
    // Alphabet: UTF-8 code points of the pattern and of the hand-written strings.
    std::vector<std::string> alphabet = {"a", "0", " ", "\xC3\xA9", "\n", "-"};
    auto add_cps = [&](const std::string& s) {
      for (size_t i = 0; i < s.size();) {
        unsigned char b = s[i];
        size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
        alphabet.push_back(s.substr(i, n));
        i += n;
      }
    };
    add_cps(c.grammar);
    for (const auto& s : c.valid) add_cps(s);
    for (int trial = 0; trial < 300; ++trial) {
      std::string s;
      int len = std::uniform_int_distribution<int>(0, 8)(rng);
      // Half the trials start from a valid string so that long matches are exercised too.
      if (trial % 2 == 0 && !c.valid.empty()) s = c.valid[trial / 2 % c.valid.size()];
      for (int i = 0; i < len; ++i) {
        s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      }
      const bool ascii = std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0; });
      const bool ours = matches(g, s);
      if (ascii) {
        EXPECT_EQ(ours, pcre.full_match(s)) << c.grammar << " on '" << s << "'";
      }
      if (ours) {
        EXPECT_TRUE(pcre.full_match(s) && pcre_ucp.full_match(s))
            << c.grammar << " on '" << s << "': accepted, but a dialect rejects it";
      }
      EarleyMatcher m(g);
      size_t accepted = 0;
      while (accepted < s.size() && m.accept_byte(static_cast<uint8_t>(s[accepted]))) ++accepted;
      // The longest prefix we accept is viable for PCRE2 (both readings) and, on ASCII, one
      // byte more is not.
      if (accepted > 0) {
        EXPECT_TRUE(pcre.viable_prefix(s.substr(0, accepted))) << c.grammar << " / " << s;
        EXPECT_TRUE(pcre_ucp.viable_prefix(s.substr(0, accepted))) << c.grammar << " / " << s;
      }
      if (accepted < s.size() && ascii) {
        EXPECT_FALSE(pcre.viable_prefix(s.substr(0, accepted + 1))) << c.grammar << " / " << s;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::grammar
