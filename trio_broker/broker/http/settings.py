"""What the web console does under a broker's configuration: where it binds, whether it is on,
read-only, behind a login, and how its Kafka client reaches the broker.

Why decided here, once, from the config alone: the console is one more Kafka client of its own
broker. It connects to the address Metadata advertises (every client ends up there), with that
listener's security protocol, so it sees exactly what a client sees. A SASL listener means a
login page asking for the user's own credentials, so whatever a later authorizer decides for that
user applies to the console too. An SSL listener without SASL has no credentials to ask a user
for, so the console stays off there unless ``http.console.enabled=true`` says otherwise.
"""

from __future__ import annotations

import ssl
from typing import Any

import attrs

from ..config import BrokerConfig, ConfigError, parse_http_listener
from .guard import is_loopback as is_loopback

#: SASL mechanisms in the order the login page offers them: PLAIN first, because it logs in any
#: stored user (the broker checks it against whichever SCRAM credential the user has)
_MECHANISM_ORDER = ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")



@attrs.frozen
class ConsoleSettings:
    scheme: str
    host: str
    port: int
    #: None when on; else why it is off (one line for the log)
    off_reason: str | None
    read_only: bool
    #: the advertised listener's security protocol, which the console's client speaks
    security_protocol: str
    bootstrap: str
    #: SASL mechanisms a user may log in with (empty: no login)
    mechanisms: tuple[str, ...]
    #: TLS for the console's own client connections (SSL and SASL_SSL listeners)
    certfile: str = ""
    keyfile: str = ""
    key_password: str = ""
    cafile: str = ""
    client_auth: str = "none"
    #: the certificate the console's client presents (``http.console.ssl.*``): never the
    #: broker's own, whose principal every visitor of the console would otherwise act as
    client_certfile: str = ""
    client_keyfile: str = ""
    client_key_password: str = ""
    #: names the console answers to besides loopback and its own address (DNS rebinding guard)
    allowed_hosts: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return self.off_reason is None

    @property
    def login_required(self) -> bool:
        return bool(self.mechanisms)

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def client_config(self, username: str | None = None, password: str | None = None,
                      mechanism: str | None = None) -> dict[str, Any]:
        """The console's admin client config (Kafka's client keys)."""
        config: dict[str, Any] = {
            "client.id": "trio-broker-console", "security.protocol": self.security_protocol,
            "request.timeout.ms": 10_000, "default.api.timeout.ms": 10_000,
            "reconnect.backoff.max.ms": 1000, "socket.connection.setup.timeout.ms": 5000}
        if self.login_required:
            config.update({"sasl.mechanism": mechanism or self.mechanisms[0],
                           "sasl.username": username or "", "sasl.password": password or ""})
        return config

    def ssl_context(self) -> ssl.SSLContext | None:
        """TLS to the broker's own listener: trust exactly the certificate it serves.

        The console dials its own broker, so the certificate it must accept is the one in
        ``ssl.certfile`` (trusted as is, even when it is not self-signed: partial chains are
        allowed) or one signed by ``ssl.cafile``; the host name is not checked, since the address
        is the broker's own. When the listener asks for client certificates, the one in
        ``http.console.ssl.certfile`` is offered, if set.
        """
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.certfile or None)
        if self.cafile:
            context.load_verify_locations(cafile=self.cafile)
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        context.check_hostname = False
        if self.client_auth != "none" and self.client_certfile:
            context.load_cert_chain(self.client_certfile, self.client_keyfile or None,
                                    self.client_key_password or None)
        return context

    @property
    def presents_no_certificate(self) -> bool:
        """The listener asks for client certificates and the console has none to present."""
        return self.tls and self.client_auth != "none" and not self.client_certfile


def console_listener(config: BrokerConfig) -> str:
    """The name of the listener the console's client connects to: the first entry of
    ``advertised.listeners``, else the first listener."""
    return (config.advertised_listener_list or config.listener_list)[0].name


def console_settings(config: BrokerConfig, advertised: tuple[str, int]) -> ConsoleSettings:
    """The console's settings for a broker advertising ``advertised`` (host, port) on its
    ``console_listener``."""
    scheme, host, port = parse_http_listener(config.http_listener)
    name = console_listener(config)
    # advertised.listeners names only listeners of ``listeners``, each with its protocol
    protocol = next(x.security_protocol for x in config.listener_list if x.name == name)
    enabled = config.http_console_enabled
    off_reason = None
    if enabled is False:
        off_reason = "http.console.enabled=false"
    elif enabled is None and protocol == "SSL":
        off_reason = ("the advertised listener is SSL without SASL, so there are no credentials "
                      "to log in with; set http.console.enabled=true to serve it anyway")
    if scheme == "https" and not config.ssl_certfile:
        raise ConfigError(f"http.listener={config.http_listener!r} needs ssl.certfile",
                          "http.listener")
    read_only = config.http_console_read_only
    if read_only is None:
        read_only = not is_loopback(host)
    mechanisms: tuple[str, ...] = ()
    if protocol.startswith("SASL_"):
        enabled_mechanisms = {m.strip().upper() for m in config.sasl_enabled_mechanisms.split(",")}
        mechanisms = tuple(m for m in _MECHANISM_ORDER if m in enabled_mechanisms)
        if not mechanisms:
            off_reason = off_reason or ("no SASL mechanism the console can log in with is "
                                        "enabled (it logs in with PLAIN or SCRAM; OAUTHBEARER "
                                        "has no password to log in with)")
    adv_host, adv_port = advertised
    return ConsoleSettings(
        scheme=scheme, host=host, port=port, off_reason=off_reason, read_only=read_only,
        security_protocol=protocol, bootstrap=f"{_host_for_url(adv_host)}:{adv_port}",
        mechanisms=mechanisms, certfile=config.ssl_certfile, keyfile=config.ssl_keyfile,
        key_password=config.ssl_key_password or "", cafile=config.ssl_cafile,
        client_auth=str(config.ssl_client_auth or "none").lower(),
        client_certfile=config.http_console_ssl_certfile,
        client_keyfile=config.http_console_ssl_keyfile,
        client_key_password=config.http_console_ssl_key_password or "",
        allowed_hosts=tuple(h for h in config.http_allowed_hosts.split(",") if h))


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
