"""The transition table and the consumer-protocol payload codec."""

from __future__ import annotations

import itertools

import pytest

from trio_broker.broker.coordinator.group import Group
from trio_broker.broker.coordinator.states import (
    VALID_PREVIOUS_STATES,
    GroupState,
    IllegalStateTransition,
)
from trio_broker.protocol.consumer_protocol import (
    PayloadError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

S = GroupState
LEGAL = {
    (S.EMPTY, S.PREPARING_REBALANCE), (S.PREPARING_REBALANCE, S.EMPTY),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE), (S.COMPLETING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE), (S.STABLE, S.PREPARING_REBALANCE),
    *((s, S.DEAD) for s in S),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_only_table_transitions_are_allowed(current, target):
    group = Group("g", state=current)
    if (current, target) in LEGAL:
        group.transition_to(target, 1)
        assert (group.state, group.state_since_ms) == (target, 1)
    else:
        with pytest.raises(IllegalStateTransition, match=f"{current} -> {target}"):
            group.transition_to(target, 1)
        assert group.state is current


def test_table_covers_every_state():
    assert set(VALID_PREVIOUS_STATES) == set(S)


def test_reference_vectors():
    # Subscription v0 ["t"] and assignment v0 t: [0, 1], both with empty user data.
    sub = bytes.fromhex("0000" "00000001" "000174" "00000000")
    asg = bytes.fromhex("0000" "00000001" "000174" "00000002" "00000000" "00000001" "00000000")
    assert encode_subscription(["t"]) == sub
    assert encode_assignment({"t": [0, 1]}) == asg
    assert decode_subscription(sub).topics == ["t"]
    assert decode_assignment(asg).partitions == {"t": [0, 1]}


def test_newer_subscription_versions_decode():
    # v3 as librdkafka sends it: owned partitions, generation, rack.
    v3 = (bytes.fromhex("0003" "00000002" "000161" "000162" "ffffffff"
                        "00000001" "000161" "00000001" "00000004" "00000007" "0004")
          + b"rack")
    sub = decode_subscription(v3)
    assert (sub.version, sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id,
            sub.rack_id) == (3, ["a", "b"], None, {"a": [4]}, 7, "rack")


def test_empty_assignment_and_garbage():
    assert decode_assignment(b"").partitions == {}
    with pytest.raises(PayloadError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x05\x00")
