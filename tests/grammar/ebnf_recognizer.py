"""A small, independent Earley recognizer for the GBNF/xgrammar EBNF dialect (test code only).

It shares nothing with src/deepinfer/grammar: it parses the grammar text itself and recognizes
strings of Unicode code points (the C++ engine works on bytes), so a walk output is accepted
here only if the grammar really derives it.
"""

import re


class Chars:
    """A terminal: a set of code point ranges, possibly negated."""

    def __init__(self, ranges, negate=False):
        self.ranges = ranges
        self.negate = negate

    def match(self, ch):
        cp = ord(ch)
        inside = any(lo <= cp <= hi for lo, hi in self.ranges)
        return inside != self.negate


class GrammarError(Exception):
    pass


class _Parser:
    def __init__(self, text):
        self.t = text
        self.i = 0
        self.rules = {}  # name -> list of alternatives (lists of symbols)
        self.counter = 0

    def fresh(self, hint):
        self.counter += 1
        return "%s#%d" % (hint, self.counter)

    def skip(self):
        while self.i < len(self.t):
            c = self.t[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif c == "#":
                while self.i < len(self.t) and self.t[self.i] != "\n":
                    self.i += 1
            else:
                break

    def at_rule_start(self):
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\s*::=").match(self.t, self.i)
        return m is not None

    def parse(self):
        self.skip()
        while self.i < len(self.t):
            m = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)\s*::=").match(self.t, self.i)
            if not m:
                raise GrammarError("expected a rule at %d" % self.i)
            name = m.group(1)
            self.i = m.end()
            if name in self.rules:
                raise GrammarError("duplicate rule " + name)
            self.rules[name] = self.alternatives(top=True)
            self.skip()
        return self.rules

    def alternatives(self, top=False):
        alts = [self.sequence(top)]
        while True:
            self.skip()
            if self.i < len(self.t) and self.t[self.i] == "|":
                self.i += 1
                alts.append(self.sequence(top))
            else:
                return alts

    def sequence(self, top):
        seq = []
        while True:
            self.skip()
            if self.i >= len(self.t) or self.t[self.i] in "|)":
                return seq
            if top and self.at_rule_start():
                return seq
            seq.append(self.postfix(self.atom()))

    def escape(self):
        # self.t[self.i] is the backslash
        c = self.t[self.i + 1]
        self.i += 2
        simple = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'",
                  "[": "[", "]": "]", "-": "-", "^": "^"}
        if c in simple:
            return ord(simple[c])
        width = {"x": 2, "u": 4, "U": 8}.get(c)
        if width is None:
            raise GrammarError("unknown escape \\" + c)
        v = int(self.t[self.i:self.i + width], 16)
        self.i += width
        return v

    def atom(self):
        c = self.t[self.i]
        if c == '"':
            self.i += 1
            cps = []
            while self.t[self.i] != '"':
                if self.t[self.i] == "\\":
                    cps.append(self.escape())
                else:
                    cps.append(ord(self.t[self.i]))
                    self.i += 1
            self.i += 1
            return [Chars([(cp, cp)]) for cp in cps]  # a literal is a sequence
        if c == "[":
            self.i += 1
            negate = self.t[self.i] == "^"
            if negate:
                self.i += 1
            ranges = []
            while self.t[self.i] != "]":
                lo = self.class_char()
                hi = lo
                if self.t[self.i] == "-" and self.t[self.i + 1] != "]":
                    self.i += 1
                    hi = self.class_char()
                ranges.append((lo, hi))
            self.i += 1
            return [Chars(ranges, negate)]
        if c == "(":
            self.i += 1
            alts = self.alternatives()
            self.skip()
            if self.t[self.i] != ")":
                raise GrammarError("unclosed group")
            self.i += 1
            name = self.fresh("group")
            self.rules[name] = alts
            return [name]
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*").match(self.t, self.i)
        if not m:
            raise GrammarError("unexpected %r at %d" % (c, self.i))
        self.i = m.end()
        return [m.group(0)]

    def class_char(self):
        if self.t[self.i] == "\\":
            return self.escape()
        cp = ord(self.t[self.i])
        self.i += 1
        return cp

    def as_symbol(self, seq):
        if len(seq) == 1:
            return seq[0]
        name = self.fresh("seq")
        self.rules[name] = [seq]
        return name

    def postfix(self, seq):
        while True:
            if self.i >= len(self.t):
                return seq
            c = self.t[self.i]
            m = re.compile(r"\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}").match(self.t, self.i)
            if c in "*+?":
                self.i += 1
                x = self.as_symbol(seq)
                name = self.fresh("rep")
                if c == "*":
                    self.rules[name] = [[], [name, x]]
                elif c == "+":
                    self.rules[name] = [[x], [name, x]]
                else:
                    self.rules[name] = [[], [x]]
                seq = [name]
            elif m:
                self.i = m.end()
                x = self.as_symbol(seq)
                lo = int(m.group(1))
                if m.group(2) is None:
                    hi = lo
                elif m.group(3) == "":
                    hi = None
                else:
                    hi = int(m.group(3))
                out = [x] * lo
                if hi is None:
                    star = self.fresh("rep")
                    self.rules[star] = [[], [star, x]]
                    out.append(star)
                else:
                    opt = self.fresh("opt")
                    self.rules[opt] = [[], [x]]
                    out += [opt] * (hi - lo)
                seq = [self.as_symbol(out)] if out else []
                if not out:
                    eps = self.fresh("eps")
                    self.rules[eps] = [[]]
                    seq = [eps]
            else:
                return seq


def parse(text):
    p = _Parser(text)
    rules = p.parse()
    # Flatten literal sequences: alternatives are lists whose items are names or Chars lists.
    flat = {}
    for name, alts in rules.items():
        flat[name] = [[s for item in alt for s in (item if isinstance(item, list) else [item])]
                      for alt in alts]
    for name, alts in flat.items():
        for alt in alts:
            for s in alt:
                if isinstance(s, str) and s not in flat:
                    raise GrammarError("undefined rule " + s)
    return flat


def _nullable(rules):
    null = set()
    changed = True
    while changed:
        changed = False
        for name, alts in rules.items():
            if name in null:
                continue
            if any(all(isinstance(s, str) and s in null for s in alt) for alt in alts):
                null.add(name)
                changed = True
    return null


def recognize(rules, text, root="root"):
    """True iff root derives exactly the code points of text."""
    null = _nullable(rules)
    start = ("<start>", 0)
    alts = dict(rules)
    alts["<start>"] = [[root]]
    n = len(text)
    sets = [dict() for _ in range(n + 1)]  # item -> None, item = (rule, alt, dot, origin)

    def add(k, item, agenda):
        if item not in sets[k]:
            sets[k][item] = None
            agenda.append(item)

    agenda0 = []
    add(0, ("<start>", 0, 0, 0), agenda0)
    for k in range(n + 1):
        agenda = list(sets[k].keys()) if k > 0 else agenda0
        while agenda:
            rule, ai, dot, origin = agenda.pop()
            alt = alts[rule][ai]
            if dot < len(alt):
                sym = alt[dot]
                if isinstance(sym, str):
                    for j in range(len(alts[sym])):
                        add(k, (sym, j, 0, k), agenda)
                    if sym in null:
                        add(k, (rule, ai, dot + 1, origin), agenda)
                elif k < n and sym.match(text[k]):
                    sets[k + 1][(rule, ai, dot + 1, origin)] = None
            else:
                for (r2, a2, d2, o2) in list(sets[origin].keys()):
                    alt2 = alts[r2][a2]
                    if d2 < len(alt2) and alt2[d2] == rule:
                        add(k, (r2, a2, d2 + 1, o2), agenda)
        if k < n and not sets[k + 1]:
            return False
    return ("<start>", 0, 1, 0) in sets[n]
