"""Regular expressions a client sends, compiled for a matcher that cannot stall the broker.

Clients send regular expressions in two places: a KIP-848 member's ``subscribed_topic_regex``
(ConsumerGroupHeartbeat) and ListTransactions v2's ``transactional_id_pattern``. Both are
compiled here and nowhere else, so both get the same engine and the same bounds.

Why RE2 (``google-re2``) and not Python's ``re``: ``re`` backtracks, so one short expression
such as ``(a|a)+`` takes time exponential in the text it is matched against; the match runs
on the event loop and every connection of the broker waits for it. RE2 matches in time linear
in the text and refuses the constructs that would need backtracking (backreferences,
lookarounds): those are invalid expressions here, as they are in Kafka, whose RE2/J has the
same syntax.

The bounds, because linear is linear in the expression too: an expression longer than
``MAX_PATTERN_LENGTH`` characters is refused before it is parsed, and ``max_mem`` caps the
compiled program and its DFA cache (an expression whose program would not fit does not
compile). The budget is RE2's own default, stated so that it cannot drift: a smaller one
makes the DFA give up sooner and fall back to the NFA, whose cost per character of text grows
with the expression.

Why in ``security``: an expression from the wire is untrusted input and this module is the
broker's defence against it, beside ``acl`` and ``client_quotas``; the layer sits below both
``coordinator`` and ``apis``, which use it. (``config`` is the broker's own settings, which
no client sends.)

google-re2 is imported by the first expression compiled, not by every broker's start.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import re2

#: the longest expression accepted, in characters: far above any topic or transactional id
#: filter written by hand, and a bound on parsing time and program size
MAX_PATTERN_LENGTH = 4096
#: RE2's memory budget for one compiled expression (program and DFA cache), in bytes
MAX_MEMORY = 8 << 20


class InvalidPattern(ValueError):
    """The expression does not compile or is too long; the message says why."""


@functools.cache
def _options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # a client's mistake is not the broker's error log's business
    options.max_mem = MAX_MEMORY
    return options


def compile_pattern(pattern: str) -> re2._Regexp:
    """``pattern`` compiled with RE2; callers match with ``fullmatch`` (Kafka's ``matches``).

    Raises ``InvalidPattern`` for an expression RE2 refuses or one over the length bound."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidPattern(f"longer than {MAX_PATTERN_LENGTH} characters")
    import re2

    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise InvalidPattern(reason.decode(errors="replace") if isinstance(reason, bytes)
                             else str(reason)) from None


__all__ = ["MAX_MEMORY", "MAX_PATTERN_LENGTH", "InvalidPattern", "compile_pattern"]
