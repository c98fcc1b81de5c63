"""The classic consumer group's states and the only transitions allowed between them.

Why a table: a group coordinator is a state machine driven by six request types and three kinds
of timer, and almost every bug in one is a transition that should not happen (a SyncGroup that
completes a group that is already rebalancing again, a join that lands on a deleted group). Kafka
guards every transition with its list of valid previous states; so do we, in one table, and a
transition not in it raises ``IllegalStateTransition`` instead of silently corrupting a group.

    state                 reached from                              why
    Empty                 PreparingRebalance                        the join phase ended with no
                                                                    members (all left or expired)
    PreparingRebalance    Empty, CompletingRebalance, Stable         a member joined, left, changed
                                                                    its subscription or expired
    CompletingRebalance   PreparingRebalance                        every member rejoined (or the
                                                                    rebalance timeout dropped the
                                                                    rest): waiting for the leader's
                                                                    assignment in SyncGroup
    Stable                CompletingRebalance                       the leader's SyncGroup arrived
    Dead                  Empty, PreparingRebalance,                DeleteGroups, or an empty group
                          CompletingRebalance, Stable, Dead         whose last offsets expired

A new group starts in Empty (created by its first JoinGroup or by a simple commit).
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    """Kafka's names, as DescribeGroups reports them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_S = GroupState

#: target state -> the states it may be entered from (see the module docstring for why)
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.EMPTY, _S.COMPLETING_REBALANCE, _S.STABLE}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.EMPTY, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.STABLE,
                        _S.DEAD}),
}


class IllegalStateTransition(RuntimeError):
    """A transition not in ``VALID_PREVIOUS_STATES``: a coordinator bug, never a client error."""


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Raise ``IllegalStateTransition`` unless ``current -> target`` is in the table."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(
            f"group {group_id!r}: illegal transition {current} -> {target}")
