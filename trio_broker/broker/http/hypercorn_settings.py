"""The Hypercorn settings every HTTP face of the broker shares (the console, the Schema Registry,
the REST proxy).

Why one place: each serves under Trio with the same bounds (keep-alive, a request header's size,
a quick graceful stop) and keeps Hypercorn's own lines out of the broker's output; a face adds
only what is its own (TLS, a read timeout).
"""

from __future__ import annotations

import logging

from hypercorn.config import Config as HypercornConfig

from ..config import BrokerConfig, ConfigError


def quiet_server_logger(name: str) -> logging.Logger:
    """Hypercorn's logger for one face: its own lines ("Running on ... (CTRL + C to quit)") are
    not the broker's to print, so WARNING unless the user set a level."""
    logger = logging.getLogger(name)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    return logger


def hypercorn_config(host: str, port: int, errorlog: logging.Logger) -> HypercornConfig:
    """Hypercorn bound to ``host:port`` (IPv6 in brackets), no access log, no server header."""
    config = HypercornConfig()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = errorlog
    config.include_server_header = False
    config.graceful_timeout = 1.0
    config.keep_alive_timeout = 30.0
    config.h11_max_incomplete_size = 16 * 1024
    return config


def serve_tls(config: HypercornConfig, broker: BrokerConfig, key: str, scheme: str) -> None:
    """An ``https://`` face presents the broker's own certificate (``ssl.certfile``,
    ``ssl.keyfile``, ``ssl.key.password``), as the console does; without one the start fails
    naming ``key``."""
    if scheme != "https":
        return
    if not broker.ssl_certfile:
        raise ConfigError(f"{key}=https://... needs ssl.certfile (the certificate it presents)",
                          key)
    config.certfile = broker.ssl_certfile
    config.keyfile = broker.ssl_keyfile or broker.ssl_certfile
    config.keyfile_password = broker.ssl_key_password or None

