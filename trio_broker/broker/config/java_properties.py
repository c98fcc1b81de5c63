"""Java properties text read as ``java.util.Properties.load`` reads it: ``server.properties``,
a client's ``client.properties`` and the log dirs' ``meta.properties``.

Why a reader of its own rather than the ``javaproperties`` package: that package imports its XML
half (``xml.sax.saxutils``, which pulls ``urllib.request``, ``http.client`` and ``email``)
whatever is read, and every restart reads the log dirs' stamps (docs/benchmarks.md, start-up).
This is Java's ``LineReader`` and key/value split; the tests check it against ``javaproperties``
on Java's documented examples and on generated text, and ``make fuzz`` runs it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["PropertiesError", "load_properties", "parse_properties"]

_NEWLINE = re.compile(r"\r\n|\r|\n")
_BLANKS = " \t\f"
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|u|.|\Z)", re.DOTALL)
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """Text Java's ``Properties.load`` refuses (a malformed ``\\uxxxx`` escape, its
    IllegalArgumentException); ``line`` is the line its entry starts on."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def parse_properties(text: str) -> Iterator[tuple[str, str, int]]:
    """(key, value, line) of each entry in order, ``line`` (from 1) the one it starts on; a
    later entry of the same key wins, as in Java."""
    for line, logical in _logical_lines(text):
        try:
            key, value = _split(logical)
        except ValueError as exc:
            raise PropertiesError(str(exc), line) from None
        yield key, value, line


def load_properties(text: str) -> dict[str, str]:
    """Java properties text -> {key: value} (a later key wins)."""
    return {key: value for key, value, _ in parse_properties(text)}


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Java's ``LineReader``: each natural line's leading blanks dropped, blank and comment
    (``#``, ``!``) lines skipped, a line ending in an odd number of backslashes continued by
    the next (whose ``#`` is text, and which, empty, ends it); with the line each starts on."""
    line: str | None = None
    start = 0
    for number, natural in enumerate(_NEWLINE.split(text), 1):
        part = natural.lstrip(_BLANKS)
        if line is None:
            if not part or part[0] in "#!":
                continue
            line, start = part, number
        elif not part:
            if line:  # a line of only a continuation is none
                yield start, line
            line = None
            continue
        else:
            line += part
        if (len(line) - len(line.rstrip("\\"))) % 2:
            line = line[:-1]
        else:
            yield start, line
            line = None
    if line:
        yield start, line


def _split(line: str) -> tuple[str, str]:
    """A logical line's key and value: the key ends at the first unescaped ``=``, ``:`` or
    blank; blanks and then one ``=`` or ``:`` (and blanks) separate it from the value."""
    end, escaped = 0, False
    while end < len(line):
        c = line[end]
        if not escaped and (c in "=:" or c in _BLANKS):
            break
        escaped = c == "\\" and not escaped
        end += 1
    start, separated = end, False
    while start < len(line):
        c = line[start]
        if c in _BLANKS or (c in "=:" and not separated):
            separated = separated or c in "=:"
            start += 1
        else:
            break
    return _unescape(line[:end]), _unescape(line[start:])


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        escape = m.group(1)
        if escape.startswith("u"):
            if len(escape) != 5:
                raise ValueError("Malformed \\uxxxx encoding.")
            return chr(int(escape[1:], 16))
        return _ESCAPED.get(escape, escape)

    if "\\" not in text:
        return text
    # \\uXXXX escapes are UTF-16 code units: a surrogate pair is one character, as in Java
    return _ESCAPE.sub(one, text).encode("utf-16-le", "surrogatepass").decode("utf-16-le",
                                                                            "surrogatepass")
