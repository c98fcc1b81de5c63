"""Kafka's Java client settings, read into this client's own: ``sasl.jaas.config`` and the
PEM trust and key stores.

Why: every Java ``client.properties`` states its login as a JAAS line, and its TLS files as
``ssl.truststore.*`` / ``ssl.keystore.*``. Reading them lets one file serve ``kafka-*.sh`` and
this client unchanged, where refusing them would make users keep two copies in two dialects.

The JAAS line (``sasl.jaas.config``, Kafka's ``JaasConfig``)::

    <login module class> <control flag> [<option>=<value> ...];

with the flag one of ``required``, ``requisite``, ``sufficient``, ``optional``, each value a
word or a double-quoted string (``\\`` escapes the next character), and exactly one module.
PLAIN and SCRAM modules give ``username`` and ``password``; the OAUTHBEARER module gives the
options of Kafka's unsecured token (``unsecuredLoginStringClaim_sub``, ...).

Java key stores (JKS, PKCS12) are binary formats Python's ``ssl`` cannot read: they are refused
with the key and the file named, and the PEM form (``ssl.*.type=PEM``) is taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .errors import ConfigError

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

#: login module class -> the SASL mechanism it logs in with (SCRAM: whichever is configured)
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

#: Java client keys this module reads (all default to unset)
JAVA_CLIENT_KEYS = ("sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type",
                    "ssl.truststore.password", "ssl.keystore.location", "ssl.keystore.type",
                    "ssl.keystore.password")


#: where ``from_java_settings`` puts the OAUTHBEARER module's options (no client key has them)
OAUTHBEARER_OPTIONS = "sasl.jaas.config/oauthbearer.options"


class JaasLoginModule(NamedTuple):
    """One entry of a JAAS configuration."""

    class_name: str
    control_flag: str
    options: dict[str, str]


def parse_jaas_config(text: str) -> JaasLoginModule:
    """The one login module of a ``sasl.jaas.config`` value; ``ConfigError`` when malformed."""
    tokens = _tokens(text)
    modules = []
    i = 0
    while i < len(tokens):
        name, quoted = tokens[i]
        if quoted or name in ("=", ";"):
            raise ConfigError(f"sasl.jaas.config: expected a login module class, found {name!r}")
        if i + 1 >= len(tokens) or tokens[i + 1][1] or tokens[i + 1][0] == ";":
            raise ConfigError("sasl.jaas.config: login module control flag not specified in "
                              "JAAS config")
        flag = tokens[i + 1][0]
        if flag.lower() not in CONTROL_FLAGS:
            raise ConfigError(f"sasl.jaas.config: invalid login module control flag '{flag}' in "
                              f"JAAS config (use {', '.join(CONTROL_FLAGS)})")
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise ConfigError("sasl.jaas.config: JAAS config entry not terminated by "
                                  "semi-colon")
            key, quoted = tokens[i]
            if key == ";" and not quoted:
                i += 1
                break
            if quoted or key == "=":
                raise ConfigError(f"sasl.jaas.config: expected an option name, found {key!r}")
            if i + 2 >= len(tokens) or tokens[i + 1] != ("=", False) or (
                    tokens[i + 2][0] in ("=", ";") and not tokens[i + 2][1]):
                raise ConfigError(f"sasl.jaas.config: value not specified for key '{key}' in "
                                  "JAAS config")
            options[key] = tokens[i + 2][0]
            i += 3
        modules.append(JaasLoginModule(name, flag.lower(), options))
    if len(modules) != 1:
        raise ConfigError(f"sasl.jaas.config: JAAS config property contains {len(modules)} login "
                          "modules, should be 1 module")
    return modules[0]


def _tokens(text: str) -> list[tuple[str, bool]]:
    """(token, quoted) pairs: words, quoted strings (escapes resolved), ``=`` and ``;``."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, False))
            i += 1
        elif c == '"':
            value: list[str] = []
            i += 1
            while True:
                if i >= n:
                    raise ConfigError("sasl.jaas.config: unterminated quoted string")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    value.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    value.append(c)
                    i += 1
            out.append(("".join(value), True))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append((text[start:i], False))
    return out


def from_java_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with its Java client keys read into this client's keys: the JAAS line's
    credentials into ``sasl.username`` / ``sasl.password`` (OAUTHBEARER: its options under
    ``OAUTHBEARER_OPTIONS``), the
    PEM stores into ``ssl.ca.location`` / ``ssl.certificate.location``. A key set both ways
    keeps this client's own."""
    out = dict(config)
    jaas = config.get("sasl.jaas.config")
    if jaas:
        module = parse_jaas_config(str(jaas))
        mechanism = str(config.get("sasl.mechanism") or "GSSAPI").upper()
        if module.class_name == OAUTHBEARER_MODULE:
            if out.get("sasl.mechanism") in (None, "GSSAPI"):
                out["sasl.mechanism"] = "OAUTHBEARER"
            out[OAUTHBEARER_OPTIONS] = module.options
        elif module.class_name in (PLAIN_MODULE, SCRAM_MODULE):
            expected = "PLAIN" if module.class_name == PLAIN_MODULE else "SCRAM-SHA-"
            if out.get("sasl.mechanism") in (None, "GSSAPI") and expected == "PLAIN":
                out["sasl.mechanism"] = "PLAIN"
            elif not mechanism.startswith(expected):
                raise ConfigError(f"sasl.jaas.config: {module.class_name} does not log in with "
                                  f"sasl.mechanism={mechanism}")
            for key in ("username", "password"):
                if key not in module.options:
                    raise ConfigError(f"sasl.jaas.config: {module.class_name} needs the "
                                      f"{key} option")
                if out.get(f"sasl.{key}") is None:
                    out[f"sasl.{key}"] = module.options[key]
        else:
            raise ConfigError(f"sasl.jaas.config: login module {module.class_name} is not "
                              f"supported (use {PLAIN_MODULE}, {SCRAM_MODULE} or "
                              f"{OAUTHBEARER_MODULE})")
    for store, target in (("truststore", "ssl.ca.location"),
                          ("keystore", "ssl.certificate.location")):
        location = config.get(f"ssl.{store}.location")
        if not location:
            continue
        _check_pem(f"ssl.{store}", str(location), config.get(f"ssl.{store}.type"))
        if out.get(target) is None:
            out[target] = str(location)
            if store == "keystore" and out.get("ssl.key.location") is None:
                # a PEM key store holds the private key and its certificate chain
                out["ssl.key.location"] = str(location)
    return out


def _check_pem(prefix: str, location: str, declared: object) -> None:
    """A store this client can read: PEM, declared so or (Kafka's default type, JKS, unset)
    recognised by its content."""
    kind = str(declared).upper() if declared else None
    if kind not in (None, "PEM"):
        raise ConfigError(f"{prefix}.location {location}: a {kind} store; this client reads PEM "
                          f"only (convert it with keytool/openssl and set {prefix}.type=PEM)")
    if kind is None:
        try:
            with open(location, "rb") as f:
                head = f.read(4096)
        except OSError as exc:
            raise ConfigError(f"{prefix}.location {location}: {exc.strerror or exc}") from None
        if b"-----BEGIN " not in head:
            raise ConfigError(f"{prefix}.location {location}: not a PEM file (a JKS or PKCS12 "
                              f"store?); this client reads PEM only (convert it and set "
                              f"{prefix}.type=PEM)")


__all__ = ["JAVA_CLIENT_KEYS", "OAUTHBEARER_OPTIONS", "JaasLoginModule", "from_java_settings",
           "parse_jaas_config"]
