"""The query filters the list commands take: names, globs or an expression.

    gnt-instance list web1 web2            ["|", ["==", "name", "web1"], ["==", "name", "web2"]]
    gnt-instance list 'web*'               ["|", ["=~", "name", "^web[^.]*(\\..*)?$"]]
    gnt-instance list -F 'status == "running" and not admin_up'
    gnt-instance list 'pnode =* "node1*" or "prod" in tags'

The expression language is Ganeti's (see L{parse_filter}); a single
argument that contains any of C{( ) = / ! ~ ' " \\ < >} or white space is
taken as an expression even without C{-F}.  Errors are
L{errors.QueryFilterParseError} ("Error while parsing query filter: ...").

Standard library only.
"""

from __future__ import annotations

import re

from ganeti import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

#: characters that make a lone argument an expression (Ganeti's choice)
FILTER_CHARS = frozenset("()=/!~'\"\\<>") | frozenset(" \t\n\r\f\v")
#: characters that make a name a glob pattern
GLOB_CHARS = frozenset("*?")
#: regular expression delimiters after C{=~} (with an optional leading C{m})
REGEXP_DELIMITERS = "/#^|"
_COMPARISONS = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_KEYWORDS = ("and", "or", "not", "in")
#: compiled when a filter is parsed (re.compile keeps them): a list command without one compiles none
_FIELD = r"[A-Za-z][A-Za-z0-9_/.]*"
_NUMBER = r"[+-]?[0-9]+"
_OPERATOR = r"==|!=|<=|>=|=~|!~|=\*|!\*|<|>"


def glob_regexp(pattern: str) -> str:
    """The regular expression of a host name glob: C{*} and C{?} stay within
    one name component, and C{web*} also matches C{web1.example.com}."""
    parts = []
    for char in pattern:
        if char == "*":
            parts.append("[^.]*")
        elif char == "?":
            parts.append("[^.]")
        else:
            parts.append(re.escape(char))
    return "^%s(\\..*)?$" % "".join(parts)


def looks_like_filter(text: str) -> bool:
    return bool(FILTER_CHARS & frozenset(text))


def make_filter(args: Iterable[str], force_filter: bool = False, namefield: str = "name") -> list[Any] | None:
    """The filter of a list command's arguments (Ganeti's C{MakeFilter}).

    @param force_filter: C{-F}: the one argument is an expression.
    @return: C{None} for no arguments (everything).
    @raise errors.OpPrereqError: C{-F} with other than one argument.
    @raise errors.QueryFilterParseError: a malformed expression.
    """
    args = list(args)
    if force_filter or (len(args) == 1 and looks_like_filter(args[0])):
        if len(args) != 1:
            raise errors.OpPrereqError("Exactly one argument must be given as a filter", errors.ECODE_INVAL)
        return parse_filter(args[0])
    if not args:
        return None
    parts: list[Any] = ["|"]
    for name in args:
        if GLOB_CHARS & frozenset(name):
            parts.append(["=~", namefield, glob_regexp(name)])
        else:
            parts.append(["==", namefield, name])
    return parts


def parse_filter(text: str) -> list[Any]:
    """Parse a filter expression into the LUXI filter list.

    The language::

        expr      := term ("or" term)*
        term      := factor ("and" factor)*
        factor    := "not" factor | "(" expr ")" | condition
        condition := FIELD                        ["?", field]
                   | FIELD (== != < <= > >=) VALUE
                   | FIELD =~ REGEXP | FIELD !~ REGEXP
                   | FIELD =* "glob" | FIELD !* "glob"
                   | VALUE in FIELD | VALUE not in FIELD    (list contains)
        VALUE     := 'string' | "string" | integer
        REGEXP    := [m]/re/[i]  (also with # ^ | as delimiters)
    """
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    # --- scanning ------------------------------------------------------------------
    def _skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _fail(self, what: str) -> errors.QueryFilterParseError:
        where = "end of input" if self.pos >= len(self.text) else "position %d" % (self.pos + 1)
        return errors.QueryFilterParseError("%s at %s in %r" % (what, where, self.text))

    def _keyword(self, word: str) -> bool:
        """Consume C{word} if it comes next as a whole word."""
        self._skip()
        end = self.pos + len(word)
        if self.text[self.pos:end] == word and not (end < len(self.text) and _is_word_char(self.text[end])):
            self.pos = end
            return True
        return False

    def _literal(self, token: str) -> bool:
        self._skip()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def _field(self) -> str | None:
        self._skip()
        match = re.compile(_FIELD).match(self.text, self.pos)
        if match is None or match.group() in _KEYWORDS:
            return None
        self.pos = match.end()
        return match.group()

    def _quoted(self, quotes: str = "'\"") -> str | None:
        self._skip()
        if self.pos >= len(self.text) or self.text[self.pos] not in quotes:
            return None
        return self._delimited(self.text[self.pos], "unterminated string")

    def _delimited(self, delimiter: str, error: str) -> str:
        """The text up to the closing C{delimiter} (backslash escapes it)."""
        start = self.pos
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\" and self.pos + 1 < len(self.text):
                following = self.text[self.pos + 1]
                out.append(following if following in (delimiter, "\\") else char + following)
                self.pos += 2
                continue
            if char == delimiter:
                self.pos += 1
                return "".join(out)
            out.append(char)
            self.pos += 1
        self.pos = start
        raise self._fail(error)

    def _value(self) -> str | int | None:
        text = self._quoted()
        if text is not None:
            return text
        match = re.compile(_NUMBER).match(self.text, self.pos)
        if match is not None and not (match.end() < len(self.text) and _is_word_char(self.text[match.end()])):
            self.pos = match.end()
            return int(match.group())
        return None

    def _regexp(self) -> str:
        self._skip()
        if self.text.startswith("m", self.pos) and self.text[self.pos + 1:self.pos + 2] in tuple(REGEXP_DELIMITERS):
            self.pos += 1
        if self.pos >= len(self.text) or self.text[self.pos] not in REGEXP_DELIMITERS:
            raise self._fail("expected a regular expression like /pattern/")
        pattern = self._delimited(self.text[self.pos], "unterminated regular expression")
        flags = ""
        while self.pos < len(self.text) and self.text[self.pos].isalpha():
            flags += self.text[self.pos]
            self.pos += 1
        for flag in flags:
            if flag != "i":
                raise self._fail("unknown regular expression flag %r" % flag)
        return ("(?i)" if flags else "") + pattern

    # --- grammar ---------------------------------------------------------------------
    def parse(self) -> list[Any]:
        result = self._expr()
        self._skip()
        if self.pos != len(self.text):
            raise self._fail("unexpected text")
        return result

    def _expr(self) -> list[Any]:
        terms = [self._term()]
        while self._keyword("or"):
            terms.append(self._term())
        return terms[0] if len(terms) == 1 else ["|"] + terms

    def _term(self) -> list[Any]:
        factors = [self._factor()]
        while self._keyword("and"):
            factors.append(self._factor())
        return factors[0] if len(factors) == 1 else ["&"] + factors

    def _factor(self) -> list[Any]:
        if self._keyword("not"):
            return ["!", self._factor()]
        if self._literal("("):
            inner = self._expr()
            if not self._literal(")"):
                raise self._fail("expected ')'")
            return inner
        return self._condition()

    def _condition(self) -> list[Any]:
        start = self.pos
        value = self._value()
        if value is not None:
            negate = self._keyword("not")
            if not self._keyword("in"):
                raise self._fail("expected 'in' after a value")
            field = self._field()
            if field is None:
                raise self._fail("expected a field name after 'in'")
            contains = ["=[]", field, value]
            return ["!", contains] if negate else contains
        self.pos = start
        field = self._field()
        if field is None:
            raise self._fail("expected a field name, a value or '('")
        self._skip()
        match = re.compile(_OPERATOR).match(self.text, self.pos)
        if match is None:
            return ["?", field]
        self.pos = match.end()
        op = match.group()
        if op in ("=~", "!~"):
            leaf = ["=~", field, self._regexp()]
            return leaf if op == "=~" else ["!", leaf]
        if op in ("=*", "!*"):
            pattern = self._quoted()
            if pattern is None:
                raise self._fail("expected a quoted glob pattern")
            leaf = ["=~", field, glob_regexp(pattern)]
            return leaf if op == "=*" else ["!", leaf]
        rvalue = self._value()
        if rvalue is None:
            raise self._fail("expected a quoted string or an integer")
        return [_COMPARISONS[op], field, rvalue]


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char in "_/."
