"""``trio-broker serve``: run the broker until SIGINT or SIGTERM stops it gracefully."""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import signal
from collections.abc import Awaitable, Callable

from ..broker.config import BrokerConfig, ConfigError, describe_keys, load_config, parse_overrides
from ..broker.storage.meta_properties import MetaPropertiesError
from .base import CommandError, Tool, UsageError

LOGGER = logging.getLogger("trio_broker")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = _epilog()
    parser.add_argument("config_file", nargs="?", metavar="CONFIG_FILE",
                        help="server.properties or .toml file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a config key (repeatable; wins over file and environment)")
    parser.add_argument("--brokers", type=int, default=None, metavar="N",
                        help="run a test cluster of N brokers in this process (ports counted "
                        "up from the first listener's; control.listener=http://HOST:PORT "
                        "serves its fault controls; docs/testing.md)")
    parser.add_argument("--racks", default=None, metavar="A,B,...",
                        help="with --brokers: broker k's broker.rack is the k-th name (one per "
                        "broker; an empty name: no rack)")


def _epilog() -> str:
    rows = describe_keys(common_only=True)
    width = max(len(k) for k, _, _ in rows)
    lines = ["common config keys (Kafka names; see docs/configuration.md for all):"]
    lines += [f"  {k:<{width}}  {doc} (default: {d or 'unset'})" for k, d, doc in rows]
    lines.append("environment: TRIO_BROKER_<KEY>, e.g. TRIO_BROKER_LOG_DIRS=/var/lib/broker")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    # what a start builds (the broker's modules, its config, its logs' indexes) lives as long as
    # the broker: the cyclic collector waits until the start is over (docs/benchmarks.md)
    gc.disable()
    try:
        return _run_serve(args)
    finally:
        _collect_again()


def _collect_again() -> None:
    """The start is over: the collector runs again, and leaves what the start built out of its
    full collections."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _run_serve(args: argparse.Namespace) -> int:
    import trio

    try:
        config = load_config(args.config_file, overrides=parse_overrides(args.override))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    logging.basicConfig(level=config.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from ..broker.lifecycle import serve

    _warn_unserved(config, cluster=args.brokers is not None)
    if args.brokers is not None:
        if args.brokers < 1:
            raise UsageError(f"--brokers must be at least 1, not {args.brokers}")
        return _run(_serve_cluster_until_signalled(config, args.brokers, args.racks))
    if args.racks is not None:
        raise UsageError("--racks needs --brokers (one broker's rack is broker.rack)")

    async def serve_until_signalled() -> None:
        # Signals are caught from before the broker starts: one that arrives during start-up
        # waits in the receiver and then stops the broker gracefully like any other.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                broker = await nursery.start(serve, config)
                for name, host, port in broker.listeners:
                    print(f"trio-broker listening on {name}://{_fmt(host)}:{port}", flush=True)
                if broker.metrics_address:
                    h, p = broker.metrics_address
                    print(f"trio-broker metrics on http://{_fmt(h)}:{p}/metrics", flush=True)
                _collect_again()
                async for signum in signals:
                    LOGGER.info("received %s, shutting down", signal.Signals(signum).name)
                    broker.stop()
                    break

    return _run(serve_until_signalled)


#: HTTP endpoints one mode of ``serve`` does not have: (key, mode without it, where it is)
_UNSERVED = (("control.listener", False, "only a test cluster (serve --brokers N) has it"),
             ("http.listener", True, "a test cluster serves no web console"),
             ("metrics.listener", True, "a test cluster serves no metrics endpoint"))


def _warn_unserved(config: BrokerConfig, *, cluster: bool) -> None:
    """One warning line for each endpoint set where this mode of ``serve`` has none."""
    for key, missing_in_cluster, why in _UNSERVED:
        if missing_in_cluster == cluster and config.value_of(key):
            LOGGER.warning("%s=%s is not served: %s", key, config.value_of(key), why)


def _run(main: Callable[[], Awaitable[None]]) -> int:
    import trio

    try:
        trio.run(main)
    except BaseExceptionGroup as group:
        first = _first_leaf(group)
        if isinstance(first, KeyboardInterrupt):
            raise first from None
        if isinstance(first, ConfigError):
            raise UsageError(str(first)) from None
        if isinstance(first, (OSError, MetaPropertiesError)):
            raise CommandError(f"cannot start: {first}") from None
        raise
    return 0


def _serve_cluster_until_signalled(config: BrokerConfig, brokers: int,
                                   racks: str | None = None) -> Callable[[], Awaitable[None]]:
    async def main() -> None:
        import trio

        from ..testing import serve_cluster

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                cluster = await nursery.start(functools.partial(
                    serve_cluster, config, brokers=brokers, racks=racks))
                for b in cluster.brokers:
                    rack = f" (rack {b.rack})" if b.rack else ""
                    print(f"trio-broker broker {b.node_id} listening on "
                          f"{_fmt(b.host)}:{b.port}{rack}", flush=True)
                if cluster.control_address:
                    h, p = cluster.control_address
                    print(f"trio-broker cluster control on http://{_fmt(h)}:{p}/", flush=True)
                _collect_again()
                async for signum in signals:
                    LOGGER.info("received %s, shutting down", signal.Signals(signum).name)
                    cluster.stop()
                    break

    return main


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _fmt(host: str) -> str:
    return f"[{host}]" if ":" in host else host


SERVE = Tool(add_arguments, run)
