"""The overview page, its live JSON, the login and logout forms, and the static assets.

Why the login form has a CSRF token of its own (login CSRF): before a login there is no
session, so no session token, yet a page of another site could post the attacker's user and
password and log the visitor in as the attacker, whose console then sees what the visitor types
(a topic's records, a produced message). The form carries a random token that must equal the
``trio_broker_console_login`` cookie (double submit): another site can neither read the token
nor, the cookie being SameSite=Strict, have the browser send the cookie with its post. Browsers
that send ``Origin`` or ``Sec-Fetch-Site`` are checked on those too (``web.cross_site``).
"""

from __future__ import annotations

import hmac
import logging
import secrets

import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from .sessions import COOKIE, IDLE_TIMEOUT_S, LoginFailed, Session
from .web import (
    client_address,
    console_of,
    cross_site,
    kafka_call,
    login_redirect,
    page,
    read_form,
    render,
    session_of,
    view_of,
)

LOGGER = logging.getLogger(__name__)
LOGIN_COOKIE = "trio_broker_console_login"
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _uptime(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m {seconds}s"
    return f"{minutes}m {seconds}s"


@page
async def overview(request: Request, session: Session) -> Response:
    console = console_of(request)
    view = view_of(request, session)
    async with kafka_call():
        metadata = await view.metadata()
        groups = await view.list_groups()
        log_dirs, _ = await view.log_dirs(view.node_id)
    topics = [t for t in metadata.topics.values() if not t.error]
    return render(
        request, "overview.html", session, metadata=metadata,
        topic_count=sum(1 for t in topics if not t.internal),
        internal_count=sum(1 for t in topics if t.internal),
        partition_count=sum(t.num_partitions for t in topics), group_count=len(groups),
        uptime=_uptime(trio.current_time() - console.started_at),
        listeners=console.listeners, log_dirs=log_dirs)


async def live(request: Request) -> Response:
    if session_of(request) is None:
        return JSONResponse({"error": "login required"}, status_code=401)
    console = console_of(request)
    data = console.sampler.snapshot()
    data["uptime_s"] = round(trio.current_time() - console.started_at, 1)
    return JSONResponse(data, headers={"Cache-Control": "no-store"})


def _login_page(request: Request, target: str, *, status: int = 200, error: str | None = None,
                username: str = "") -> Response:
    """The login form with its CSRF token, the cookie's if the browser has a well-formed one
    (so two tabs' forms both work), else a new one set as the cookie."""
    token = request.cookies.get(LOGIN_COOKIE, "")
    if len(token) != 43 or not _TOKEN_CHARS.issuperset(token):
        token = secrets.token_urlsafe(32)
    response = render(request, "login.html", session_of(request) if status == 200 else None,
                      status=status, error=error, next=target, username=username,
                      login_csrf=token)
    response.set_cookie(LOGIN_COOKIE, token, path="/login", httponly=True, samesite="strict",
                        secure=console_of(request).settings.scheme == "https")
    return response


def _login_refused(request: Request, form: dict[str, str]) -> str | None:
    """Why a login post must be refused (another site's page sent it), or None."""
    refused = cross_site(request)
    if refused is not None:
        return refused
    cookie, given = request.cookies.get(LOGIN_COOKIE, ""), form.get("csrf", "")
    if not cookie or not given or not hmac.compare_digest(cookie.encode(), given.encode()):
        return "the login form's CSRF token is missing or stale: log in again"
    return None


async def login_form(request: Request) -> Response:
    console = console_of(request)
    if not console.settings.login_required:
        return RedirectResponse("/", status_code=303)
    return _login_page(request, _safe_next(request.query_params.get("next")))


def _safe_next(target: str | None) -> str:
    """Only a path of this console (never another site) is a place to go after login."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def login(request: Request) -> Response:
    console = console_of(request)
    if not console.settings.login_required:
        return RedirectResponse("/", status_code=303)
    form = await read_form(request)
    username, password = form.get("username", ""), form.get("password", "")
    mechanism = form.get("mechanism") or console.settings.mechanisms[0]
    target = _safe_next(form.get("next"))
    # login CSRF: another site's page must not log a visitor in as the attacker's user
    refused = _login_refused(request, form)
    if refused is not None:
        LOGGER.info("console login of %r from %s refused: %s", username,
                    client_address(request), refused)
        return _login_page(request, target, status=403, error=refused)
    try:
        session = await console.sessions.login(username, password, mechanism,
                                               client=client_address(request))
    except LoginFailed as exc:
        LOGGER.info("console login of %r from %s failed: %s", username, client_address(request),
                    exc)
        return _login_page(request, target, status=exc.status, error=str(exc),
                           username=username)
    LOGGER.info("console login of %r from %s (%s)", username, client_address(request),
                mechanism)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, session.token, max_age=IDLE_TIMEOUT_S, httponly=True,
                        samesite="strict", secure=console.settings.scheme == "https")
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


async def logout(request: Request) -> Response:
    console = console_of(request)
    session = session_of(request)
    if session is None:
        return login_redirect(request)
    form = await read_form(request)
    if form.get("csrf") == session.csrf and session is not console.sessions.shared:
        console.sessions.logout(session)
        LOGGER.info("console logout of %r", session.user)
    response = RedirectResponse("/login" if console.settings.login_required else "/",
                                status_code=303)
    response.delete_cookie(COOKIE)
    return response


async def metrics(request: Request) -> Response:
    """The broker's Prometheus exposition, as on ``metrics.listener`` (no login: scrapers
    cannot log in), so one listener can serve both the console and the metrics."""
    body = console_of(request).state.metrics.expose()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


async def static(request: Request) -> Response:
    found = console_of(request).static.get(request.path_params["name"])
    if found is None:
        return Response("not found\n", status_code=404, media_type="text/plain")
    body, media_type = found
    return Response(body, media_type=media_type,
                    headers={"Cache-Control": "public, max-age=86400"})
