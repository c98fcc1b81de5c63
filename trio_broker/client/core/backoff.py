"""Exponential backoff with jitter, as Kafka's ``ExponentialBackoff``.

Why jitter: after a broker restarts, every client that lost it would otherwise reconnect in the
same millisecond, attempt after attempt. Kafka spreads them with +/-20% around
``initial * 2**attempts``, capped at the maximum; the same shape serves reconnects
(``reconnect.backoff.ms`` / ``reconnect.backoff.max.ms``) and retries (``retry.backoff.ms`` /
``retry.backoff.max.ms``).
"""

from __future__ import annotations

import math
import random

from .rng import CLIENT_RANDOM


class ExponentialBackoff:
    """``backoff_ms(attempts)``: the wait before attempt ``attempts + 1`` (0 = first failure)."""

    __slots__ = ("_exp_max", "initial_ms", "jitter", "max_ms", "multiplier")

    def __init__(self, initial_ms: float, max_ms: float, *, multiplier: float = 2.0,
                 jitter: float = 0.2) -> None:
        self.initial_ms = initial_ms
        self.max_ms = max(initial_ms, max_ms)
        self.multiplier = multiplier
        self.jitter = jitter
        if self.max_ms > initial_ms > 0 and multiplier > 1:
            self._exp_max = math.log(self.max_ms / initial_ms) / math.log(multiplier)
        else:
            self._exp_max = 0.0

    def backoff_ms(self, attempts: int, rng: random.Random | None = None) -> float:
        if self._exp_max == 0.0:
            term = self.initial_ms
        else:
            term = self.initial_ms * self.multiplier ** min(float(attempts), self._exp_max)
        if self.jitter:
            rand = (rng or CLIENT_RANDOM).random()
            term *= (1 - self.jitter) + rand * 2 * self.jitter
        return term
