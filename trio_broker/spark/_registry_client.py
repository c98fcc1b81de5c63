"""A small blocking client of Confluent's Schema Registry REST API, for drivers and executors.

Why not confluent-kafka's ``SchemaRegistryClient``: the Spark extra does not depend on
confluent-kafka, and the Spark stage needs five calls (a schema by id, a subject's version,
register, look up, a schema's references), which the standard library's HTTP client makes.

Schemas by id never change (an id names one schema forever), so they are cached per process:
a Python worker fetches each id once, whatever the number of records or tasks it runs.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from ..client.core.errors import ConfigError

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryError(ConfigError):
    """The registry refused a request or could not be reached; ``error_code`` is Confluent's
    (40401 subject not found, 40403 schema not found, 409 incompatible, ...), -1 when the
    registry did not answer."""

    def __init__(self, message: str, error_code: int = -1) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry stores it (``schema_type`` AVRO, PROTOBUF or JSON)."""

    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()


_BY_ID: dict[tuple[str, int], RegisteredSchema] = {}
_BY_ID_LOCK = threading.Lock()


class RegistryClient:
    """One registry at ``url`` (``schema.registry.url``; the first of a comma list)."""

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        first = url.split(",")[0].strip().rstrip("/")
        if not first.startswith(("http://", "https://")):
            raise SchemaRegistryError(f"schema.registry.url must be an http:// or https:// URL, "
                                      f"got {url!r}")
        self.url = first
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                         headers={"Content-Type": _CONTENT_TYPE,
                                                  "Accept": _CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                error = json.loads(exc.read())
                code, message = int(error["error_code"]), str(error["message"])
            except (ValueError, KeyError, TypeError):
                code, message = exc.code, exc.reason
            raise SchemaRegistryError(f"Schema Registry at {self.url}: {message} (error code "
                                      f"{code})", code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise SchemaRegistryError(f"no Schema Registry reachable at {self.url}: "
                                      f"{getattr(exc, 'reason', exc)}") from None

    def schema_by_id(self, schema_id: int) -> RegisteredSchema:
        key = (self.url, schema_id)
        with _BY_ID_LOCK:
            found = _BY_ID.get(key)
        if found is None:
            found = _registered(schema_id, self._call("GET", f"/schemas/ids/{schema_id}"))
            with _BY_ID_LOCK:
                _BY_ID[key] = found
        return found

    def version(self, subject: str, version: str | int = "latest") -> RegisteredSchema:
        answer = self._call("GET", f"/subjects/{_quote(subject)}/versions/{version}")
        return _registered(int(answer["id"]), answer)

    def register(self, subject: str, schema: RegisteredSchema) -> int:
        """The id of ``schema`` under ``subject``, registering it if new (auto-register)."""
        return int(self._call("POST", f"/subjects/{_quote(subject)}/versions",
                              _body(schema))["id"])

    def lookup(self, subject: str, schema: RegisteredSchema) -> int:
        """The id of ``schema`` if it is registered under ``subject`` (40403 otherwise)."""
        return int(self._call("POST", f"/subjects/{_quote(subject)}", _body(schema))["id"])


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _body(schema: RegisteredSchema) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": schema.schema, "schemaType": schema.schema_type}
    if schema.references:
        body["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                              for r in schema.references]
    return body


def _registered(schema_id: int, answer: dict[str, Any]) -> RegisteredSchema:
    refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                 for r in answer.get("references") or ())
    return RegisteredSchema(schema_id, str(answer.get("schemaType") or "AVRO"),
                            str(answer["schema"]), refs)


__all__ = ["Reference", "RegisteredSchema", "RegistryClient", "SchemaRegistryError"]
