"""Positions for assigned partitions that have none: the group's committed offset, else
``auto.offset.reset`` (Kafka's ``OffsetFetcher``), in a task of the consumer's nursery.

Why a task of its own: the lookups (OffsetFetch to the coordinator, ListOffsets to leaders) can
take a while and must be retried, but the application keeps consuming the partitions that do
have positions meanwhile. A seek or a rebalance while a lookup is out moves the partition's
epoch, and an answer for an older epoch is dropped.
"""

from __future__ import annotations

import logging

import trio

from ...core.errors import (
    KafkaError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from ...core.offsets import READ_UNCOMMITTED
from ...core.structs import EARLIEST, LATEST, OffsetAndMetadata, TopicPartition
from ..network import NetworkClient, Wakeup
from ..offsets import list_offsets
from .committed_offsets import fetch_committed
from .coordinator_lookup import CoordinatorLookup
from .fetcher import Fetcher
from .subscription_state import PartitionState, SubscriptionState

LOGGER = logging.getLogger(__name__)

_RESETS = {"earliest": EARLIEST, "latest": LATEST}


class PositionResolver:
    """Finds positions for partitions without one (see the module docstring)."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState,
                 fetcher: Fetcher, coordinator: CoordinatorLookup | None, *,
                 reset_policy: str, api_timeout_s: float,
                 isolation_level: int = READ_UNCOMMITTED) -> None:
        self._client = client
        self._isolation_level = isolation_level
        self._subs = subscriptions
        self._fetcher = fetcher
        self._coordinator = coordinator
        self._reset_policy = reset_policy
        self._api_timeout_s = api_timeout_s
        self.wakeup = Wakeup()
        #: set (and replaced) after every lookup round
        self.positions_changed = trio.Event()
        #: lookups that failed for good, raised to the application by the consumer
        self.errors: list[KafkaError] = []

    def after_seek(self, state: PartitionState) -> None:
        """Forget what was buffered or handed out of ``state``'s partition (its epoch moved)."""
        self._fetcher.invalidate(state)
        self._subs.forget_handed_out(state.tp)

    def reset(self, states: list[PartitionState], strategy: str) -> None:
        for state in states:
            state.request_reset(strategy)
            self.after_seek(state)
        self.wakeup.set()

    def on_out_of_range(self, state: PartitionState) -> None:
        if self._reset_policy == "none":
            state.error = OffsetOutOfRangeError(
                f"{state.tp.topic}-{state.tp.partition}: offset {state.fetch_offset} is out of "
                "range and auto.offset.reset=none")
            self._fetcher.data_ready.set()
            return
        state.request_reset(self._reset_policy)
        self.after_seek(state)
        self.wakeup.set()

    async def run(self) -> None:
        attempts = 0
        while True:
            pending = [s for s in self._subs.states.values()
                       if s.position is None and s.reset is not None and s.error is None]
            if not pending:
                await self.wakeup.wait()
                continue
            try:
                await self._initialize_positions(pending)
                attempts = 0
            except KafkaError as exc:
                if not exc.retriable:
                    self.errors.append(exc)
                    self._fetcher.data_ready.set()
                LOGGER.info("looking up offsets failed: %r", exc)
                await trio.sleep(self._client.retry_backoff.backoff_ms(attempts) / 1000)
                attempts += 1
            except trio.TooSlowError:
                attempts += 1
            finally:
                self.positions_changed.set()
                self.positions_changed = trio.Event()

    async def _initialize_positions(self, pending: list[PartitionState]) -> None:
        epochs = {state.tp: state.epoch for state in pending}

        def current(state: PartitionState) -> bool:
            return (self._subs.states.get(state.tp) is state
                    and state.epoch == epochs[state.tp] and state.position is None)

        need_committed = [s for s in pending if s.reset == "committed"]
        if need_committed:
            committed: dict[TopicPartition, OffsetAndMetadata] = {}
            if self._coordinator is not None:
                committed = await fetch_committed(
                    self._coordinator, self._client, [s.tp for s in need_committed],
                    timeout_s=self._api_timeout_s)
            for state in need_committed:
                if not current(state):
                    continue
                if state.tp in committed:
                    state.seek(committed[state.tp].offset)
                    epochs[state.tp] = state.epoch
                    self._subs.consumed[state.tp] = committed[state.tp].offset
                elif self._reset_policy == "none":
                    state.error = NoOffsetForPartitionError(
                        f"{state.tp.topic}-{state.tp.partition} has no committed offset and "
                        "auto.offset.reset=none")
                    self._fetcher.data_ready.set()
                else:
                    state.reset = self._reset_policy
        to_reset = {s.tp: _RESETS[s.reset] for s in pending
                    if current(s) and s.reset in _RESETS}
        if to_reset:
            found = await list_offsets(self._client, to_reset, timeout_s=self._api_timeout_s,
                                       isolation_level=self._isolation_level)
            for state in pending:
                if state.tp in found and current(state):
                    state.seek(found[state.tp].offset)
                    self._subs.consumed[state.tp] = found[state.tp].offset
        self._fetcher.wakeup()


__all__ = ["PositionResolver"]
