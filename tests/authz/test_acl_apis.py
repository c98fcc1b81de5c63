"""CreateAcls, DescribeAcls and DeleteAcls at every version over a real SASL connection, who
may call them, their durability across a restart, and the authorize calls of other APIs."""

from __future__ import annotations

import logging
import uuid

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.authz.conftest import start_acl_broker
from tests.authz.wire_login import any_filter, creation, describe_all, login
from tests.wire import RawClient
from trio_broker.broker.security.acl_store import AclStore
from trio_broker.broker.security.client_quotas import ClientQuotas
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch
from trio_broker.testing import ThreadedBroker

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
LITERAL, PREFIXED, MATCH = 3, 4, 2
ALLOW, DENY = 3, 2


def test_every_version_is_advertised():
    for key in (ApiKey.DescribeAcls, ApiKey.CreateAcls, ApiKey.DeleteAcls):
        assert (SUPPORTED_VERSIONS[key].min, SUPPORTED_VERSIONS[key].max) == (0, 3)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_create_describe_delete_at_each_version(acl_broker: ThreadedBroker, version: int):
    admin = await login(acl_broker, "admin")
    name = f"v{version}"
    created = await admin.request(ApiKey.CreateAcls, version, creations=[
        creation(version, TOPIC, name, "User:alice", READ),
        creation(version, GROUP, name, "User:bob", READ, DENY, host="10.0.0.1"),
        creation(version, TOPIC, name, "alice", READ),  # no principal type
        creation(version, CLUSTER, "not-the-cluster", "User:alice", ALTER),
    ])
    assert [r.error_code for r in created.results] == [0, 0, ErrorCode.INVALID_REQUEST,
                                                      ErrorCode.INVALID_REQUEST]
    described = await admin.request(ApiKey.DescribeAcls, version,
                                    **any_filter(version, resource_name_filter=name))
    found = sorted((r.resource_type, r.resource_name, a.principal, a.host, a.operation,
                    a.permission_type) for r in described.resources for a in r.acls)
    assert found == [(TOPIC, name, "User:alice", "*", READ, ALLOW),
                     (GROUP, name, "User:bob", "10.0.0.1", READ, DENY)]
    if version >= 1:
        assert {r.pattern_type for r in described.resources} == {LITERAL}
    deleted = await admin.request(ApiKey.DeleteAcls, version, filters=[
        request_class(ApiKey.DeleteAcls).DeleteAclsFilter(
            **any_filter(version, resource_type_filter=TOPIC, resource_name_filter=name)),
        request_class(ApiKey.DeleteAcls).DeleteAclsFilter(
            **any_filter(version, resource_type_filter=0))])
    first, invalid = deleted.filter_results
    assert [(m.resource_name, m.principal) for m in first.matching_acls] == [
        (name, "User:alice")]
    assert invalid.error_code == ErrorCode.INVALID_REQUEST
    remaining = await admin.request(ApiKey.DescribeAcls, version,
                                    **any_filter(version, resource_name_filter=name))
    assert [r.resource_type for r in remaining.resources] == [GROUP]


async def test_prefixed_acls_and_match_filters(acl_broker: ThreadedBroker):
    admin = await login(acl_broker, "admin")
    created = await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, TOPIC, "pre-", "User:alice", WRITE, pattern=PREFIXED),
        creation(3, TOPIC, "pre-x", "User:alice", READ),
        creation(3, TOPIC, "pre-y", "User:alice", READ, pattern=MATCH)])  # not storable
    assert [r.error_code for r in created.results] == [0, 0, ErrorCode.INVALID_REQUEST]
    matching = await admin.request(ApiKey.DescribeAcls, 3, **any_filter(
        3, resource_type_filter=TOPIC, resource_name_filter="pre-x", pattern_type_filter=MATCH))
    assert sorted((r.resource_name, r.pattern_type) for r in matching.resources) == [
        ("pre-", PREFIXED), ("pre-x", LITERAL)]


async def test_only_allowed_principals_may_list_or_change_acls(acl_broker: ThreadedBroker):
    bob = await login(acl_broker, "bob")
    described = await bob.request(ApiKey.DescribeAcls, 3, **any_filter(3))
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert described.resources == []
    created = await bob.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, CLUSTER, "kafka-cluster", "User:bob", ALTER)])
    assert [r.error_code for r in created.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    deleted = await bob.request(ApiKey.DeleteAcls, 3, filters=[
        request_class(ApiKey.DeleteAcls).DeleteAclsFilter(**any_filter(3))])
    assert [r.error_code for r in deleted.filter_results] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    # ALTER on the cluster is what it takes (DESCRIBE is implied for listing)
    admin = await login(acl_broker, "admin")
    await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, CLUSTER, "kafka-cluster", "User:carol", ALTER)])
    assert any(acl[3] == "User:carol" for acl in await describe_all(admin))


async def test_without_an_authorizer_the_acl_apis_say_security_disabled(trio_broker):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    described = await client.request(ApiKey.DescribeAcls, 1, **any_filter(1))
    assert described.error_code == ErrorCode.SECURITY_DISABLED
    created = await client.request(ApiKey.CreateAcls, 1, creations=[
        creation(1, TOPIC, "t", "User:a", READ)])
    assert created.results[0].error_code == ErrorCode.SECURITY_DISABLED


def test_acls_survive_a_restart(tmp_path, acl_users):
    async def add() -> None:
        admin = await login(broker, "admin")
        answer = await admin.request(ApiKey.CreateAcls, 3, creations=[
            creation(3, TOPIC, "kept", "User:alice", READ)])
        assert answer.results[0].error_code == 0

    async def listed() -> list[tuple[object, ...]]:
        return await describe_all(await login(broker, "admin"))

    broker = start_acl_broker(tmp_path / "data", acl_users)
    try:
        trio.run(add)
    finally:
        broker.stop()
    broker = start_acl_broker(tmp_path / "data", acl_users)
    try:
        assert trio.run(listed) == [(TOPIC, "kept", LITERAL, "User:alice", "*", READ, ALLOW)]
    finally:
        broker.stop()


# --- authorize calls of the data and admin APIs, at the wire -------------------------------

async def test_handlers_refuse_with_kafkas_codes(acl_broker: ThreadedBroker, caplog):
    caplog.set_level(logging.INFO, logger="trio_broker.authorizer")
    admin = await login(acl_broker, "admin")
    topic = request_class(ApiKey.CreateTopics).CreatableTopic
    made = await admin.request(ApiKey.CreateTopics, 5, timeout_ms=5000, validate_only=False,
                               topics=[topic(name="secret", num_partitions=1,
                                             replication_factor=1, assignments=[], configs=[])])
    assert made.topics[0].error_code == 0
    bob = await login(acl_broker, "bob")
    # CreateTopics per topic; DeleteTopics; ListOffsets; Fetch; DescribeConfigs
    made = await bob.request(ApiKey.CreateTopics, 5, timeout_ms=5000, validate_only=False,
                             topics=[topic(name="bobs", num_partitions=1, replication_factor=1,
                                           assignments=[], configs=[])])
    assert made.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    gone = await bob.request(ApiKey.DeleteTopics, 4, topic_names=["secret"], timeout_ms=5000)
    assert gone.responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    lo = request_class(ApiKey.ListOffsets)
    offsets = await bob.request(ApiKey.ListOffsets, 5, replica_id=-1, isolation_level=0,
                                topics=[lo.ListOffsetsTopic(name="secret", partitions=[
                                    lo.ListOffsetsTopic.ListOffsetsPartition(
                                        partition_index=0, current_leader_epoch=-1,
                                        timestamp=-1)])])
    assert offsets.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    dc = request_class(ApiKey.DescribeConfigs).DescribeConfigsResource
    configs = await bob.request(ApiKey.DescribeConfigs, 3, include_synonyms=False,
                                include_documentation=False, resources=[
                                    dc(resource_type=2, resource_name="secret",
                                       configuration_keys=None),
                                    dc(resource_type=4, resource_name="",
                                       configuration_keys=None)])
    assert [r.error_code for r in configs.results] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                       ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    pid = await bob.request(ApiKey.InitProducerId, 4, transactional_id="tx",
                            transaction_timeout_ms=10000, producer_id=-1, producer_epoch=-1)
    assert pid.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    pid = await bob.request(ApiKey.InitProducerId, 4, transactional_id=None,
                            transaction_timeout_ms=10000, producer_id=-1, producer_epoch=-1)
    assert pid.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    found = await bob.request(ApiKey.FindCoordinator, 4, key_type=1, coordinator_keys=["tx"])
    assert found.coordinators[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    scram = await bob.request(ApiKey.DescribeUserScramCredentials, 0, users=None)
    assert scram.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    metadata = await bob.request(ApiKey.Metadata, 12, topics=None,
                                 allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=True)
    assert [t.name for t in metadata.topics] == []
    secret_id = acl_broker.broker.state.logs.topic_id("secret")
    by_id = await bob.request(ApiKey.Metadata, 12, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False, topics=[
                                  request_class(ApiKey.Metadata).MetadataRequestTopic(
                                      name=None, topic_id=secret_id)])
    [hidden] = by_id.topics
    assert (hidden.error_code, hidden.name) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    # a produce with a transactional id bob may not write is refused whole
    batch = build_batch([(None, b"v")])
    produced = await bob.request(ApiKey.Produce, 9, transactional_id="tx", acks=1,
                                 timeout_ms=5000, topic_data=[
                                     request_class(ApiKey.Produce).TopicProduceData(
                                         name="secret", partition_data=[
                                             request_class(ApiKey.Produce).TopicProduceData
                                             .PartitionProduceData(index=0, records=batch)])])
    assert produced.responses[0].partition_responses[0].error_code == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    assert ("Principal = User:bob is Denied operation = DELETE from host = 127.0.0.1 on "
            "resource = TOPIC:LITERAL:secret") in caplog.text


async def test_authorized_operations_are_the_principals(acl_broker: ThreadedBroker):
    admin = await login(acl_broker, "admin")
    await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, TOPIC, "ops", "User:alice", WRITE)])
    alice = await login(acl_broker, "alice")
    metadata = await alice.request(ApiKey.Metadata, 10, topics=None,
                                   allow_auto_topic_creation=False,
                                   include_cluster_authorized_operations=True,
                                   include_topic_authorized_operations=True)
    assert metadata.authorized_operations == set()
    # the topic "ops" does not exist: asked by name, alice may see it is unknown
    named = await alice.request(
        ApiKey.Metadata, 10, allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False, include_topic_authorized_operations=True,
        topics=[request_class(ApiKey.Metadata).MetadataRequestTopic(name="ops")])
    assert named.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# --- a principal without ALTER on the cluster never changes the stored ACLs ----------------

_name = st.text(alphabet="ab*-_.", min_size=0, max_size=4)
_small = st.integers(min_value=-1, max_value=16)
_creation = st.builds(lambda t, n, pat, pr, h, op, perm: creation(
    3, t, n, pr, op, perm, pattern=pat, host=h), _small, _name, _small,
    st.sampled_from(["User:bob", "User:*", "User:admin", "", "x"]),
    st.sampled_from(["*", "127.0.0.1", ""]), _small, _small)
_filter = st.builds(lambda t, n, pat, pr, op, perm: request_class(
    ApiKey.DeleteAcls).DeleteAclsFilter(**any_filter(
        3, resource_type_filter=t, resource_name_filter=n, pattern_type_filter=pat,
        principal_filter=pr, operation=op, permission_type=perm)),
    _small, st.none() | _name, _small, st.none() | st.just("User:alice"), _small, _small)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests=st.lists(st.tuples(st.booleans(), st.lists(_creation, max_size=3),
                                   st.lists(_filter, max_size=3)), min_size=1, max_size=4))
def test_unauthorized_acl_requests_never_change_the_acls(acl_broker: ThreadedBroker, requests):
    async def run() -> None:
        admin = await login(acl_broker, "admin")
        before = await describe_all(admin)
        stored = (acl_broker.broker.state.authorizer.path.read_bytes()
                  if acl_broker.broker.state.authorizer.path.exists() else b"")
        bob = await login(acl_broker, "bob")
        for create, creations, filters in requests:
            if create:
                answer = await bob.request(ApiKey.CreateAcls, 3, creations=creations)
                assert {r.error_code for r in answer.results} <= {
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
            else:
                answer = await bob.request(ApiKey.DeleteAcls, 3, filters=filters)
                assert all(r.matching_acls == [] for r in answer.filter_results)
        assert await describe_all(admin) == before
        path = acl_broker.broker.state.authorizer.path
        assert (path.read_bytes() if path.exists() else b"") == stored

    trio.run(run)


async def test_group_apis_refuse_and_filter(acl_broker: ThreadedBroker):
    admin = await login(acl_broker, "admin")
    topic = request_class(ApiKey.CreateTopics).CreatableTopic
    for name in ("gt-shown", "gt-hidden"):
        await admin.request(ApiKey.CreateTopics, 5, timeout_ms=5000, validate_only=False,
                            topics=[topic(name=name, num_partitions=1, replication_factor=1,
                                          assignments=[], configs=[])])
    await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, GROUP, "gg", "User:alice", READ),
        creation(3, TOPIC, "gt-shown", "User:alice", READ)])
    oc = request_class(ApiKey.OffsetCommit).OffsetCommitRequestTopic

    def commit_body(*names: str) -> dict[str, object]:
        return {"group_id": "gg", "generation_id_or_member_epoch": -1, "member_id": "",
                "topics": [oc(name=n, partitions=[oc.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_metadata=None)])
                    for n in names]}

    # admin commits for both topics (offsets alice then may or may not see)
    done = await admin.request(ApiKey.OffsetCommit, 8, **commit_body("gt-shown", "gt-hidden"))
    assert {p.error_code for t in done.topics for p in t.partitions} == {0}
    bob, alice = await login(acl_broker, "bob"), await login(acl_broker, "alice")
    refused = await bob.request(ApiKey.OffsetCommit, 8, **commit_body("gt-shown"))
    assert refused.topics[0].partitions[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    mixed = await alice.request(ApiKey.OffsetCommit, 8, **commit_body("gt-shown", "gt-hidden"))
    assert [t.partitions[0].error_code for t in mixed.topics] == [
        0, ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    # OffsetFetch of every topic leaves out what alice may not describe
    of = request_class(ApiKey.OffsetFetch)
    fetched = await alice.request(ApiKey.OffsetFetch, 8, require_stable=False, groups=[
        of.OffsetFetchRequestGroup(group_id="gg", topics=None)])
    assert [t.name for t in fetched.groups[0].topics] == ["gt-shown"]
    fetched = await bob.request(ApiKey.OffsetFetch, 8, require_stable=False, groups=[
        of.OffsetFetchRequestGroup(group_id="gg", topics=None)])
    assert fetched.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    described = await bob.request(ApiKey.DescribeGroups, 5, groups=["gg"],
                                  include_authorized_operations=True)
    assert described.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    described = await alice.request(ApiKey.DescribeGroups, 5, groups=["gg"],
                                    include_authorized_operations=True)
    assert described.groups[0].error_code == 0
    assert described.groups[0].authorized_operations == {READ, DESCRIBE}
    listed = await bob.request(ApiKey.ListGroups, 4, states_filter=[])
    assert "gg" not in [g.group_id for g in listed.groups]
    listed = await alice.request(ApiKey.ListGroups, 4, states_filter=[])
    assert "gg" in [g.group_id for g in listed.groups]
    deleted = await alice.request(ApiKey.DeleteGroups, 2, groups_names=["gg"])
    assert deleted.results[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED  # READ only


async def test_offsets_by_topic_id_check_the_group_then_the_id_then_the_topic(
        acl_broker: ThreadedBroker):
    """OffsetCommit / OffsetFetch v10: Kafka's KafkaApis authorizes the group first, then
    resolves each id (UNKNOWN_TOPIC_ID has no name to authorize), then authorizes the topic."""
    admin = await login(acl_broker, "admin")
    topic = request_class(ApiKey.CreateTopics).CreatableTopic
    for name in ("id-shown", "id-hidden"):
        await admin.request(ApiKey.CreateTopics, 5, timeout_ms=5000, validate_only=False,
                            topics=[topic(name=name, num_partitions=1, replication_factor=1,
                                          assignments=[], configs=[])])
    await admin.request(ApiKey.CreateAcls, 3, creations=[
        creation(3, GROUP, "gid", "User:alice", READ),
        creation(3, TOPIC, "id-shown", "User:alice", READ)])
    logs = acl_broker.broker.state.logs
    shown, hidden, stranger = logs.topic_id("id-shown"), logs.topic_id("id-hidden"), uuid.uuid4()
    oc = request_class(ApiKey.OffsetCommit).OffsetCommitRequestTopic

    def commit_body(*ids: uuid.UUID) -> dict[str, object]:
        return {"group_id": "gid", "topics": [oc(topic_id=i, partitions=[
            oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                            committed_metadata=None)]) for i in ids]}

    bob, alice = await login(acl_broker, "bob"), await login(acl_broker, "alice")
    refused = await bob.request(ApiKey.OffsetCommit, 10, **commit_body(stranger, shown))
    assert [(t.topic_id, t.partitions[0].error_code) for t in refused.topics] == [
        (stranger, ErrorCode.GROUP_AUTHORIZATION_FAILED),
        (shown, ErrorCode.GROUP_AUTHORIZATION_FAILED)]
    mixed = await alice.request(ApiKey.OffsetCommit, 10, **commit_body(stranger, hidden, shown))
    assert [(t.topic_id, t.partitions[0].error_code) for t in mixed.topics] == [
        (stranger, ErrorCode.UNKNOWN_TOPIC_ID), (hidden, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        (shown, 0)]
    group = request_class(ApiKey.OffsetFetch).OffsetFetchRequestGroup
    fetched = await alice.request(ApiKey.OffsetFetch, 10, require_stable=False, groups=[
        group(group_id="gid", topics=[
            group.OffsetFetchRequestTopics(topic_id=i, partition_indexes=[0])
            for i in (stranger, hidden, shown)])])
    assert [(t.topic_id, t.partitions[0].committed_offset, t.partitions[0].error_code)
            for t in fetched.groups[0].topics] == [
        (hidden, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED), (shown, 1, 0),
        (stranger, -1, ErrorCode.UNKNOWN_TOPIC_ID)]


# --- random ACL and quota requests from a principal that may change them -------------------

_text = st.text(max_size=6)
_i8 = st.integers(min_value=-128, max_value=127)
_any_creation = st.builds(lambda t, n, pat, pr, h, op, perm: creation(
    3, t, n, pr, op, perm, pattern=pat, host=h), _i8, _text, _i8, _text, _text, _i8, _i8)
_any_filter = st.builds(lambda t, n, pat, pr, h, op, perm: request_class(
    ApiKey.DeleteAcls).DeleteAclsFilter(**any_filter(
        3, resource_type_filter=t, resource_name_filter=n, pattern_type_filter=pat,
        principal_filter=pr, host_filter=h, operation=op, permission_type=perm)),
    _i8, st.none() | _text, _i8, st.none() | _text, st.none() | _text, _i8, _i8)
_QA = request_class(ApiKey.AlterClientQuotas).EntryData
_QD = request_class(ApiKey.DescribeClientQuotas).ComponentData
_quota_entry = st.builds(lambda entity, ops: _QA(
    entity=[_QA.EntityData(entity_type=t, entity_name=n) for t, n in entity],
    ops=[_QA.OpData(key=k, value=v, remove=r) for k, v, r in ops]),
    st.lists(st.tuples(st.sampled_from(["user", "client-id", "ip", "x", ""]),
                       st.none() | _text), max_size=3),
    st.lists(st.tuples(st.sampled_from(["producer_byte_rate", "request_percentage",
                                        "connection_creation_rate", "y"]),
                       st.floats(width=32), st.booleans()), max_size=3))
_component = st.builds(lambda t, m, n: _QD(entity_type=t, match_type=m, match=n),
                       st.sampled_from(["user", "client-id", "ip", "z"]), _i8,
                       st.none() | _text)
_request = st.one_of(
    st.builds(lambda c: (ApiKey.CreateAcls, {"creations": c}), st.lists(_any_creation,
                                                                          max_size=3)),
    st.builds(lambda f: (ApiKey.DeleteAcls, {"filters": f}), st.lists(_any_filter, max_size=2)),
    st.builds(lambda f: (ApiKey.DescribeAcls, {"resource_type_filter": f.resource_type_filter,
                                               "resource_name_filter": f.resource_name_filter,
                                               "pattern_type_filter": f.pattern_type_filter,
                                               "principal_filter": f.principal_filter,
                                               "host_filter": f.host_filter,
                                               "operation": f.operation,
                                               "permission_type": f.permission_type}),
              _any_filter),
    st.builds(lambda e, v: (ApiKey.AlterClientQuotas, {"entries": e, "validate_only": v}),
              st.lists(_quota_entry, max_size=3), st.booleans()),
    st.builds(lambda c, s: (ApiKey.DescribeClientQuotas, {"components": c, "strict": s}),
              st.lists(_component, max_size=3), st.booleans()))


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory, acl_users):
    """A broker of its own: admin's random requests may delete any ACL."""
    broker = start_acl_broker(tmp_path_factory.mktemp("acl-fuzz"), acl_users)
    yield broker
    broker.stop()


@settings(max_examples=40, deadline=None)
@given(requests=st.lists(_request, min_size=1, max_size=5))
def test_random_acl_and_quota_requests_are_answered_and_stored_consistently(
        fuzz_broker: ThreadedBroker, requests):
    broker = fuzz_broker

    async def run() -> None:
        admin = await login(broker, "admin")
        for api, fields in requests:
            answer = await admin.request(api, 1 if api in (ApiKey.AlterClientQuotas,
                                                           ApiKey.DescribeClientQuotas) else 3,
                                         **fields)
            assert answer is not None
        # what is on disk is what is in force
        state = broker.broker.state
        assert AclStore(state.authorizer.path).acls == state.authorizer.acls
        assert ClientQuotas(state.quotas.path).entries() == state.quotas.entries()

    trio.run(run)


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_group_membership_refused_at_every_layout(acl_broker: ThreadedBroker, version):
    bob = await login(acl_broker, "bob")
    left = await bob.request(ApiKey.LeaveGroup, version, group_id="gm", member_id="m",
                             members=[])
    assert left.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    beat = await bob.request(ApiKey.Heartbeat, min(version, 4), group_id="gm",
                             generation_id=1, member_id="m")
    assert beat.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    jg = request_class(ApiKey.JoinGroup).JoinGroupRequestProtocol
    joined = await bob.request(ApiKey.JoinGroup, version, group_id="gm", session_timeout_ms=6000,
                               rebalance_timeout_ms=6000, member_id="", protocol_type="consumer",
                               protocols=[jg(name="range", metadata=b"")])
    assert joined.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    synced = await bob.request(ApiKey.SyncGroup, version, group_id="gm", generation_id=1,
                               member_id="m", protocol_type="consumer", protocol_name="range",
                               assignments=[])
    assert synced.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
