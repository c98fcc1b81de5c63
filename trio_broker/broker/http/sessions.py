"""The console's Kafka clients: one shared admin client, or one per logged-in user.

Why a client per login: when the broker's clients authenticate with SASL, the console asks the
user for their own credentials and logs in to the broker with them, so the broker (and a later
authorizer) sees that user, not the console. The login *is* the SASL exchange: a wrong password
fails there, with the broker's own message, and nothing is stored but the open connection.

Each client lives in the console's nursery, in its own cancel scope: logging out, expiry after
``IDLE_TIMEOUT_S`` without a request, or eviction closes it. Why eviction goes by user, whatever
the address: a user who logs in again and again, from one address or from many, must push out
only their own sessions, never another user's. So one user keeps at most
``MAX_SESSIONS_PER_USER`` (a new login closes that user's least recently used one). When
``MAX_SESSIONS`` are open, a user's new login closes their own least recently used session if
they have one, else one of the user holding the most (who stays logged in elsewhere); when
every open session is a different user's, the login is refused (503) rather than logging
anyone out. Logins run at most ``MAX_CONCURRENT_LOGINS`` at a time, so a flood of attempts costs
the broker a bounded number of connections. Every form carries the session's CSRF token, checked
on every write; the login form carries a token of its own (``overview``).
"""

from __future__ import annotations

import logging
import secrets
from collections import Counter, OrderedDict
from typing import Any

import trio

from ...client.core.errors import KafkaError
from ...client.core.security import Security
from ...client.trio.admin import Admin
from ...client.trio.config import ADMIN_DEFAULTS, normalize
from .settings import ConsoleSettings

LOGGER = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 30 * 60
MAX_SESSIONS = 64
MAX_SESSIONS_PER_USER = 8
MAX_CONCURRENT_LOGINS = 4
LOGIN_TIMEOUT_S = 10
COOKIE = "trio_broker_console"


class LoginFailed(Exception):
    """The broker refused the credentials (or could not be reached), or the console has no
    room; ``str()`` says which, ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


class Session:
    """One Kafka client of the console and who uses it."""

    def __init__(self, admin: Admin, scope: trio.CancelScope, user: str | None,
                 client: str = "?") -> None:
        self.admin = admin
        self.user = user
        #: the address that logged in
        self.client = client
        self.token = secrets.token_urlsafe(32)
        self.csrf = secrets.token_urlsafe(32)
        self.last_used = trio.current_time()
        self._scope = scope

    @property
    def who(self) -> str:
        return self.user if self.user is not None else "(no login)"

    def close(self) -> None:
        self._scope.cancel()


class Sessions:
    """The shared client (no login) or the logged-in users' clients."""

    def __init__(self, settings: ConsoleSettings, nursery: trio.Nursery) -> None:
        self.settings = settings
        self._nursery = nursery
        self._by_token: OrderedDict[str, Session] = OrderedDict()
        self._logins = trio.Semaphore(MAX_CONCURRENT_LOGINS)
        self.shared: Session | None = None

    async def start(self) -> None:
        """Open the shared client when no login is needed; start the expiry task."""
        if not self.settings.login_required:
            self.shared = await self._open(self.settings.client_config(), None)
        self._nursery.start_soon(self._expire_loop)

    async def _open(self, config: dict[str, Any], user: str | None,
                    client: str = "?") -> Session:
        async def hold(task_status: trio.TaskStatus[Session]) -> None:
            admin = Admin(normalize("admin", ADMIN_DEFAULTS, {
                "bootstrap.servers": self.settings.bootstrap, **config}, {}))
            context = self.settings.ssl_context()
            if context is not None:  # trust the broker's own certificate (settings.py)
                admin.client.security = Security(admin.client.security.protocol, context,
                                                 admin.client.security.sasl)
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    admin.client.start(nursery)
                    try:
                        task_status.started(Session(admin, scope, user, client))
                        await trio.sleep_forever()
                    finally:
                        admin.client.close()
                        nursery.cancel_scope.cancel()

        session: Session = await self._nursery.start(hold)
        return session

    async def login(self, username: str, password: str, mechanism: str, *,
                    client: str = "?") -> Session:
        """Log in to the broker as ``username`` for the visitor at address ``client``; raises
        ``LoginFailed``."""
        if mechanism not in self.settings.mechanisms:
            raise LoginFailed(f"mechanism {mechanism!r} is not enabled")
        async with self._logins:
            session = await self._open(
                self.settings.client_config(username, password, mechanism), username, client)
            try:
                with trio.fail_after(LOGIN_TIMEOUT_S):
                    await session.admin.client.refresh_metadata()
            except KafkaError as exc:
                session.close()
                raise LoginFailed(str(exc)) from None
            except trio.TooSlowError:
                session.close()
                raise LoginFailed(f"the broker did not answer within {LOGIN_TIMEOUT_S} s"
                                  ) from None
        try:
            self._make_room(username)
        except LoginFailed:
            session.close()
            raise
        self._by_token[session.token] = session
        return session

    def _make_room(self, user: str | None) -> None:
        """Close sessions so that ``user`` may open one more (the module's docstring); raises
        LoginFailed (503) when only other users' last sessions could make room."""
        mine = [s for s in self._by_token.values() if s.user == user]  # least recent first
        while len(mine) >= MAX_SESSIONS_PER_USER:
            self._evict(mine.pop(0), f"{MAX_SESSIONS_PER_USER} open for this user")
        while len(self._by_token) >= MAX_SESSIONS:
            if mine:
                self._evict(mine.pop(0), f"{MAX_SESSIONS} open")
                continue
            counts = Counter(s.user for s in self._by_token.values())
            biggest = max(counts, key=counts.__getitem__)
            if counts[biggest] < 2:
                raise LoginFailed(f"the console has {MAX_SESSIONS} users logged in: try again "
                                  "when one logs out", status=503)
            victim = next(s for s in self._by_token.values() if s.user == biggest)
            self._evict(victim, f"{MAX_SESSIONS} open, {counts[biggest]} of them this user's")

    def _evict(self, session: Session, why: str) -> None:
        del self._by_token[session.token]
        LOGGER.info("console: session of %s from %s evicted (%s)", session.who, session.client,
                    why)
        session.close()

    def get(self, token: str | None) -> Session | None:
        """The session for a cookie value (the shared one when no login is needed)."""
        if self.shared is not None:
            return self.shared
        session = self._by_token.get(token or "")
        if session is None:
            return None
        session.last_used = trio.current_time()
        self._by_token.move_to_end(session.token)
        return session

    def logout(self, session: Session) -> None:
        if self._by_token.pop(session.token, None) is not None:
            session.close()

    async def _expire_loop(self) -> None:
        while True:
            await trio.sleep(60)
            deadline = trio.current_time() - IDLE_TIMEOUT_S
            for token, session in list(self._by_token.items()):
                if session.last_used < deadline:
                    del self._by_token[token]
                    LOGGER.info("console: session of %s expired", session.who)
                    session.close()


class Flashes:
    """One-shot messages shown after a write's redirect, found by a random id in the URL."""

    def __init__(self, limit: int = 256) -> None:
        self._items: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._limit = limit

    def add(self, kind: str, text: str) -> str:
        key = secrets.token_urlsafe(9)
        self._items[key] = (kind, text)
        while len(self._items) > self._limit:
            self._items.popitem(last=False)
        return key

    def pop(self, key: str | None) -> tuple[str, str] | None:
        return self._items.pop(key, None) if key else None
