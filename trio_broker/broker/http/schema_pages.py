"""The Schema Registry pages: the subjects, one subject's versions with their schemas, config
and mode, and a unified diff between two versions of a subject.

Why read the registry's state in the broker process and not ask it over HTTP: the registry runs
on the broker's own Trio loop (``state.attached`` holds it while ``schema.registry.listener``
serves it), so its state is read as a consistent snapshot between two requests, without the
registry's credentials. Without a registry the pages answer 404 and the navigation has no link.
A logged-in user sees only the subjects the registry lets them read (DESCRIBE on the subject's
topic, ``schema_registry.auth``). Schemas and subject names are user input: the templates
escape them (Jinja2 autoescape) like everything else.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from ..schema_registry import contexts
from ..schema_registry.auth import topic_of
from ..schema_registry.store import SchemaVersion
from ..security.acl import Operation, ResourceType
from .sessions import Session
from .web import console_of, error_page, page, render, session_may


class SubjectRow(NamedTuple):
    subject: str
    context: str
    name: str
    latest: int
    schema_type: str
    versions: int
    compatibility: str
    #: every version soft-deleted
    deleted: bool


class VersionRow(NamedTuple):
    version: int
    id: int
    schema_type: str
    references: list[dict[str, Any]]
    deleted: bool
    #: the schema text, pretty-printed
    text: str


def _registry(request: Request) -> Any:
    return console_of(request).state.attached.schema_registry


def _may_read(request: Request, session: Session, subject: str) -> bool:
    return session_may(request, session, Operation.DESCRIBE, ResourceType.TOPIC,
                       topic_of(subject))


def pretty(sv: SchemaVersion) -> str:
    """An Avro or JSON Schema indented (two spaces, keys in their order), a Protobuf schema as
    written."""
    if sv.schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(sv.schema), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            pass
    return sv.schema


def subject_rows(request: Request, session: Session) -> list[SubjectRow]:
    registry = _registry(request)
    rows = []
    for subject, versions in sorted(registry.state.subjects.items()):
        if not versions or not _may_read(request, session, subject):
            continue
        live = [sv for sv in versions.values() if not sv.deleted]
        latest = max(live or versions.values(), key=lambda sv: sv.version)
        context, name = contexts.split(subject)
        rows.append(SubjectRow(subject, context, name, latest.version, latest.schema_type,
                               len(live), registry.compatibility(subject), not live))
    return rows


def version_rows(registry: Any, subject: str) -> list[VersionRow]:
    return [VersionRow(sv.version, sv.id, sv.schema_type, sv.references, sv.deleted, pretty(sv))
            for sv in registry.live(subject, deleted=True)]


def unified_diff(subject: str, old: VersionRow, new: VersionRow) -> list[str]:
    return list(difflib.unified_diff(
        old.text.splitlines(), new.text.splitlines(), f"{subject} version {old.version}",
        f"{subject} version {new.version}", lineterm=""))


def _no_registry(request: Request, session: Session) -> Response:
    return error_page(request, session, "no such page", 404)


def _subject_or_error(request: Request, session: Session,
                      ) -> tuple[str, list[VersionRow]] | Response:
    subject = request.query_params.get("subject", "")
    registry = _registry(request)
    if registry is None:
        return _no_registry(request, session)
    if not _may_read(request, session, subject):
        return error_page(request, session, f"not authorized to read subject {subject!r}",
                          403)
    versions = version_rows(registry, subject)
    if not versions:
        return error_page(request, session, f"subject {subject!r} does not exist", 404)
    return subject, versions


@page
async def subjects(request: Request, session: Session) -> Response:
    if _registry(request) is None:
        return _no_registry(request, session)
    return render(request, "subjects.html", session, subjects=subject_rows(request, session))


@page
async def subject(request: Request, session: Session) -> Response:
    found = _subject_or_error(request, session)
    if isinstance(found, Response):
        return found
    name, versions = found
    registry = _registry(request)
    return render(request, "subject.html", session, subject=name, versions=versions,
                  context=contexts.context_of(name), config=registry.config_json(name),
                  own_config=name in registry.state.configs, mode=registry.mode(name),
                  own_mode=name in registry.state.modes)


@page
async def diff(request: Request, session: Session) -> Response:
    found = _subject_or_error(request, session)
    if isinstance(found, Response):
        return found
    name, versions = found
    by_number = {v.version: v for v in versions}
    try:
        old = by_number[int(request.query_params.get("from", ""))]
        new = by_number[int(request.query_params.get("to", ""))]
    except (ValueError, KeyError):
        return error_page(request, session, f"subject {name!r} has versions "
                          f"{', '.join(str(v) for v in by_number)}: choose two of them", 400)
    return render(request, "schema_diff.html", session, subject=name, versions=versions,
                  old=old, new=new, lines=unified_diff(name, old, new))


__all__ = ["diff", "pretty", "subject", "subject_rows", "subjects", "unified_diff"]
