"""The console's request plumbing: its state, page rendering, the login guard, write checks.

Why these checks on every write: the console changes a broker, so a write needs a session
(a login when SASL is on), the session's CSRF token in the form (another site cannot make a
browser post to the console), a same-origin ``Origin`` header when the browser sends one, and
the console not being read-only. Pages are rendered on the server with Jinja2 (autoescaped);
the few live parts are small scripts under ``static/`` that read JSON from ``/api/...``, so the
Content-Security-Policy allows no inline script at all.
"""

from __future__ import annotations

import gc
import hashlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import jinja2
import trio
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ...client.core.errors import KafkaError
from ..security.acl import Operation, ResourceType
from ..server.state import BrokerState
from .guard import origin_matches
from .live import LiveSampler
from .reads import KafkaView
from .sessions import COOKIE, Flashes, Session, Sessions
from .settings import ConsoleSettings
from .writes import audit

LOGGER = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
#: a page's Kafka calls must finish within this
PAGE_TIMEOUT_S = 10
MAX_FORM_BYTES = 1 << 20
MAX_CONCURRENT_PAGES = 4
_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".svg": "image/svg+xml"}


class Console:
    """Everything the console's handlers share (``request.app.state.console``)."""

    def __init__(self, settings: ConsoleSettings, state: BrokerState,
                 listeners: list[tuple[str, str, int]], sessions: Sessions) -> None:
        self.settings = settings
        self.state = state
        self.listeners = listeners
        self.sessions = sessions
        self.flashes = Flashes()
        self.sampler = LiveSampler(state.metrics)
        self.started_at = trio.current_time()
        try:
            self.version = importlib_metadata.version("trio-broker")
        except importlib_metadata.PackageNotFoundError:
            self.version = "unknown"
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
            trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
        self.templates.filters.update(bytes=human_bytes, num=number, q=lambda s: quote(s, ""),
                                      duration=duration, size_config=size_config)
        self.static: dict[str, tuple[bytes, str]] = {}
        for path in sorted((HERE / "static").iterdir()):
            self.static[path.name] = (path.read_bytes(), _TYPES.get(path.suffix, "text/plain"))
        digest = hashlib.sha256(b"".join(body for body, _ in self.static.values()))
        self.asset_version = digest.hexdigest()[:12]
        #: pages built at once; more wait their turn, so however many tabs are open the
        #: console's share of the broker stays bounded
        self.pages = trio.Semaphore(MAX_CONCURRENT_PAGES)


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def session_may(request: Request, session: Session, operation: Operation,
                resource_type: ResourceType, name: str) -> bool:
    """Whether the console's user (the logged-in user from the address that logged in, or
    anonymous) may do ``operation`` on the resource by the broker's ACLs; always, without an
    authorizer."""
    authorizer = console_of(request).state.authorizer
    if authorizer is None:
        return True
    principal = None if session.user is None else f"User:{session.user}"
    return authorizer.authorize(principal, session.client, operation, resource_type, name)


def human_bytes(value: int | None) -> str:
    if value is None or value < 0:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{value} B"


def duration(ms_text: str | None) -> str:
    """A ``*.ms`` config value as people read it (``604800000`` -> ``7d``; -1 -> forever)."""
    try:
        ms = int(ms_text) if ms_text is not None else None
    except ValueError:
        return str(ms_text)
    if ms is None:
        return "-"
    if ms < 0:
        return "forever"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms} ms"


def size_config(text: str | None) -> str:
    """A byte-count config value (-1 -> unlimited)."""
    try:
        value = int(text) if text is not None else None
    except ValueError:
        return str(text)
    if value is None:
        return "-"
    return "unlimited" if value < 0 else human_bytes(value)


def number(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def session_of(request: Request) -> Session | None:
    return console_of(request).sessions.get(request.cookies.get(COOKIE))


def login_redirect(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, '')}", status_code=303)


def view_of(request: Request, session: Session) -> KafkaView:
    return KafkaView(session.admin, console_of(request).state.node_id)


def render(request: Request, template: str, session: Session | None, status: int = 200,
           **context: Any) -> HTMLResponse:
    console = console_of(request)
    flash = console.flashes.pop(request.query_params.get("flash"))
    body = console.templates.get_template(template).render(
        request=request, console=console, session=session, flash=flash,
        read_only=console.settings.read_only, asset_version=console.asset_version, **context)
    return HTMLResponse(body, status_code=status)


def error_page(request: Request, session: Session | None, message: str,
               status: int = 502) -> HTMLResponse:
    return render(request, "error.html", session, status=status, message=message)


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form (at most ``MAX_FORM_BYTES``), last value of each field."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ValueError("form too large")
    return parse_form(body)


def parse_form(body: bytes) -> dict[str, str]:
    """An urlencoded form's fields, the last value of each (bytes that are not UTF-8 are
    replaced, never refused)."""
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[-1] for name, values in fields.items()}


def write_refused(request: Request, session: Session, form: dict[str, str]) -> str | None:
    """Why this write must be refused, or None."""
    if console_of(request).settings.read_only:
        return "the console is read-only (http.console.read.only)"
    cross = cross_site(request)
    if cross is not None:
        return cross
    if form.get("csrf") != session.csrf:
        return "the form's CSRF token is missing or stale: reload the page"
    return None


def cross_site(request: Request) -> str | None:
    """Why a form post comes from another site's page, or None: an ``Origin`` (browsers send
    it with every POST) that does not name this Host, ``null`` included (a sandboxed frame), or
    a ``Sec-Fetch-Site`` saying another site sent it."""
    if not origin_matches(request.headers.get("origin"), request.headers.get("host")):
        return "cross-origin form refused"
    if request.headers.get("sec-fetch-site") in ("cross-site", "same-site"):
        return "cross-origin form refused"
    return None


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "?"


def redirect_with(request: Request, url: str, kind: str, text: str) -> RedirectResponse:
    key = console_of(request).flashes.add(kind, text)
    joiner = "&" if "?" in url else "?"
    return RedirectResponse(f"{url}{joiner}flash={key}", status_code=303)


@asynccontextmanager
async def kafka_call(timeout_s: float = PAGE_TIMEOUT_S) -> AsyncIterator[None]:
    """Bound a page's Kafka calls; a timeout becomes a ``KafkaError`` with a plain message."""
    try:
        with trio.fail_after(timeout_s):
            yield
    except trio.TooSlowError:
        raise KafkaError(f"the broker did not answer within {timeout_s:.0f} s") from None


_paused = 0


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a page is built.

    A page decodes and builds thousands of short-lived objects (a thousand topics' metadata);
    they would live through young collections, be promoted, and set off full collections of the
    whole broker's objects (tens of ms, during which no client request is served). Paused, they
    are freed by reference counting when the page is done and never promoted. Nested and
    concurrent pages share one pause; the collector is enabled again by the last one out, and
    only if it was enabled before.
    """
    global _paused
    if _paused == 0 and not gc.isenabled():
        yield  # someone else paused it: leave it to them
        return
    _paused += 1
    gc.disable()
    try:
        yield
    finally:
        _paused -= 1
        if _paused == 0:
            gc.enable()


Handler = Callable[[Request, Session], Any]


async def _run_page(handler: Handler, request: Request, session: Session) -> Response:
    try:
        response: Response = await handler(request, session)
    except KafkaError as exc:
        return error_page(request, session, f"{type(exc).__name__}: {exc}")
    return response


def page(handler: Handler) -> Callable[[Request], Any]:
    """Wrap a handler: a session is required (a login when SASL is on); a ``KafkaError`` becomes
    an error page."""
    async def endpoint(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return login_redirect(request)
        async with console_of(request).pages:
            with gc_paused():
                return await _run_page(handler, request, session)

    endpoint.__name__ = handler.__name__
    return endpoint


class Write:
    """One write from a form: the handler names the action and where to go back to."""

    def __init__(self, request: Request, session: Session, form: dict[str, str]) -> None:
        self.request = request
        self.session = session
        self.form = form
        self.view = view_of(request, session)
        self.action = f"{request.method} {request.url.path}"
        self.back = "/"


WriteHandler = Callable[[Write], Any]


def write_page(handler: WriteHandler) -> Callable[[Request], Any]:
    """Wrap a write: session, CSRF, origin and read-only checks, a bounded Kafka call, one
    audit line whatever the outcome, and a redirect back with the outcome shown."""
    async def endpoint(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return login_redirect(request)
        try:
            form = await read_form(request)
        except ValueError as exc:
            return error_page(request, session, str(exc), 413)
        write = Write(request, session, form)
        who, where = session.who, client_address(request)
        refused = write_refused(request, session, form)
        if refused:
            audit(who, where, write.action, f"refused ({refused})")
            return error_page(request, session, refused, 403)
        try:
            async with console_of(request).pages, kafka_call():
                done: str = await handler(write)
        except (KafkaError, ValueError) as exc:
            text = f"{type(exc).__name__}: {exc}" if isinstance(exc, KafkaError) else str(exc)
            audit(who, where, write.action, f"failed ({text})")
            return redirect_with(request, write.back, "error", f"{write.action} failed: {text}")
        audit(who, where, write.action, done)
        return redirect_with(request, write.back, "ok", done)

    endpoint.__name__ = handler.__name__
    return endpoint


def int_or_none(text: str | None) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    return int(text)
