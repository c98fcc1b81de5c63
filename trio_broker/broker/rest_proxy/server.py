"""Run the REST proxy in the broker's nursery: Hypercorn's Trio worker serving a Starlette app,
as the web console is served (``broker.http.server`` says why this stack).

The proxy's Kafka client connects to the broker's first PLAINTEXT listener, at the address it
advertises there, as any client would. Its connections open at the first request, so a broker
with the proxy on starts as fast as one without.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from ...client.trio.admin import Admin
from ...client.trio.config import ADMIN_DEFAULTS, normalize
from ..config import BrokerConfig, ConfigError, parse_http_listener
from ..http.guard import HostCheck
from ..http.hypercorn_settings import hypercorn_config, quiet_server_logger, serve_tls
from ..http.request_metrics import REST_PROXY, CountRequests, HttpMetrics
from ..server.state import BrokerState
from .app import Cors, build_app
from .auth import BasicAuth, credentials
from .instances import Instances
from .proxy import MAX_BODY_BYTES, RestProxy
from .schema_records import RecordSchemas

if TYPE_CHECKING:
    from ..schema_registry.registry import SchemaRegistry

#: where the console's listener serves the proxy with ``kafka.rest.enable`` (Confluent Server's)
MOUNT_PREFIX = "/kafka"
LOGGER = logging.getLogger("trio_broker.broker.rest_proxy")
_SERVER_LOGGER = quiet_server_logger("trio_broker.broker.rest_proxy.hypercorn")


def _hypercorn_config(host: str, port: int, broker: BrokerConfig, scheme: str,
                      ) -> HypercornConfig:
    config = hypercorn_config(host, port, _SERVER_LOGGER)
    serve_tls(config, broker, "rest.proxy.listener", scheme)
    # a client that sends nothing for this long is closed: a request trickled in slowly holds
    # a connection for a bounded time (a records long poll waits at most 30 s, a produce
    # stream's own idle bound is 30 s)
    config.read_timeout = 60
    return config


#: SASL mechanisms basic authentication logs in with, in order of preference: PLAIN checks any
#: stored user (whichever SCRAM credential they have)
_MECHANISMS = ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")
AUTHENTICATION_METHODS = ("NONE", "BASIC")


def _endpoint(config: BrokerConfig, state: BrokerState, protocol: str) -> str | None:
    for listener in config.listener_list:
        if listener.security_protocol == protocol:
            host, port = state.endpoints[listener.name]
            return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return None


def client_config(config: BrokerConfig, state: BrokerState,
                  ) -> Callable[[str | None, str | None], dict[str, Any]]:
    """(user, password) -> the config of a client of the proxy: to the first PLAINTEXT
    listener, or with basic authentication the first SASL_PLAINTEXT one as that user."""
    method = config.rest_proxy_authentication_method.strip().upper()
    if method not in AUTHENTICATION_METHODS:
        raise ConfigError(f"rest.proxy.authentication.method={method!r}: one of "
                          + ", ".join(AUTHENTICATION_METHODS), "rest.proxy.authentication.method")
    base = {"request.timeout.ms": 30_000, "default.api.timeout.ms": 30_000,
            "reconnect.backoff.max.ms": 1000}
    if method == "NONE":
        bootstrap = _endpoint(config, state, "PLAINTEXT")
        if bootstrap is None:
            raise ConfigError("rest.proxy.listener: the REST proxy's client connects to a "
                              "PLAINTEXT listener, and the broker has none (with "
                              "rest.proxy.authentication.method=BASIC, to a SASL_PLAINTEXT "
                              "one)", "rest.proxy.listener")
        return lambda user, password: {"bootstrap.servers": bootstrap,
                                       "client.id": "trio-broker-rest-proxy", **base}
    sasl_bootstrap = _endpoint(config, state, "SASL_PLAINTEXT")
    enabled = {m.strip().upper() for m in config.sasl_enabled_mechanisms.split(",")}
    mechanism = next((m for m in _MECHANISMS if m in enabled), None)
    if sasl_bootstrap is None or mechanism is None:
        raise ConfigError("rest.proxy.authentication.method=BASIC logs users in to a "
                          "SASL_PLAINTEXT listener with PLAIN or SCRAM, and the broker has none",
                          "rest.proxy.authentication.method")
    return lambda user, password: {
        "bootstrap.servers": sasl_bootstrap, "client.id": f"trio-broker-rest-proxy-{user}",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
        "sasl.username": user, "sasl.password": password, **base}


def _address(bind: str) -> tuple[str, int]:
    rest = bind.split("://", 1)[1]
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)


async def run_rest_proxy(config: BrokerConfig, state: BrokerState, *,
                         registry: SchemaRegistry | None = None,
                         task_status: trio.TaskStatus[tuple[str, int] | None]
                         = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the REST proxy until cancelled; reports its bound (host, port), None when it has
    no listener of its own (only the console's ``/kafka``). With
    ``registry`` (the broker's Schema Registry), records may be written with schemas."""
    schemas = None if registry is None else RecordSchemas(registry)
    configs = client_config(config, state)
    basic = config.rest_proxy_authentication_method.strip().upper() == "BASIC"
    allowed = [h for h in config.http_allowed_hosts.split(",") if h]
    async with trio.open_nursery() as nursery:
        instances = Instances(config.consumer_instance_timeout_ms, nursery)
        nursery.start_soon(instances.expire_loop)
        shared: RestProxy | None = None
        auth = BasicAuth(lambda u, p: configs(u, p), nursery)
        if basic:
            nursery.start_soon(auth.expire_loop)
        else:
            admin = Admin(normalize("admin", ADMIN_DEFAULTS, configs(None, None), {}))
            admin.client.start(nursery)
            shared = RestProxy(admin, config.node_id, state.cluster_id, instances,
                               configs(None, None), schemas=schemas)

        async def resolve(authorization: str | None) -> RestProxy:
            if shared is not None:
                return shared
            user, password = credentials(authorization)
            session = await auth.login(user, password)
            return RestProxy(session.admin, config.node_id, state.cluster_id, instances,
                             configs(user, password), user, schemas=schemas)

        metrics = HttpMetrics(REST_PROXY)
        state.metrics.add_collector(metrics.collect)
        # an ASGI 3 callable; Hypercorn's are narrower
        cors = Cors.from_config(config.rest_proxy_access_control_allow_origin,
                                config.rest_proxy_access_control_allow_methods,
                                config.rest_proxy_access_control_allow_headers)

        def app_for(host: str) -> Any:  # an ASGI 3 callable; Hypercorn's are narrower
            return CountRequests(build_app(resolve, HostCheck(host, allowed), cors), metrics)

        if config.kafka_rest_enable and config.http_listener:
            console_host = parse_http_listener(config.http_listener)[1]
            state.http_mounts[MOUNT_PREFIX] = app_for(console_host)
            LOGGER.info("REST proxy also under %s of the web console's listener",
                        MOUNT_PREFIX)
        try:
            bound = None
            if config.rest_proxy_listener:
                scheme, host, port = parse_http_listener(config.rest_proxy_listener,
                                                         "rest.proxy.listener")
                binds: list[str] = await nursery.start(functools.partial(
                    serve, app_for(host), _hypercorn_config(host, port, config, scheme),
                    mode="asgi"))
                bound = _address(binds[0])
                LOGGER.info("REST proxy on %s://%s:%d/v3/clusters (%s; bodies up to %d bytes)",
                            scheme, f"[{bound[0]}]" if ":" in bound[0] else bound[0],
                            bound[1], "basic authentication as the broker's SASL users"
                            if basic else "no authentication", MAX_BODY_BYTES)
            task_status.started(bound)
            await trio.sleep_forever()
        finally:
            if config.kafka_rest_enable and config.http_listener:
                state.http_mounts.pop(MOUNT_PREFIX, None)
            instances.close_all()
            if shared is not None:
                shared.admin.client.close()
            nursery.cancel_scope.cancel()
