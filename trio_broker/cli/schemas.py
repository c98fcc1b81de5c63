"""``trio-broker schemas``: subjects, versions, compatibility, config and mode of a Schema
Registry, over Confluent's REST API (docs/schema-registry.md).

Why the REST API and not the broker's registry object: the command works against any registry
a user points it at, the broker's (``schema.registry.listener``), Confluent's or Karapace's,
exactly as confluent-kafka's ``SchemaRegistryClient`` talks to them. Why ``urllib``: the
command must run where only the broker is installed, and one request per command needs no
connection pool.

A refusal prints Confluent's message and code on one line (``subject 'x' not found (40401)``);
``check`` exits 1 when the schema is incompatible, so a CI step can run it as a gate.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from .base import CommandError, Tool, UsageError
from .output import Report, add_output_argument

#: where the registry is looked for without ``--registry``: $SCHEMA_REGISTRY_URL, else this
DEFAULT_REGISTRY = "http://127.0.0.1:8081"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")
LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE", "NONE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="schemas_command", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="list subjects")
    listing.add_argument("--deleted", action="store_true", help="soft-deleted subjects too")
    listing.add_argument("--prefix", default=None, help="only subjects starting with this")
    versions = sub.add_parser("versions", help="list a subject's versions")
    versions.add_argument("subject")
    versions.add_argument("--deleted", action="store_true", help="soft-deleted versions too")
    get = sub.add_parser("get", help="show a schema: a subject's version, or an id")
    get.add_argument("subject", nargs="?", default=None)
    get.add_argument("--version", default="latest", help="a version number or latest")
    get.add_argument("--id", type=int, default=None, help="the schema with this id")
    register = sub.add_parser("register", help="register a schema file under a subject")
    check = sub.add_parser("check", help="test a schema file's compatibility with a subject")
    for p in (register, check):
        p.add_argument("subject")
        p.add_argument("file", type=Path, help="the schema (.avsc, .proto, .json)")
        p.add_argument("--type", choices=SCHEMA_TYPES, default=None, dest="schema_type",
                       help="the schema's type (default: PROTOBUF for .proto, else AVRO)")
        p.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VER",
                       help="a schema this one imports, registered under SUBJECT; repeatable")
    register.add_argument("--normalize", action="store_true",
                          help="normalize the schema before it is compared and stored")
    check.add_argument("--version", default="latest",
                       help="the version to check against (default latest; all: every one "
                            "the subject's level compares)")
    delete = sub.add_parser("delete", help="delete a subject or one version of it")
    delete.add_argument("subject")
    delete.add_argument("--version", default=None, help="only this version (or latest)")
    delete.add_argument("--permanent", action="store_true",
                        help="delete for good what was soft-deleted before")
    config = sub.add_parser("config", help="show or set the compatibility level")
    mode = sub.add_parser("mode", help="show or set the mode")
    config.add_argument("--set", choices=LEVELS, default=None, dest="value")
    mode.add_argument("--set", choices=MODES, default=None, dest="value")
    for p in (config, mode):
        p.add_argument("subject", nargs="?", default=None,
                       help="a subject (default: the global setting)")
    for p in (listing, versions, get, register, check, delete, config, mode):
        p.add_argument("--registry", default=None, metavar="URL",
                       help=f"the registry's URL (default $SCHEMA_REGISTRY_URL or "
                            f"{DEFAULT_REGISTRY})")
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="per request (default 10)")
        add_output_argument(p)


def run(args: argparse.Namespace) -> int:
    registry = Registry(args.registry or os.environ.get("SCHEMA_REGISTRY_URL")
                        or DEFAULT_REGISTRY, args.timeout)
    report = Report(args.output)
    action = args.schemas_command
    status = 0
    if action == "list":
        subjects = registry.call("GET", "/subjects", deleted=args.deleted,
                                 subjectPrefix=args.prefix)
        report.document = subjects
        report.plain_lines = list(subjects)
        report.table(["subject"], [[s] for s in subjects])
    elif action == "versions":
        found = registry.call("GET", f"/subjects/{_quote(args.subject)}/versions",
                              deleted=args.deleted)
        report.document = found
        report.plain_lines = [str(v) for v in found]
        report.table(["version"], [[v] for v in found], numeric=["version"])
    elif action == "get":
        _show_schema(report, _get(registry, args))
    elif action in ("register", "check"):
        body = _schema_body(args)
        if action == "register":
            answer = registry.call("POST", f"/subjects/{_quote(args.subject)}/versions", body,
                                   normalize=args.normalize or None)
            report.document = answer
            report.plain_lines = [str(answer["id"])]
            report.line(f"Registered under {args.subject} with id {answer['id']}.")
        else:
            version = "" if args.version == "all" else f"/{_quote(args.version)}"
            answer = registry.call(
                "POST", f"/compatibility/subjects/{_quote(args.subject)}/versions{version}",
                body, verbose=True)
            compatible = bool(answer.get("is_compatible"))
            report.document = answer
            report.plain_lines = ["compatible" if compatible else "incompatible",
                                  *answer.get("messages", [])]
            report.line(f"{'Compatible' if compatible else 'Incompatible'} with "
                        f"{args.subject} ({args.version}).")
            for message in answer.get("messages", []):
                report.line(f"  {message}")
            status = 0 if compatible else 1
    elif action == "delete":
        path = f"/subjects/{_quote(args.subject)}"
        if args.version is not None:
            path += f"/versions/{_quote(args.version)}"
        answer = registry.call("DELETE", path, permanent=args.permanent or None)
        report.document = answer
        deleted = answer if isinstance(answer, list) else [answer]
        report.plain_lines = [str(v) for v in deleted]
        how = "Permanently deleted" if args.permanent else "Deleted"
        report.line(f"{how} {args.subject} version(s) {', '.join(map(str, deleted))}.")
    else:  # config, mode
        _setting(registry, report, action, args.subject, args.value)
    report.emit()
    return status


class Registry:
    """One registry's REST API: each call a JSON answer, or a ``CommandError`` naming
    Confluent's message and code."""

    def __init__(self, url: str, timeout_s: float) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(f"--registry {url!r}: expected http://host:port or https://...")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             **query: object) -> Any:
        params = {k: str(v).lower() if isinstance(v, bool) else str(v)
                  for k, v in query.items() if v is not None and v is not False}
        url = self.url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Accept": CONTENT_TYPE,
                                                  "Content-Type": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise CommandError(_refusal(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CommandError(f"cannot reach the Schema Registry at {self.url}: "
                               f"{reason}") from None
        except ValueError as exc:  # not JSON: not a registry
            raise CommandError(f"{self.url} answered {method} {path} with something other "
                               f"than JSON: is it a Schema Registry? ({exc})") from None


def _refusal(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read())
        return f"{body['message']} ({body['error_code']})"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {error.code} {error.reason}"


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _get(registry: Registry, args: argparse.Namespace) -> dict[str, Any]:
    if args.id is not None:
        found: dict[str, Any] = registry.call("GET", f"/schemas/ids/{args.id}")
        return {"id": args.id, **found}
    if args.subject is None:
        raise UsageError("get needs a SUBJECT or --id")
    answer: dict[str, Any] = registry.call(
        "GET", f"/subjects/{_quote(args.subject)}/versions/{_quote(args.version)}")
    return answer


def _show_schema(report: Report, schema: dict[str, Any]) -> None:
    report.document = schema
    text = schema.get("schema", "")
    report.plain_lines = [text]
    facts = [f"{k}: {schema[k]}" for k in ("subject", "version", "id") if k in schema]
    report.line("  ".join([*facts, f"type: {schema.get('schemaType', 'AVRO')}"]))
    for reference in schema.get("references") or []:
        report.line(f"reference: {reference['name']} = {reference['subject']}:"
                    f"{reference['version']}")
    report.line(_pretty(text))


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2)
    except ValueError:  # Protobuf's text form
        return text


def _schema_body(args: argparse.Namespace) -> dict[str, Any]:
    try:
        text = args.file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{args.file}: {exc.strerror if isinstance(exc, OSError) else exc}") \
            from None
    schema_type = args.schema_type or ("PROTOBUF" if args.file.suffix == ".proto" else "AVRO")
    body: dict[str, Any] = {"schema": text}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    references = []
    for given in args.reference:
        name, _, rest = given.partition("=")
        subject, _, version = rest.rpartition(":")
        if not name or not subject or not version.isdigit():
            raise UsageError(f"--reference {given!r}: expected NAME=SUBJECT:VERSION")
        references.append({"name": name, "subject": subject, "version": int(version)})
    if references:
        body["references"] = references
    return body


def _setting(registry: Registry, report: Report, kind: str, subject: str | None,
             value: str | None) -> None:
    path = f"/{kind}" + (f"/{_quote(subject)}" if subject else "")
    field = "compatibility" if kind == "config" else "mode"
    if value is not None:
        answer = registry.call("PUT", path, {field: value})
    else:
        answer = registry.call("GET", path, defaultToGlobal=True if subject else None)
    level = answer.get(field) or answer.get("compatibilityLevel")
    report.document = {field: level}
    report.plain_lines = [str(level)]
    where = subject or "global"
    report.line(f"{where}: {level}" + (" (set)" if value is not None else ""))


SCHEMAS = Tool(add_arguments, run)
