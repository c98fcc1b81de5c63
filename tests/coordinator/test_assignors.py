"""The server-side assignors (``uniform``, ``range``) as pure functions: balance, stickiness,
eligibility, and Kafka's documented range layouts."""

from __future__ import annotations

import random
import uuid

import pytest

from trio_broker.broker.coordinator.assignors import MemberSpec, RangeAssignor, UniformAssignor
from trio_broker.broker.coordinator.consumer_group import assignment_of

T1, T2, T3 = (uuid.UUID(int=n) for n in (1, 2, 3))


def _flat(assignment) -> set:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def _spec(topics, assignment=None, instance=None) -> MemberSpec:
    return MemberSpec(instance, frozenset(topics), assignment or {})


def _check_cover(result, partitions) -> None:
    owned = [tp for a in result.values() for tp in _flat(a)]
    assert len(owned) == len(set(owned))
    assert set(owned) == {(t, p) for t, n in partitions.items() for p in range(n)}


@pytest.mark.parametrize("members", [1, 2, 3, 5, 7, 13])
def test_uniform_homogeneous_is_balanced(members):
    partitions = {T1: 12, T2: 5}
    specs = {f"m{i}": _spec({T1, T2}) for i in range(members)}
    result = UniformAssignor().assign(specs, True, partitions)
    _check_cover(result, partitions)
    sizes = [len(_flat(a)) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1


def test_uniform_homogeneous_is_sticky_when_a_member_joins():
    partitions = {T1: 12}
    first = UniformAssignor().assign({m: _spec({T1}) for m in ("a", "b", "c")}, True,
                                     partitions)
    specs = {m: _spec({T1}, a) for m, a in first.items()} | {"d": _spec({T1})}
    second = UniformAssignor().assign(specs, True, partitions)
    _check_cover(second, partitions)
    # Each old member gives up exactly one partition, to the newcomer; nothing else moves.
    for m in ("a", "b", "c"):
        assert _flat(second[m]) <= _flat(first[m])
        assert len(_flat(second[m])) == 3
    assert len(_flat(second["d"])) == 3


def test_uniform_heterogeneous_respects_subscriptions_and_balances():
    partitions = {T1: 6, T2: 6, T3: 2}
    specs = {"a": _spec({T1}), "b": _spec({T1, T2}), "c": _spec({T2, T3}), "d": _spec({T3})}
    result = UniformAssignor().assign(specs, False, partitions)
    _check_cover(result, partitions)
    for m, spec in specs.items():
        assert {t for t, _ in _flat(result[m])} <= spec.topics
    sizes = sorted(len(_flat(a)) for a in result.values())
    assert sizes[-1] - sizes[0] <= 3  # d can only ever hold T3's two partitions


def test_uniform_heterogeneous_keeps_what_it_can():
    rng = random.Random(7)
    partitions = {T1: 8, T2: 4}
    specs = {"a": _spec({T1, T2}), "b": _spec({T1}), "c": _spec({T1, T2})}
    first = UniformAssignor().assign(specs, False, partitions)
    specs = {m: _spec(s.topics, first[m]) for m, s in specs.items()}
    again = UniformAssignor().assign(specs, False, partitions)
    assert again == first  # nothing changed, nothing moves
    del specs[rng.choice(sorted(specs))]
    third = UniformAssignor().assign(specs, False, partitions)
    _check_cover(third, partitions)
    for m in specs:
        assert _flat(first[m]) <= _flat(third[m])  # survivors only gain


def test_range_co_partitions_kafkas_example():
    """Kafka's RangeAssignor javadoc: two members, two topics of three partitions."""
    specs = {"M0": _spec({T1, T2}), "M1": _spec({T1, T2})}
    result = RangeAssignor().assign(specs, True, {T1: 3, T2: 3})
    assert result["M0"] == assignment_of([(T1, [0, 1]), (T2, [0, 1])])
    assert result["M1"] == assignment_of([(T1, [2]), (T2, [2])])


def test_range_orders_static_members_first_by_instance_id():
    specs = {"zz": _spec({T1}, instance="i-1"), "aa": _spec({T1}), "mm": _spec({T1},
                                                                              instance="i-0")}
    result = RangeAssignor().assign(specs, True, {T1: 6})
    assert _flat(result["mm"]) == {(T1, 0), (T1, 1)}
    assert _flat(result["zz"]) == {(T1, 2), (T1, 3)}
    assert _flat(result["aa"]) == {(T1, 4), (T1, 5)}


def test_range_heterogeneous_counts_subscribers_per_topic():
    specs = {"a": _spec({T1, T2}), "b": _spec({T1})}
    result = RangeAssignor().assign(specs, False, {T1: 4, T2: 3})
    assert result["a"] == assignment_of([(T1, [0, 1]), (T2, [0, 1, 2])])
    assert result["b"] == assignment_of([(T1, [2, 3])])


def test_no_members_no_assignment():
    assert UniformAssignor().assign({}, True, {T1: 3}) == {}
    assert RangeAssignor().assign({}, True, {T1: 3}) == {}
