"""v2 consumer instances: each one a real consumer-group member (the project's Trio consumer,
classic group protocol) living in the proxy's nursery until deleted or idle too long.

Why a task per instance: the consumer's heartbeats, fetches and commits run between HTTP
requests, as they would in Confluent's proxy, so the group sees a member that stays until the
instance is deleted or expires. An instance untouched for ``consumer.instance.timeout.ms`` is
closed (it leaves its group at once, so the group rebalances without waiting for its session
to time out). Requests to one instance run one at a time; ``MAX_INSTANCES`` bounds how many
consumers HTTP clients can make the broker hold.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import attrs
import trio

from ...client.trio.config import CONSUMER_DEFAULTS, normalize
from ...client.trio.consumer.consumer import Consumer, open_consumer
from .errors import RestError

LOGGER = logging.getLogger("trio_broker.broker.rest_proxy")

MAX_INSTANCES = 256
#: how long a delete waits for the consumer to leave its group (its LeaveGroup's own bound)
LEAVE_WAIT_S = 10.0
#: the embedded formats of v2 consumers; the schema formats read through the Schema Registry
SCHEMA_FORMATS = ("avro", "protobuf", "jsonschema")
FORMATS = ("binary", "json", *SCHEMA_FORMATS)
#: a v2 instance's settings -> the consumer config keys they set
SETTINGS = {"auto.offset.reset": "auto.offset.reset", "auto.commit.enable": "enable.auto.commit",
            "fetch.min.bytes": "fetch.min.bytes"}


@attrs.define(eq=False)
class Instance:
    group: str
    name: str
    #: the user who made it (basic authentication), None without
    owner: str | None
    fmt: str
    consumer: Consumer
    #: how long a records request waits for the first record without ``timeout`` (ms)
    request_timeout_ms: int
    scope: trio.CancelScope
    last_used: float = attrs.field(factory=trio.current_time)
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    #: set once the consumer has left its group and closed
    closed: trio.Event = attrs.field(factory=trio.Event)

    def close(self) -> None:
        self.scope.cancel()


class Instances:
    """The proxy's consumer instances, by (group, name)."""

    def __init__(self, timeout_ms: int, nursery: trio.Nursery) -> None:
        self.timeout_s = timeout_ms / 1000
        self._nursery = nursery
        self._by_key: dict[tuple[str, str], Instance] = {}

    async def create(self, group: str, spec: dict[str, Any], client_config: dict[str, Any],
                     owner: str | None, *, schemas: bool = False) -> Instance:
        """A new instance whose consumer connects with ``client_config`` (the bootstrap
        servers and security of the proxy's client, or of the logged-in ``owner``'s)."""
        name = spec.get("name")
        if name is None or name == "":
            name = f"rest-consumer-{uuid.uuid4()}"
        if not isinstance(name, str):
            raise RestError(422, 42204, "name must be a string")
        if (group, name) in self._by_key:
            raise RestError(409, 40902, "Consumer instance with the specified name already "
                                        "exists.")
        if len(self._by_key) >= MAX_INSTANCES:
            raise RestError(429, 429, f"{MAX_INSTANCES} consumer instances exist; delete one "
                                      "first")
        given = spec.get("format")
        if given is not None and not isinstance(given, str):
            raise RestError(422, 42204, "Invalid consumer configuration: format must be a "
                                        "string")
        fmt = (given or "binary").lower()
        if fmt not in FORMATS or (fmt in SCHEMA_FORMATS and not schemas):
            raise RestError(422, 42204, f"Invalid consumer configuration: format {fmt!r}: "
                                        "one of binary, json" + (
                                            ", avro, protobuf, jsonschema" if schemas else
                                            " (the schema formats need the Schema Registry: "
                                            "set schema.registry.listener)"))
        config: dict[str, Any] = {**client_config, "group.id": group, "client.id": name,
                                  "group.protocol": "classic"}
        for key in ("request.timeout.ms", "default.api.timeout.ms"):
            config.pop(key, None)
        try:
            for field, key in SETTINGS.items():
                if field in spec:  # null included: Confluent's settings are strings
                    config[key] = _setting(key, spec[field])
            request_timeout_ms = int(spec.get("consumer.request.timeout.ms") or 1000)
            normalized = normalize("consumer", CONSUMER_DEFAULTS, config, {})
            Consumer(normalized)  # its checks (auto.offset.reset), before a task is started
        except (ValueError, TypeError) as exc:
            raise RestError(422, 42204, f"Invalid consumer configuration: {exc}") from None

        async def hold(task_status: trio.TaskStatus[Instance]) -> None:
            closed = trio.Event()
            try:
                with trio.CancelScope() as scope:
                    async with open_consumer(config=normalized) as consumer:
                        task_status.started(Instance(group, name, owner, fmt, consumer,
                                                     request_timeout_ms, scope, closed=closed))
                        await trio.sleep_forever()
            finally:
                closed.set()

        instance: Instance = await self._nursery.start(hold)
        self._by_key[(group, name)] = instance
        return instance

    def get(self, group: str, name: str, owner: str | None) -> Instance:
        """The instance, if it exists and ``owner`` made it (another user's is not found)."""
        instance = self._by_key.get((group, name))
        if instance is None or instance.owner != owner:
            raise RestError(404, 40403, "Consumer instance not found.")
        instance.last_used = trio.current_time()
        return instance

    async def delete(self, group: str, name: str, owner: str | None) -> None:
        """Close the instance; returns once it has left its group."""
        self.get(group, name, owner)
        instance = self._by_key.pop((group, name))
        instance.close()
        with trio.move_on_after(LEAVE_WAIT_S):
            await instance.closed.wait()

    async def expire_loop(self) -> None:
        while True:
            await trio.sleep(min(1.0, self.timeout_s / 2))
            deadline = trio.current_time() - self.timeout_s
            for key, instance in list(self._by_key.items()):
                if instance.last_used < deadline and not instance.lock.locked():
                    del self._by_key[key]
                    LOGGER.info("REST proxy: consumer instance %s of group %s expired",
                                instance.name, instance.group)
                    instance.close()

    def close_all(self) -> None:
        for instance in self._by_key.values():
            instance.close()
        self._by_key.clear()


def _setting(key: str, value: Any) -> Any:
    if value is None:
        raise ValueError(f"{key} may not be null")
    if key == "enable.auto.commit":
        if isinstance(value, bool):
            return value
        if str(value).lower() not in ("true", "false"):  # Kafka's boolean parser's rule
            raise ValueError(f"auto.commit.enable {value!r}: expected true or false")
        return str(value).lower() == "true"
    if key == "fetch.min.bytes":
        return int(value)
    return str(value)
