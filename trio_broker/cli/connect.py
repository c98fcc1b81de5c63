"""How a client command reaches a cluster: its address, its TLS/SASL settings, the one client.

Why one place: every client command takes the same options and turns the client's errors into
the CLI's the same way. A malformed address or setting is bad input (exit 2); whatever the client
reports at run time is a failure (exit 1).

Settings use the client core's Kafka client keys (``security.protocol``, ``ssl.ca.location``,
``sasl.mechanism``, ``sasl.username``, ...): from ``--command-config FILE`` (a ``.properties``
or ``.toml`` file, as Kafka's tools take one), then ``-X KEY=VALUE`` (as kcat takes them), which
wins. A ``SSL://`` or ``SASL_SSL://`` prefix on ``--bootstrap-server`` sets the protocol too.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..broker.config import ConfigError as FileConfigError
from ..broker.config.loader import read_config_entries
from ..client.blocking import (
    DEFAULT_BOOTSTRAP,
    BlockingClient,
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_name,
)
from .base import CommandError, UsageError

CLIENT_ID = "trio-broker-console"


def add_client_arguments(parser: argparse.ArgumentParser, *,
                         what: str = "broker(s) to connect to", config_alias: str | None = None,
                         property_alias: str | None = None) -> None:
    """``--bootstrap-server``, ``--command-config`` and ``-X``; the aliases are the names
    Kafka's console tools give the same options (``--producer.config``,
    ``--consumer-property``)."""
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"{what} (default {DEFAULT_BOOTSTRAP})")
    add_client_config_arguments(parser, config_alias=config_alias,
                                property_alias=property_alias)


def add_client_config_arguments(parser: argparse.ArgumentParser, *,
                                config_alias: str | None = None,
                                property_alias: str | None = None) -> None:
    """``--command-config`` and ``-X``: the client settings."""
    parser.add_argument("--command-config", *([config_alias] if config_alias else []),
                        dest="command_config", metavar="FILE",
                        help="client settings (security.protocol, ssl.*, sasl.*) from a "
                             ".properties or .toml file")
    parser.add_argument("-X", *([property_alias] if property_alias else []),
                        dest="client_config", action="append", default=[],
                        metavar="KEY=VALUE", help="a client setting, e.g. "
                        "-X sasl.mechanism=SCRAM-SHA-256 (repeatable; wins over the file)")


def add_topic_argument(parser: argparse.ArgumentParser) -> None:
    """``TOPIC`` or Kafka's ``--topic TOPIC``."""
    parser.add_argument("topic", nargs="?", metavar="TOPIC")
    parser.add_argument("--topic", dest="topic_option", metavar="TOPIC",
                        help="the topic (as Kafka's tools take it; same as TOPIC)")


def topic_of(args: argparse.Namespace) -> str:
    if args.topic and args.topic_option and args.topic != args.topic_option:
        raise UsageError(f"two topics given: {args.topic!r} and --topic {args.topic_option!r}")
    topic = args.topic or args.topic_option
    if not topic:
        raise UsageError("a topic is required (TOPIC or --topic TOPIC)")
    return str(topic)


def client_config(args: argparse.Namespace) -> dict[str, Any]:
    """The client settings ``--command-config`` and ``-X`` give (the client checks the keys)."""
    return {key: value for key, (value, _) in client_settings(args).items()}


def client_settings(args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
    """{key: (value, where it was set)}: ``file:line`` of ``--command-config`` or ``-X``."""
    config: dict[str, tuple[Any, str]] = {}
    if args.command_config:
        try:
            entries = read_config_entries(args.command_config)
        except FileConfigError as exc:
            raise UsageError(f"--command-config: {exc}") from None
        config.update((key, (value, origin)) for key, value, origin in entries)
    for item in args.client_config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-X {item!r}: expected KEY=VALUE")
        config[key.strip()] = (value.strip(), f"-X {key.strip()}")
    return config


def settings_error(message: str, settings: dict[str, tuple[Any, str]]) -> str:
    """``message`` with where the key it is about was set (``client.properties:3: ...``)."""
    named = [key for key in settings if key in message]
    if not named:
        return message
    key = min(named, key=message.find)  # the key the message names first
    return f"{settings[key][1]}: {message}"


@contextmanager
def client_errors() -> Iterator[None]:
    """The client's failures inside the block become ``CommandError`` (exit 1)."""
    try:
        yield
    except KafkaError as exc:
        raise CommandError(describe(exc)) from None


def describe(exc: KafkaError) -> str:
    """The error's message, naming the Kafka error code a broker answered if it does not yet
    (``topic 'x' does not exist (UNKNOWN_TOPIC_OR_PARTITION)``), so a user can look it up."""
    message = str(exc)
    if isinstance(exc, KafkaConnectionError | KafkaTimeoutError):  # the client's own
        return message
    name = error_name(exc.code)
    return message if name in message else f"{message} ({name})"


@contextmanager
def open_client(args: argparse.Namespace, *, timeout_s: float) -> Iterator[BlockingClient]:
    """A client of ``args.bootstrap_server``, closed on exit; its failures are CommandErrors."""
    settings = client_settings(args)
    try:
        client = BlockingClient(args.bootstrap_server, timeout_s=timeout_s, client_id=CLIENT_ID,
                                config={k: v for k, (v, _) in settings.items()})
    except ConfigError as exc:  # a malformed --bootstrap-server or setting
        raise UsageError(settings_error(str(exc), settings)) from None
    with client_errors(), client:
        yield client
