"""Hand-written regex and EBNF items for the acceptance corpus: (name, source, valid strings).

Regexes use the syntax shared by our front end and Python's re (the soundness validator):
no \\x{...}, no (?<name>...), no possessive quantifiers.
"""

REGEXES = [
    ("digits", r"[0-9]+", ["0", "0123", "9" * 30]),
    ("decimal", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", ["0", "-12.5", "3.14159"]),
    ("sci_number", r"[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?", ["1e10", "-2.E-3", "+7"]),
    ("hex_color", r"#[0-9a-fA-F]{6}", ["#00ff7F", "#ABCDEF"]),
    ("hex_color_short_or_long", r"#([0-9a-f]{3}|[0-9a-f]{6})", ["#abc", "#a1b2c3"]),
    ("ipv4", r"((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
     ["192.168.0.1", "0.0.0.0", "255.255.255.255"]),
    ("iso_date", r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", ["2024-12-31", "1999-01-01"]),
    ("time_hm", r"([01][0-9]|2[0-3]):[0-5][0-9]", ["00:00", "23:59"]),
    ("email_like", r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}", ["a.b@c.de", "x+y@z.com"]),
    ("phone_us", r"\(?[0-9]{3}\)?[-. ]?[0-9]{3}[-. ]?[0-9]{4}", ["(555) 123-4567", "555.123.4567"]),
    ("yes_no", r"yes|no", ["yes", "no"]),
    ("choice_words", r"(apple|apricot|banana|blueberry|cherry)", ["apple", "apricot", "blueberry"]),
    ("optional_suffix", r"colou?r", ["color", "colour"]),
    ("bounded_repeat", r"a{2,5}", ["aa", "aaaaa"]),
    ("exact_repeat", r"(ab){3}", ["ababab"]),
    ("open_repeat", r"x{3,}", ["xxx", "xxxxxxxx"]),
    ("nested_groups", r"((a|b)(c|d))+", ["ac", "bdacbc"]),
    ("nullable_star", r"(a*)*b", ["b", "aaab"]),
    ("nullable_alternation", r"(|a)(|b)c", ["c", "abc", "ac", "bc"]),
    ("lazy_quantifiers", r"<.+?>", ["<a>", "<abc>def>"]),
    ("dot_any", r"...", ["abc", "中文字", "a😀b"]),
    ("dot_then_literal", r".*end", ["end", "the end", "中end"]),
    ("negated_class", r"[^0-9]+", ["abc", "中", "!@#"]),
    ("negated_newline", r"[^\n]*", ["", "anything but newline"]),
    ("class_escapes", r"[\w\s]+", ["hello world", "a_b 9"]),
    ("shorthand_d", r"\d{3}-\d{2}-\d{4}", ["123-45-6789"]),
    ("shorthand_W", r"\W+", ["!!", " -"]),
    ("shorthand_S", r"\S+", ["abc", "x!y"]),
    ("whitespace_runs", r"a\s+b", ["a b", "a\t\n b"]),
    ("escaped_metachars", r"\.\*\+\?\(\)\[\]\{\}\|\\\^\$", [".*+?()[]{}|\\^$"]),
    ("bracket_first", r"[]a]+", ["]", "a]a"]),
    ("dash_in_class", r"[a-c-]+", ["a-b", "---"]),
    ("literal_brace", r"x{y}z", ["x{y}z"]),
    ("anchored", r"^abc$", ["abc"]),
    ("anchored_alternation", r"^(foo|bar)+$", ["foo", "barfoo"]),
    ("unicode_range", r"[\u4e00-\u9fff]+", ["中文", "汉字"]),
    ("unicode_literal", r"café|naïve|😀+", ["café", "naïve", "😀😀"]),
    ("astral_class", r"[😀-🙏]{1,3}", ["😀", "😀🙏"]),
    ("greek", r"[α-ω]+ [Α-Ω]+", ["αβγ ΔΕ"]),
    ("mixed_scripts", r"(hello|привет|こんにちは|مرحبا) world", ["привет world", "こんにちは world"]),
    ("hex_escape", r"\x41\x42[\x30-\x39]", ["AB5"]),
    ("tab_newline_escapes", r"a\tb\nc\r?", ["a\tb\nc", "a\tb\nc\r"]),
    ("quoted_string", r'"([^"\\]|\\.)*"', ['""', '"a\\"b"', '"\\\\"']),
    ("json_string_like", r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"', ['"abc"', '"\\u00e9\\n"']),
    ("csv_row", r"[^,\n]*(,[^,\n]*){2}", ["a,b,c", ",,", "1, 2 ,3"]),
    ("key_value_pairs", r"([a-z]+=[0-9]+)(&[a-z]+=[0-9]+)*", ["a=1", "x=1&yy=22"]),
    ("semver", r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?", ["1.2.3", "0.0.1-rc.1"]),
    ("uuid", r"[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
     ["123e4567-e89b-42d3-a456-426614174000"]),
    ("url_simple", r"https?://[a-z0-9.-]+(:[0-9]+)?(/[a-zA-Z0-9._~-]*)*", ["http://a.b", "https://x.y:80/p/q"]),
    ("path_unix", r"(/[^/\x00]+)+/?", ["/usr/bin", "/a/b/"]),
    ("markdown_heading", r"#{1,6} [A-Za-z ]+", ["# Title", "###### Small"]),
    ("list_of_numbers", r"\[(-?[0-9]+(, -?[0-9]+)*)?\]", ["[]", "[1, -2, 3]"]),
    ("json_like_object", r'\{"name": "[A-Za-z ]{1,20}", "age": [0-9]{1,3}\}', ['{"name": "Ada Lovelace", "age": 36}']),
    ("sql_select", r"SELECT [a-z_]+(, [a-z_]+)* FROM [a-z_]+( WHERE [a-z_]+ = [0-9]+)?;",
     ["SELECT a FROM t;", "SELECT a, b_c FROM tab WHERE id = 3;"]),
    ("roman_numeral", r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})", ["MCMXCIV", "XLII", ""]),
    ("binary_even_zeros", r"(1*01*0)*1*", ["", "11", "0101", "00"]),
    ("deep_nesting", r"((((((a|b)c)d)e)f)g)+", ["acdefg", "bcdefgacdefg"]),
    ("many_alternatives", "(" + "|".join("w%02d" % i for i in range(60)) + ")", ["w00", "w59"]),
    ("big_bounded", r"[ab]{0,200}", ["", "ab" * 100]),
    ("long_literal", r"the quick brown fox jumps over the lazy dog", ["the quick brown fox jumps over the lazy dog"]),
    ("form_feed_vtab", r"[\f\v]x", ["\fx", "\vx"]),
    ("null_byte_free", r"[^\x00]{1,5}", ["a", "abcde"]),
    ("lazy_bounded", r"a{2,4}?b", ["aab", "aaaab"]),
    ("non_capturing", r"(?:ab|cd)+e", ["abe", "cdabe"]),
    ("named_group_python", r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})", ["2024-05"]),
    ("overlapping_alternatives", r"(a|ab|abc)(c|bc|)", ["a", "abc", "abcc", "ab"]),
    ("star_of_optional", r"(a?b?)*c", ["c", "abbac"]),
]

EBNF = [
    ("json", r'''root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n]{0,4}
''', ['{"a": [1, 2.5e3, "x\\n", null, true]}', "[]", '"\\u00e9"']),
    ("arithmetic", r'''root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
''', ["1+2*3", "(1+2)*-3", "((4))/2-1"]),
    ("left_recursive", r'''root ::= list
list ::= list "," item | item
item ::= [a-z]+
''', ["a", "a,bc,def"]),
    ("right_recursive", r'''root ::= item ("," root)?
item ::= [0-9]
''', ["1", "1,2,3"]),
    ("balanced_parens", r'''root ::= "(" root ")" root | ""
''', ["", "()", "(())()", "((()))"]),
    ("palindrome_ab", r'''root ::= "a" root "a" | "b" root "b" | "a" | "b" | ""
''', ["", "a", "abba", "aba", "babbab"]),
    ("anbn", r'''root ::= "a" root "b" | ""
''', ["", "ab", "aaabbb"]),
    ("nested_list", r'''root ::= "[" (item (", " item)*)? "]"
item ::= [0-9]+ | root
''', ["[]", "[1, [22, 333], []]"]),
    ("sexpr", r'''root ::= sexp
sexp ::= atom | "(" (sexp (" " sexp)*)? ")"
atom ::= [a-z]+ | [0-9]+
''', ["(define (f x) (add x 1))", "()", "abc"]),
    ("csv", r'''root ::= row ("\n" row)*
row ::= field ("," field)*
field ::= [^,\n"]* | "\"" ([^"] | "\"\"")* "\""
''', ["a,b\nc,d", '"x,y",z', ""]),
    ("key_value_config", r'''root ::= (line "\n")*
line ::= key " = " val | "# " [^\n]*
key ::= [a-z_]+
val ::= [0-9]+ | "\"" [^"\n]* "\"" | "true" | "false"
''', ["", "a = 1\n# c\nname = \"x\"\n"]),
    ("unicode_literals", r'''root ::= greet " " name "!"
greet ::= "你好" | "こんにちは" | "Привет" | "😀"
name ::= [\u4e00-\u9fff]+ | [a-zA-Z]+
''', ["你好 世界!", "😀 Bob!"]),
    ("escapes", r'''root ::= "\x41" "\u00e9" "\U0001F600" "\t" "\"" "\\" [\[\]\-\^]
''', ["Aé😀\t\"\\[", "Aé😀\t\"\\^"]),
    ("repetition_bounds", r'''root ::= "a"{2} "b"{1,3} "c"{2,} "d"?
''', ["aabcc", "aabbbccccd"]),
    ("group_repetition", r'''root ::= ("ab" | "c"){1,4} ("x" "y")*
''', ["ab", "cabcab", "cxyxy"]),
    ("negated_class", r'''root ::= [^a-z]+ "." [^\x00-\x40]*
''', ["ABC.", "12.xyz"]),
    ("comments_and_layout", r'''# a grammar with comments
root ::= # the start
  word   # first
  ( " " word )*
word ::= [a-z]+ # letters
''', ["hello", "a b c"]),
    ("ambiguous", r'''root ::= a a | a
a ::= "x" | "x" "x" | ""
''', ["", "x", "xx", "xxx", "xxxx"]),
    ("nullable_chain", r'''root ::= a b c "!"
a ::= "a"?
b ::= a a
c ::= b | "c"
''', ["!", "a!", "aaa!", "c!", "aac!"]),
    ("xml_like", r'''root ::= element
element ::= "<" name ">" content "</" name ">" | "<" name "/>"
content ::= (element | text)*
text ::= [^<>]+
name ::= [a-z]+
''', ["<a/>", "<a>hi<b/></a>", "<x><y>t</y></x>"]),
    ("email_list", r'''root ::= email (", " email)*
email ::= local "@" domain
local ::= [a-z0-9._]+
domain ::= label ("." label)+
label ::= [a-z0-9]+
''', ["a@b.c", "x.y@z.com, q@r.org"]),
    ("python_call", r'''root ::= name "(" args? ")"
args ::= arg (", " arg)*
arg ::= name "=" value | value
value ::= [0-9]+ | "'" [^']* "'" | name
name ::= [a-zA-Z_] [a-zA-Z0-9_]*
''', ["f()", "print('hi', end='')", "g(x=1, y)"]),
    ("tool_call", r'''root ::= "<tool>" ws name ws "</tool>" ws "<args>" ws json ws "</args>"
name ::= "search" | "calculator" | "weather"
json ::= "{" ws (pair (ws "," ws pair)*)? ws "}"
pair ::= "\"" [a-z]+ "\"" ws ":" ws ("\"" [^"]* "\"" | [0-9]+)
ws ::= [ \n]?
''', ["<tool>search</tool><args>{\"q\": \"cats\"}</args>", "<tool> weather </tool>\n<args>{}</args>"]),
    ("dates", r'''root ::= date ("; " date)*
date ::= year "-" month "-" day
year ::= [12] [0-9]{3}
month ::= "0" [1-9] | "1" [0-2]
day ::= "0" [1-9] | [12] [0-9] | "3" [01]
''', ["2024-01-31", "1999-12-01; 2000-02-29"]),
    ("markdown_list", r'''root ::= item+
item ::= "- " text "\n" sub*
sub ::= "  - " text "\n"
text ::= [^\n]+
''', ["- a\n", "- a\n  - b\n- c\n"]),
    ("boolean_expr", r'''root ::= or
or ::= and (" || " and)*
and ::= not (" && " not)*
not ::= "!" not | atom
atom ::= "true" | "false" | [a-z] | "(" or ")"
''', ["true", "!(a && b) || false"]),
    ("sql_subset", r'''root ::= "SELECT " cols " FROM " ident where? ";"
cols ::= "*" | ident (", " ident)*
where ::= " WHERE " cond (" AND " cond)*
cond ::= ident " " op " " lit
op ::= "=" | "<" | ">" | "<=" | ">=" | "<>"
lit ::= [0-9]+ | "'" [^']* "'"
ident ::= [a-z_] [a-z_0-9]*
''', ["SELECT * FROM t;", "SELECT a, b FROM users WHERE age >= 18 AND name <> 'x';"]),
    ("deep_rule_chain", r'''root ::= r1
r1 ::= r2 | "1"
r2 ::= r3 | "2"
r3 ::= r4 | "3"
r4 ::= r5 | "4"
r5 ::= r6 | "5"
r6 ::= "(" r1 ")" | "6"
''', ["1", "6", "(3)", "((6))"]),
    ("yaml_like", r'''root ::= (entry "\n")+
entry ::= key ": " (scalar | "\n" ("  - " scalar "\n")* "  - " scalar)
key ::= [a-z]+
scalar ::= [a-zA-Z0-9 ]+
''', ["a: b\n", "list: \n  - x\n  - y\nz: 1\n"]),
    ("number_formats", r'''root ::= num (" " num)*
num ::= int | float | hex
int ::= "-"? [0-9]+
float ::= [0-9]* "." [0-9]+ ([eE] [-+]? [0-9]+)?
hex ::= "0x" [0-9a-fA-F]+
''', ["1 -2 .5 3.0e-2 0xFF"]),
    ("cjk_sentence", r'''root ::= [\u4e00-\u9fff]{1,10} ("，" [\u4e00-\u9fff]{1,10})* "。"
''', ["你好。", "今天天气很好，我们去公园。"]),
    ("emoji_sequence", r'''root ::= ([\U0001F600-\U0001F64F] | [\u2600-\u26FF]){1,5}
''', ["😀", "☀😀☂"]),
    ("regexlike_alt", r'''root ::= ("cat" | "car" | "card" | "care" | "cart")+
''', ["cat", "cardcare", "carcart"]),
    ("empty_alternatives", r'''root ::= "a" ( | "b" | "c" ) "d"
''', ["ad", "abd", "acd"]),
    ("star_of_nullable", r'''root ::= ("x"?)* "y"
''', ["y", "xxy"]),
    ("interleaved_ws", r'''root ::= "{" ws "}" | "[" ws "]"
ws ::= (" " | "\n" | "\t")*
''', ["{}", "[ \n\t]"]),
    ("html_attrs", r'''root ::= "<div" attr* ">"
attr ::= " " [a-z-]+ "=\"" [^"]* "\""
''', ["<div>", "<div class=\"a b\" data-x=\"1\">"]),
    ("bounded_list", r'''root ::= "[" (item ("," item){0,4})? "]"
item ::= [0-9]{1,2}
''', ["[]", "[1,22,3,44,5]"]),
    ("chemical_formula", r'''root ::= group+
group ::= element count? | "(" group+ ")" count
element ::= [A-Z] [a-z]?
count ::= [2-9] | [1-9] [0-9]
''', ["H2O", "C6H12O6", "Ca(OH)2"]),
    ("log_line", r'''root ::= "[" level "] " ts " " msg
level ::= "INFO" | "WARN" | "ERROR" | "DEBUG"
ts ::= [0-9]{2} ":" [0-9]{2} ":" [0-9]{2}
msg ::= [^\n]+
''', ["[INFO] 12:00:01 started", "[ERROR] 23:59:59 disk full: /dev/sda1"]),
]
