"""Times as Kafka's tools take them: ISO 8601 date-times and durations.

``--to-datetime`` / ``--from-timestamp`` take ``2024-05-01T12:00:00[.sss][zone]`` (local time
when no zone is given, as Kafka's tools read it) or milliseconds since the epoch;
``--by-duration`` takes Java's ``Duration`` text, ``PnDTnHnMn.nS`` (``P1DT2H``, ``PT30M``).
"""

from __future__ import annotations

import re
from datetime import datetime

from .base import UsageError

_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?\d+(?:[.,]\d{1,9})?)S)?)?", re.IGNORECASE)


def parse_when(text: str, option: str = "time") -> int:
    """Milliseconds since the epoch."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"bad {option} {text!r}: expected ISO 8601 such as "
                         "2024-05-01T12:00:00.000 or milliseconds since the epoch") from None
    return int(when.timestamp() * 1000)


def parse_duration_ms(text: str, option: str = "duration") -> int:
    """Java's ``Duration.parse`` for days, hours, minutes and seconds, in milliseconds."""
    text = text.strip()
    match = _DURATION.fullmatch(text)
    if not match or not any(match.groups()[1:]) or text.upper().endswith("T"):
        raise UsageError(f"bad {option} {text!r}: expected an ISO 8601 duration such as "
                         "P1DT2H30M or PT15M")
    sign, days, hours, minutes, seconds = match.groups()
    ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000
          + int(minutes or 0) * 60_000 + round(float((seconds or "0").replace(",", ".")) * 1000))
    return -ms if sign == "-" else ms


__all__ = ["parse_duration_ms", "parse_when"]
