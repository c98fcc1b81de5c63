"""The overview page, its live JSON, the login and logout forms, and the static assets."""

from __future__ import annotations

import logging

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


async def login_form(request: Request) -> Response:
    console = console_of(request)
    if not console.settings.login_required:
        return RedirectResponse("/", status_code=303)
    return render(request, "login.html", session_of(request), error=None,
                  next=_safe_next(request.query_params.get("next")), username="")


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
    refused = cross_site(request)
    if refused is not None:
        LOGGER.info("console login of %r from %s refused: %s", username,
                    client_address(request), refused)
        return render(request, "login.html", None, status=403, error=refused, next=target,
                      username="")
    try:
        session = await console.sessions.login(username, password, mechanism,
                                               client=client_address(request))
    except LoginFailed as exc:
        LOGGER.info("console login of %r from %s failed: %s", username, client_address(request),
                    exc)
        return render(request, "login.html", None, status=401, error=str(exc), next=target,
                      username=username)
    LOGGER.info("console login of %r from %s (%s)", username, client_address(request),
                mechanism)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, session.token, max_age=IDLE_TIMEOUT_S, httponly=True,
                        samesite="strict", secure=console.settings.scheme == "https")
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
