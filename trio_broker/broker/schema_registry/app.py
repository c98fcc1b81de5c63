"""Confluent's Schema Registry REST API (v1) as a Starlette application.

Why every answer goes through ``_endpoint``: Confluent's clients read the error JSON
(``{"error_code": 40401, "message": ...}``) to tell "subject not found" from "version not found",
so every refusal, a bad body and an unknown route included, is that JSON with Confluent's code,
and the content types Confluent accepts are the only ones read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from . import contexts as ctx
from . import errors as e
from .auth import REALM, RegistryAuth
from .contracts import with_metadata
from .registry import SchemaRegistry, schema_json
from .schemas import SCHEMA_TYPES

LOGGER = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_TYPES = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                  "application/json", "application/octet-stream")
#: the largest request body read (a schema with its JSON wrapping)
MAX_BODY_BYTES = 8 * 1024 * 1024

Handler = Callable[[SchemaRegistry, Request], Awaitable[Any]]


def _json(value: Any, status: int = 200) -> Response:
    return Response(json.dumps(value), status, media_type=CONTENT_TYPE)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


async def _body(request: Request) -> dict[str, Any]:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media and media not in ACCEPTED_TYPES:
        raise e.RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise e.RegistryError(413, 413, f"Request body larger than {MAX_BODY_BYTES} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise e.RegistryError(413, 413, f"Request body larger than {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise e.RegistryError(400, 400, f"Unrecognized request body: {exc}") from None
    if not isinstance(body, dict):
        raise e.RegistryError(400, 400, "The request body is not a JSON object")
    return body


def _id(request: Request) -> int:
    text = request.path_params["id"]
    try:
        return int(text)
    except ValueError:
        raise e.RegistryError(404, 404, "HTTP 404 Not Found") from None


def _endpoint(handler: Handler, registry: SchemaRegistry, auth: RegistryAuth | None,
              level: str) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            registry.store.catch_up()  # records another writer appended since
            if "subject" in request.path_params:  # ":.:orders" is "orders"
                request.path_params["subject"] = ctx.normalize(request.path_params["subject"])
            if auth is not None:
                principal = await auth.principal(request.headers.get("authorization"))
                readable = _authorize(auth, registry, request, principal, level)
            result = await handler(registry, request)
            if auth is not None and level in ("list", "id") and isinstance(result, list):
                result = [x for x in result if readable(x if isinstance(x, str)
                                                        else x["subject"])]
        except e.RegistryError as exc:
            response = _json(exc.body(), exc.status)
            if exc.status == 401:
                response.headers["www-authenticate"] = f'Basic realm="{REALM}"'
            return response
        except Exception:
            LOGGER.exception("schema registry: %s %s failed", request.method, request.url.path)
            return _json(e.store_error("internal error").body(), 500)
        return result if isinstance(result, Response) else _json(result)
    return endpoint


def _authorize(auth: RegistryAuth, registry: SchemaRegistry, request: Request, principal: str,
               level: str) -> Callable[[str], bool]:
    """Refuse what ``principal`` may not do (403); what it may read, for filtering lists."""
    host = request.client.host if request.client is not None else ""

    def readable(subject: str) -> bool:
        return auth.allows(principal, host, "read", subject)

    if level in ("read", "write", "admin"):
        subject = request.path_params["subject"]
        if subject:
            auth.check(principal, host, level, subject)
        else:  # /config/:.: and /mode/:.: are the global ones
            auth.check(principal, host, "global-read" if level == "read" else "global-write",
                       None)
    elif level.startswith("global-"):
        auth.check(principal, host, level, None)
    elif level == "id":
        subjects = {sv.subject for sv in registry.id_versions(
            _id(request), request.query_params.get("subject"), deleted=True)}
        if not any(readable(s) for s in subjects):
            auth.check(principal, host, "read", min(subjects))
    elif level == "guid":
        users = {s for found in registry.guid_ids(request.path_params["guid"])
                 for s, _ in registry.state.ids[found]}
        if users and not any(readable(s) for s in users):
            auth.check(principal, host, "read", min(users))
    return readable


# --- subjects and versions ---------------------------------------------------------------------

def _page(q: Request, found: list[str]) -> list[str]:
    """``offset`` and ``limit`` (negative: no limit), as Confluent's listings take them."""
    try:
        offset = int(q.query_params.get("offset", "0"))
        limit = int(q.query_params.get("limit", "-1"))
    except ValueError:
        raise e.RegistryError(404, 404, "HTTP 404 Not Found") from None
    found = found[max(offset, 0):]
    return found[:limit] if limit >= 0 else found


async def list_subjects(r: SchemaRegistry, q: Request) -> Any:
    prefix = q.query_params.get("subjectPrefix", ctx.WILDCARD)
    if _flag(q, "deletedOnly"):  # subjects with a soft-deleted version
        found = [s for s in r.subjects(deleted=True, prefix=prefix)
                 if any(sv.deleted for sv in r.live(s, deleted=True))]
    else:
        found = r.subjects(deleted=_flag(q, "deleted"), prefix=prefix)
    return _page(q, found)


async def list_contexts(r: SchemaRegistry, q: Request) -> Any:
    """``GET /contexts``: the default context first, then the others by name."""
    prefix = q.query_params.get("contextPrefix", "")
    return _page(q, [c for c in r.contexts() if c.startswith(prefix)])


async def delete_context(r: SchemaRegistry, q: Request) -> Any:
    await r.delete_context(q.path_params["context"])
    return Response(status_code=204)


async def list_versions(r: SchemaRegistry, q: Request) -> Any:
    return r.versions(q.path_params["subject"], deleted=_flag(q, "deleted"))


async def register(r: SchemaRegistry, q: Request) -> Any:
    body = await _body(q)
    sv = await r.register(q.path_params["subject"], body, normalize=_flag(q, "normalize"))
    return {"id": sv.id, "guid": sv.guid}


async def lookup(r: SchemaRegistry, q: Request) -> Any:
    body = await _body(q)
    return schema_json(await r.lookup(q.path_params["subject"], body,
                                      normalize=_flag(q, "normalize"),
                                      deleted=_flag(q, "deleted")))


async def delete_subject(r: SchemaRegistry, q: Request) -> Any:
    return await r.delete_subject(q.path_params["subject"], permanent=_flag(q, "permanent"))


async def get_version(r: SchemaRegistry, q: Request) -> Any:
    return schema_json(r.version(q.path_params["subject"], q.path_params["version"],
                                 deleted=_flag(q, "deleted")))


async def latest_with_metadata(r: SchemaRegistry, q: Request) -> Any:
    """``GET /subjects/{subject}/metadata?key=k&value=v...``: the latest version whose
    metadata properties hold every pair."""
    keys, values = q.query_params.getlist("key"), q.query_params.getlist("value")
    if len(keys) != len(values):
        raise e.RegistryError(400, 400, "key and value must be given in pairs")
    deleted = _flag(q, "deleted")
    subject = q.path_params["subject"]
    versions = r.live(subject, deleted=deleted)
    if not versions:
        raise e.subject_not_found(subject)
    return schema_json(with_metadata(versions, dict(zip(keys, values, strict=True))))


async def get_version_schema(r: SchemaRegistry, q: Request) -> Any:
    sv = r.version(q.path_params["subject"], q.path_params["version"],
                   deleted=_flag(q, "deleted"))
    return Response(sv.schema, media_type=CONTENT_TYPE)


async def delete_version(r: SchemaRegistry, q: Request) -> Any:
    return await r.delete_version(q.path_params["subject"], q.path_params["version"],
                                  permanent=_flag(q, "permanent"))


async def referenced_by(r: SchemaRegistry, q: Request) -> Any:
    return r.referenced_by(q.path_params["subject"], q.path_params["version"])


# --- schemas by id -------------------------------------------------------------------------------

async def schema_by_id(r: SchemaRegistry, q: Request) -> Any:
    return schema_json(r.by_id(_id(q), q.query_params.get("subject")), with_subject=False)


async def schema_text_by_id(r: SchemaRegistry, q: Request) -> Any:
    return Response(r.by_id(_id(q), q.query_params.get("subject")).schema,
                    media_type=CONTENT_TYPE)


async def schema_by_guid(r: SchemaRegistry, q: Request) -> Any:
    """``GET /schemas/guids/{guid}``: as by id, neither subject nor version."""
    return schema_json(r.by_guid(q.path_params["guid"]), with_subject=False)


async def guid_ids(r: SchemaRegistry, q: Request) -> Any:
    """``GET /schemas/guids/{guid}/ids``: the id in each context holding it (none: [])"""
    return [{"context": c, "id": i} for c, i in r.guid_ids(q.path_params["guid"])]


async def id_subjects(r: SchemaRegistry, q: Request) -> Any:
    return sorted({sv.subject for sv in r.id_versions(_id(q), q.query_params.get("subject"),
                                                       deleted=_flag(q, "deleted"))})


async def id_versions(r: SchemaRegistry, q: Request) -> Any:
    return [{"subject": sv.subject, "version": sv.version}
            for sv in r.id_versions(_id(q), q.query_params.get("subject"),
                                    deleted=_flag(q, "deleted"))]


async def schema_types(r: SchemaRegistry, q: Request) -> Any:
    return list(SCHEMA_TYPES)


# --- compatibility, config, mode -----------------------------------------------------------------

async def compatibility(r: SchemaRegistry, q: Request) -> Any:
    body = await _body(q)
    problems = await r.test_compatibility(q.path_params["subject"],
                                          q.path_params.get("version"), body,
                                          normalize=_flag(q, "normalize"))
    answer: dict[str, Any] = {"is_compatible": not problems}
    if _flag(q, "verbose"):
        answer["messages"] = problems
    return answer


async def get_global_config(r: SchemaRegistry, q: Request) -> Any:
    return r.config_json(None)


def _subject(q: Request) -> str | None:
    """The subject of a config or mode path; None for the top level (``/config``, and
    ``/config/:.:``, the default context)."""
    return q.path_params.get("subject") or None


async def put_config(r: SchemaRegistry, q: Request) -> Any:
    return await r.set_config(_subject(q), await _body(q))


async def delete_config(r: SchemaRegistry, q: Request) -> Any:
    return await r.delete_config(_subject(q))


async def get_subject_config(r: SchemaRegistry, q: Request) -> Any:
    subject = _subject(q)
    if subject is None:
        return await get_global_config(r, q)
    return r.config_json(subject, in_scope=_flag(q, "defaultToGlobal"))


async def get_global_mode(r: SchemaRegistry, q: Request) -> Any:
    return {"mode": r.mode(None)}


async def put_mode(r: SchemaRegistry, q: Request) -> Any:
    return {"mode": await r.set_mode(_subject(q), await _body(q), force=_flag(q, "force"))}


async def get_subject_mode(r: SchemaRegistry, q: Request) -> Any:
    subject = _subject(q)
    if subject is None:
        return await get_global_mode(r, q)
    return {"mode": r.subject_mode(subject, default_to_global=_flag(q, "defaultToGlobal"))}


async def delete_mode(r: SchemaRegistry, q: Request) -> Any:
    return {"mode": await r.delete_mode(q.path_params["subject"])}


async def root(r: SchemaRegistry, q: Request) -> Any:
    return {}


#: Subject names may hold "/" (confluent-kafka's ProtobufSerializer names a dependency's subject
#: after its file, "acme/common.proto"), so a subject is a ``path`` segment and the routes
#: with a suffix come before the bare subject ones: the first full match wins.
ROUTES: list[tuple[str, Handler, list[str], str]] = [
    ("/", root, ["GET"], "open"),
    ("/subjects", list_subjects, ["GET"], "list"),
    ("/subjects/{subject:path}/versions/{version}/schema", get_version_schema, ["GET"], "read"),
    ("/subjects/{subject:path}/versions/{version}/referencedby", referenced_by, ["GET"],
     "read"),
    ("/subjects/{subject:path}/versions/{version}", get_version, ["GET"], "read"),
    ("/subjects/{subject:path}/versions/{version}", delete_version, ["DELETE"], "admin"),
    ("/subjects/{subject:path}/versions", list_versions, ["GET"], "read"),
    ("/subjects/{subject:path}/versions", register, ["POST"], "write"),
    ("/subjects/{subject:path}/metadata", latest_with_metadata, ["GET"], "read"),
    ("/subjects/{subject:path}", lookup, ["POST"], "read"),
    ("/subjects/{subject:path}", delete_subject, ["DELETE"], "admin"),
    ("/schemas/types", schema_types, ["GET"], "open"),
    ("/schemas/ids/{id}", schema_by_id, ["GET"], "id"),
    ("/schemas/ids/{id}/schema", schema_text_by_id, ["GET"], "id"),
    ("/schemas/ids/{id}/subjects", id_subjects, ["GET"], "id"),
    ("/schemas/ids/{id}/versions", id_versions, ["GET"], "id"),
    ("/schemas/guids/{guid}", schema_by_guid, ["GET"], "guid"),
    ("/schemas/guids/{guid}/ids", guid_ids, ["GET"], "guid"),
    ("/compatibility/subjects/{subject:path}/versions/{version}", compatibility, ["POST"],
     "read"),
    ("/compatibility/subjects/{subject:path}/versions", compatibility, ["POST"], "read"),
    ("/config", get_global_config, ["GET"], "global-read"),
    ("/config", put_config, ["PUT"], "global-write"),
    ("/config", delete_config, ["DELETE"], "global-write"),
    ("/config/{subject:path}", get_subject_config, ["GET"], "read"),
    ("/config/{subject:path}", put_config, ["PUT"], "admin"),
    ("/config/{subject:path}", delete_config, ["DELETE"], "admin"),
    ("/mode", get_global_mode, ["GET"], "global-read"),
    ("/mode", put_mode, ["PUT"], "global-write"),
    ("/mode/{subject:path}", get_subject_mode, ["GET"], "read"),
    ("/mode/{subject:path}", put_mode, ["PUT"], "admin"),
    ("/mode/{subject:path}", delete_mode, ["DELETE"], "admin"),
    ("/contexts", list_contexts, ["GET"], "global-read"),
    ("/contexts/{context}", delete_context, ["DELETE"], "global-write"),
]


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    phrase = {404: "Not Found", 405: "Method Not Allowed"}.get(status, "Error")
    return _json({"error_code": status, "message": f"HTTP {status} {phrase}"}, status)


class ContextPaths:
    """``/contexts/{context}/...`` served as the plain path it stands for
    (``contexts.rewrite``), before routing, as Confluent's ``ContextFilter`` does."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/contexts/"):
            query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
            try:
                path, query = ctx.rewrite(scope["path"], query)
            except e.RegistryError as exc:
                await _json(exc.body(), exc.status)(scope, receive, send)
                return
            # in place: the metrics around read the matched route from this scope
            scope.update(path=path, raw_path=path.encode(),
                         query_string=urlencode(query).encode())
        await self.app(scope, receive, send)


def build_app(registry: SchemaRegistry, auth: RegistryAuth | None = None) -> ASGIApp:
    """The REST API over ``registry``; with ``auth``, for the broker's users only
    (``auth.py``)."""
    routes = [Route(path, _endpoint(handler, registry, auth, level), methods=methods)
              for path, handler, methods, level in ROUTES]
    return ContextPaths(Starlette(routes=routes, exception_handlers={HTTPException: _http_error}))
