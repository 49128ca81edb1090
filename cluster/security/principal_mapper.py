"""``ssl.principal.mapping.rules``: a client certificate's distinguished name -> the principal's name,
with the rule language of Kafka's SslPrincipalMapper.

Rules are a comma list of ``DEFAULT`` (the DN as it is) and ``RULE:pattern/replacement/[L|U]``,
tried in order; a rule applies only when its pattern matches the whole DN, and then gives the DN
with every match of the pattern replaced (Java's ``replaceAll``: ``$n`` is group n, a ``$n`` past
the pattern's groups is cut down digit by digit, then left as written; ``\\x`` is a literal x),
lower- or upper-cased by ``L`` / ``U``. No applicable rule is an error, as in Kafka (the connection
is refused). Empty rules are skipped; anything else that is not a rule is refused at start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"

# One rule: DEFAULT | RULE:<pattern>/<replacement>/[LU] | anything else (refused unless empty).
# Within pattern and replacement a backslash escapes the next character (so "\/" is a slash).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No rule applies to this DN: the client is refused."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: str | None = None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern}/{self.replacement}" + (f"/{self.case}" if self.case else "")

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        compiled = re.compile(self.pattern)
        if compiled.fullmatch(dn) is None:
            return None
        out = compiled.sub(lambda m: _expand(self.replacement, m), dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _expand(replacement: str, m: re.Match[str]) -> str:
    """Java's Matcher replacement syntax, with Kafka's treatment of references past the groups."""
    groups = m.re.groups
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
            continue
        ref = _BACK_REFERENCE.match(replacement, i) if c == "$" else None
        if ref is None:
            out.append(c)
            i += 1
            continue
        digits = ref.group(1)
        if int(digits[0]) > groups:  # no such group: literal, as Kafka escapes it
            out.append("$" + digits)
            i = ref.end()
            continue
        k = 1  # Java reads further digits while the number still names a group ($12 with 1 group: $1, "2")
        while k < len(digits) and int(digits[:k + 1]) <= groups:
            k += 1
        out.append(m.group(int(digits[:k])) or "")
        i = ref.start(1) + k
    return "".join(out)


def parse_rules(spec: str | None) -> list[Rule]:
    """The rules of ``spec`` in order (empty ones skipped); ValueError for one that is not a rule."""
    rules: list[Rule] = []
    for found in _SPLITTER.finditer((DEFAULT_RULES if spec is None else spec).strip()):
        text = found.group(1)
        m = _PARSER.match(text)
        if m is None or m.end() != len(text):
            unmatched = text[m.end():] if m is not None else text
            raise ValueError(f"invalid principal mapping rule {text!r} (unmatched: {unmatched!r})")
        if m.group(1) is not None:
            rules.append(Rule())
        elif m.group(2) is not None:
            try:
                re.compile(m.group(2))
            except re.error as e:
                raise ValueError(f"invalid principal mapping rule {text!r}: {e}") from None
            rules.append(Rule(m.group(2), m.group(3), m.group(4)))
    return rules


class PrincipalMapper:
    def __init__(self, spec: str | None = DEFAULT_RULES) -> None:
        self.rules = parse_rules(spec)

    def __str__(self) -> str:
        return f"PrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"

    def name(self, dn: str) -> str:
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        raise NoMatchingRule(f"no principal mapping rule applies to {dn!r}")
