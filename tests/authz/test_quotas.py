"""Client quotas: Kafka's entity resolution, the token bucket, the quota file, and
DescribeClientQuotas / AlterClientQuotas over the wire."""

from __future__ import annotations

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.authz.wire_login import login
from tests.wire import RawClient
from trio_broker.broker.security.client_quotas import (
    QUOTA_FILE,
    ClientQuotas,
    QuotaError,
    TokenBucket,
    validate,
)
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker

P = "producer_byte_rate"
_A = request_class(ApiKey.AlterClientQuotas).EntryData
_D = request_class(ApiKey.DescribeClientQuotas).ComponentData


def _entity(**names: str | None) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted((k.replace("_", "-"), v) for k, v in names.items()))


def test_kafkas_eight_levels_in_order(tmp_path):
    quotas = ClientQuotas(tmp_path / QUOTA_FILE)
    levels = [_entity(user="alice", client_id="app"), _entity(user="alice", client_id=None),
              _entity(user="alice"), _entity(user=None, client_id="app"),
              _entity(user=None, client_id=None), _entity(user=None),
              _entity(client_id="app"), _entity(client_id=None)]
    quotas.alter([(e, [(P, float(i + 1), False)]) for i, e in enumerate(levels)])
    tags = [("alice", "app"), ("alice", "app"), ("alice", ""), ("alice", "app"),
            ("alice", "app"), ("alice", ""), ("", "app"), ("", "app")]
    for i, entity in enumerate(levels):
        assert quotas.quota(P, "alice", "app") == (float(i + 1), *tags[i])
        quotas.alter([(entity, [(P, 0.0, True)])])  # remove it: the next level applies
    assert quotas.quota(P, "alice", "app") is None
    assert not quotas.enabled


def test_anonymous_and_other_keys(tmp_path):
    quotas = ClientQuotas(tmp_path / QUOTA_FILE)
    quotas.alter([(_entity(user="bob"), [(P, 10.0, False)]),
                  (_entity(user=None), [("consumer_byte_rate", 20.0, False)])])
    assert quotas.quota(P, "alice", "x") is None
    assert quotas.quota("consumer_byte_rate", None, "x") == (20.0, "ANONYMOUS", "")
    assert quotas.quota(P, "bob", "x") == (10.0, "bob", "")


def test_the_bucket_lets_the_first_burst_through_then_holds_the_rate():
    bucket = TokenBucket(1000.0, 11, now_ms=0)
    assert bucket.record(11_000, 0) == 0  # the burst: 11 windows' worth
    assert bucket.record(500, 0) == 500  # 500 bytes over at 1000/s: half a second
    assert bucket.record(0, 500) == 0
    assert bucket.record(1000, 500) == 1000
    assert bucket.record(-1000, 500) == 0  # given back (a throttled fetch)


@pytest.mark.parametrize(("entity", "ops"), [
    ((), [(P, 1.0, False)]),
    (_entity(user="a"), [("no_such_quota", 1.0, False)]),
    (_entity(user="a"), [(P, 0.0, False)]),
    (_entity(user="a"), [(P, 1.5, False)]),
    (_entity(user="a"), [(P, float("nan"), False)]),
    ((("ip", "1.2.3.4"), ("user", "a")), [("connection_creation_rate", 1.0, False)]),
    ((("group", "g"),), [(P, 1.0, False)]),
])
def test_entries_kafka_refuses(entity, ops):
    with pytest.raises(QuotaError):
        validate(entity, ops)


def test_the_quota_file_survives(tmp_path):
    ClientQuotas(tmp_path / QUOTA_FILE).alter([
        (_entity(user="alice", client_id=None), [(P, 1024.0, False),
                                                 ("request_percentage", 50.0, False)])])
    again = ClientQuotas(tmp_path / QUOTA_FILE)
    assert again.entries() == {_entity(user="alice", client_id=None): {
        P: 1024.0, "request_percentage": 50.0}}
    assert [p.name for p in tmp_path.iterdir()] == [QUOTA_FILE]


# --- over the wire ----------------------------------------------------------------------------

def test_every_version_is_advertised():
    for key in (ApiKey.DescribeClientQuotas, ApiKey.AlterClientQuotas):
        assert (SUPPORTED_VERSIONS[key].min, SUPPORTED_VERSIONS[key].max) == (0, 1)


def _alter_entry(ops: list[tuple[str, float, bool]], **names: str | None):
    return _A(entity=[_A.EntityData(entity_type=t, entity_name=n)
                      for t, n in _entity(**names)],
              ops=[_A.OpData(key=k, value=v, remove=r) for k, v, r in ops])


@pytest.mark.parametrize("version", [0, 1])
async def test_alter_and_describe(trio_broker, version):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    answer = await client.request(ApiKey.AlterClientQuotas, version, validate_only=False, entries=[
        _alter_entry([(P, 1024.0, False)], user="alice"),
        _alter_entry([(P, 2048.0, False)], user="alice", client_id=None),
        _alter_entry([("consumer_byte_rate", 4096.0, False)], client_id="app"),
        _alter_entry([("bogus", 1.0, False)], client_id="x")])
    assert [e.error_code for e in answer.entries] == [0, 0, 0, ErrorCode.INVALID_REQUEST]
    checked = await client.request(ApiKey.AlterClientQuotas, version, validate_only=True,
                                   entries=[_alter_entry([(P, 1.0, False)], user="zed")])
    assert checked.entries[0].error_code == 0

    async def described(strict: bool, *components) -> list[tuple[object, ...]]:
        answer = await client.request(ApiKey.DescribeClientQuotas, version, strict=strict,
                                      components=list(components))
        assert answer.error_code == 0, answer
        return sorted([(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                        tuple((v.key, v.value) for v in entry.values))
                       for entry in answer.entries], key=repr)

    assert await described(False, _D(entity_type="user", match_type=0, match="alice")) == [
        ((("client-id", None), ("user", "alice")), ((P, 2048.0),)),
        ((("user", "alice"),), ((P, 1024.0),))]  # (sorted by repr)
    assert await described(True, _D(entity_type="user", match_type=0, match="alice")) == [
        ((("user", "alice"),), ((P, 1024.0),))]
    assert await described(False, _D(entity_type="client-id", match_type=1, match=None)) == [
        ((("client-id", None), ("user", "alice")), ((P, 2048.0),))]
    assert [e for e, _ in await described(False, _D(entity_type="client-id", match_type=2,
                                                     match=None))] == [(("client-id", "app"),)]
    assert ("user", "zed") not in [e for entry, _ in await described(False) for e in entry]
    bad = await client.request(ApiKey.DescribeClientQuotas, version, strict=False, components=[
        _D(entity_type="user", match_type=1, match=None),
        _D(entity_type="user", match_type=2, match=None)])
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    removed = await client.request(ApiKey.AlterClientQuotas, version, validate_only=False,
                                   entries=[_alter_entry([(P, 0.0, True)], user="alice")])
    assert removed.entries[0].error_code == 0
    assert ("user", "alice") not in [e for entry, _ in await described(True, _D(
        entity_type="user", match_type=2, match=None)) for e in entry]


_op = st.tuples(st.sampled_from([P, "consumer_byte_rate", "request_percentage", "x"]),
                st.floats(allow_nan=True, allow_infinity=True, width=32), st.booleans())
_entry = st.builds(lambda ops, user, client: _alter_entry(ops, user=user, client_id=client),
                   st.lists(_op, max_size=3), st.none() | st.sampled_from(["bob", "alice"]),
                   st.none() | st.sampled_from(["app", ""]))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(_entry, min_size=1, max_size=4), validate_only=st.booleans())
def test_unauthorized_quota_requests_never_change_the_quotas(acl_broker: ThreadedBroker,
                                                              entries, validate_only):
    async def run() -> None:
        state = acl_broker.broker.state
        before = state.quotas.entries()
        stored = state.quotas.path.read_bytes() if state.quotas.path.exists() else b""
        bob = await login(acl_broker, "bob")
        answer = await bob.request(ApiKey.AlterClientQuotas, 1, validate_only=validate_only,
                                   entries=entries)
        assert {e.error_code for e in answer.entries} == {
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
        described = await bob.request(ApiKey.DescribeClientQuotas, 1, strict=False,
                                      components=[])
        assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert state.quotas.entries() == before
        assert (state.quotas.path.read_bytes() if state.quotas.path.exists() else b"") == stored

    trio.run(run)


async def test_request_percentage_throttles_and_mutes_the_connection(trio_broker):
    admin = await RawClient.connect(trio_broker.host, trio_broker.port)
    answer = await admin.request(ApiKey.AlterClientQuotas, 1, validate_only=False, entries=[
        _alter_entry([("request_percentage", 0.1, False)], client_id="busy")])
    assert answer.entries[0].error_code == 0
    busy = RawClient(await trio.open_tcp_stream(trio_broker.host, trio_broker.port),
                     client_id="busy")

    async def metadata(client: RawClient) -> int:
        answer = await client.request(ApiKey.Metadata, 12, topics=None,
                                      allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False)
        return answer.throttle_time_ms

    served = 0
    throttle = 0
    while not throttle and served < 2000:  # the burst: 11 windows of 0.1% handler time
        throttle = await metadata(busy)
        served += 1
    assert throttle > 0
    assert served > 1  # the first requests fit in the burst
    sent = trio.current_time()
    await metadata(busy)
    # the connection read nothing for the throttle time (Kafka's muted channel)
    assert trio.current_time() - sent >= throttle / 1000
    assert await metadata(admin) == 0  # another client id is not throttled
