"""ACLs seen through real clients: SCRAM users alice and bob on one broker with the authorizer.

alice may write and read topic ``a`` and read group ``g``; bob may only read topic ``b`` (so
his consumer reaches the group check). Every client, as bob, gets TOPIC_AUTHORIZATION_FAILED
producing to ``a``, does not see ``a`` in Metadata and gets GROUP_AUTHORIZATION_FAILED on
``g``; as alice it produces and consumes through the group. An ACL created at run time judges
the next request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.authz.conftest import MECHANISM
from tests.security_files import password
from trio_broker.testing import ThreadedBroker

A, B, G = "a", "b", "g"


def _confluent_conf(broker: ThreadedBroker, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM, "sasl.username": user, "sasl.password": password(user)}


def _python_conf(broker: ThreadedBroker, user: str) -> dict[str, Any]:
    return {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": MECHANISM, "sasl_plain_username": user,
            "sasl_plain_password": password(user), "request_timeout_ms": 5000}


def _acl(resource_type: Any, name: str, user: str, operation: Any) -> Any:
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType

    return AclBinding(resource_type, name, ResourcePatternType.LITERAL, f"User:{user}", "*",
                      operation, AclPermissionType.ALLOW)


def _grant(broker: ThreadedBroker, *acls: Any) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_confluent_conf(broker, "admin"))
    for future in admin.create_acls(list(acls)).values():
        assert future.result(10) is None


@pytest.fixture(scope="module")
def granted(acl_broker: ThreadedBroker) -> Iterator[ThreadedBroker]:
    from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

    admin = AdminClient(_confluent_conf(acl_broker, "admin"))
    for future in admin.create_topics([NewTopic(A, 1, 1), NewTopic(B, 1, 1)]).values():
        assert future.result(10) is None
    _grant(acl_broker,
           _acl(ResourceType.TOPIC, A, "alice", AclOperation.WRITE),
           _acl(ResourceType.TOPIC, A, "alice", AclOperation.READ),
           _acl(ResourceType.GROUP, G, "alice", AclOperation.READ),
           _acl(ResourceType.TOPIC, B, "bob", AclOperation.READ))
    return acl_broker


# --- one function per client: (produce error or None, topics seen, group error or None,
#     values consumed through group g)

def _confluent(broker: ThreadedBroker, user: str) -> tuple[Any, set[str], Any, list[bytes]]:
    import confluent_kafka

    conf = _confluent_conf(broker, user)
    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 3000})
    delivered: list[Any] = []
    producer.produce(A, b"confluent", on_delivery=lambda e, m: delivered.append(e))
    producer.flush(6)
    produce_error = delivered[0].code() if delivered and delivered[0] is not None else None
    topics = set(producer.list_topics(timeout=5).topics)
    consumer = confluent_kafka.Consumer({**conf, "group.id": G, "auto.offset.reset": "earliest",
                                         "fetch.wait.max.ms": 10})
    consumer.subscribe([A if user == "alice" else B])
    group_error, values = None, []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and group_error is None and not values:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            group_error = message.error().code()
        else:
            values.append(message.value())
    consumer.close()
    return produce_error, topics, group_error, values


def _kafka_python(broker: ThreadedBroker, user: str) -> tuple[Any, set[str], Any, list[bytes]]:
    import kafka
    import kafka.errors

    conf = _python_conf(broker, user)
    producer = kafka.KafkaProducer(max_block_ms=4000, **conf)
    produce_error = None
    try:
        producer.send(A, b"kafka-python").get(6)
    except kafka.errors.KafkaError as exc:
        produce_error = getattr(exc, "errno", exc)
    producer.close()
    consumer = kafka.KafkaConsumer(group_id=G, auto_offset_reset="earliest", **conf)
    topics = consumer.topics()
    consumer.subscribe([A if user == "alice" else B])
    group_error, values = None, []
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline and not values:
            values = [m.value for ms in consumer.poll(200).values() for m in ms]
    except kafka.errors.KafkaError as exc:
        group_error = getattr(exc, "errno", exc)
    consumer.close()
    return produce_error, set(topics), group_error, values


def _aiokafka(broker: ThreadedBroker, user: str) -> tuple[Any, set[str], Any, list[bytes]]:
    import aiokafka
    import aiokafka.errors

    conf = _python_conf(broker, user)

    async def run() -> tuple[Any, set[str], Any, list[bytes]]:
        producer = aiokafka.AIOKafkaProducer(**conf)
        produce_error = None
        await producer.start()
        try:
            await asyncio.wait_for(producer.send_and_wait(A, b"aiokafka"), 10)
        except aiokafka.errors.KafkaError as exc:
            produce_error = getattr(exc, "errno", exc)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(A if user == "alice" else B, group_id=G,
                                             auto_offset_reset="earliest", **conf)
        group_error, values, topics = None, [], set()
        try:
            await consumer.start()
            topics = set(await consumer.topics())
            batch = await consumer.getmany(timeout_ms=5000)
            values = [m.value for ms in batch.values() for m in ms]
        except aiokafka.errors.KafkaError as exc:
            group_error = getattr(exc, "errno", exc)
        finally:
            await consumer.stop()
        return produce_error, topics, group_error, values

    return asyncio.run(run())


CLIENTS = {"confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30


@pytest.mark.parametrize("client", list(CLIENTS))
def test_bob_is_refused_and_alice_is_served(granted, client):
    produce_error, topics, group_error, values = CLIENTS[client](granted, "bob")
    assert produce_error == TOPIC_AUTHORIZATION_FAILED
    assert A not in topics
    assert group_error == GROUP_AUTHORIZATION_FAILED
    assert values == []

    produce_error, topics, group_error, values = CLIENTS[client](granted, "alice")
    assert (produce_error, group_error) == (None, None)
    assert A in topics
    assert B not in topics
    assert values  # read through group g


def test_an_acl_created_at_run_time_judges_the_next_request(granted):
    """bob's producer is refused; once admin grants bob WRITE on ``a`` (over the wire), a new
    request on the same client is served, without a restart."""
    import kafka
    import kafka.errors
    from confluent_kafka.admin import AclOperation, ResourceType

    # (no idempotence: InitProducerId without WRITE on any topic is refused, fatally)
    producer = kafka.KafkaProducer(max_block_ms=4000, enable_idempotence=False,
                                   **_python_conf(granted, "bob"))
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send(A, b"before").get(6)
        _grant(granted, _acl(ResourceType.TOPIC, A, "bob", AclOperation.WRITE))
        metadata = producer.send(A, b"after").get(6)
        assert metadata.offset >= 0
    finally:
        producer.close()


def test_kafka_python_admin_manages_acls(granted):
    import kafka.errors
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    admin = KafkaAdminClient(**_python_conf(granted, "admin"))
    try:
        pattern = ResourcePattern(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
        acl = ACL("User:kp", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
        created = admin.create_acls([acl])
        assert created["failed"] == []
        found, error = admin.describe_acls(ACLFilter(
            "User:kp", None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)))
        assert error is kafka.errors.NoError
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:kp", ACLOperation.READ, "kp-")]
        deleted = admin.delete_acls([ACLFilter(
            "User:kp", None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))])
        [(_, matched, failure)] = deleted
        assert failure is kafka.errors.NoError
        assert [m.principal for m in matched] == ["User:kp"]
    finally:
        admin.close()


def test_confluent_admin_describes_and_deletes_acls(granted):
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(_confluent_conf(granted, "admin"))
    _grant(granted, _acl(ResourceType.GROUP, "cf-group", "cf", AclOperation.READ))
    mine = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:cf", None,
                            AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(mine).result(10)
    assert [(b.name, b.operation) for b in found] == [("cf-group", AclOperation.READ)]
    deleted = admin.delete_acls([mine])[mine].result(10)
    assert [b.name for b in deleted] == ["cf-group"]
    assert admin.describe_acls(mine).result(10) == []
