"""HTTP basic authentication, mapped to the broker's SASL users
(``rest.proxy.authentication.method=BASIC``).

Why the user's own SASL login: the proxy does not keep a user list of its own. The user name and
password of a request's ``Authorization: Basic`` header are the SASL credentials its Kafka
client logs in to the broker's SASL_PLAINTEXT listener with, so a wrong password fails in the
broker's SASL exchange (401), and every request then runs as that user: the authorizer's ACLs
decide what they may read and write (403 with Confluent's 40301 when it says no).

Each user's client is kept between requests, found by the user name and a salted hash of the
password (a request with another password is a new login, never the old client).
``MAX_SESSIONS`` are kept at most (a new login closes the least recently used), one unused for
``IDLE_TIMEOUT_S`` is closed, and logins run ``MAX_CONCURRENT_LOGINS`` at a time, so a flood of
wrong passwords costs the broker a bounded number of connections.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import attrs
import trio

from ...client.core.errors import KafkaError
from ...client.trio.admin import Admin
from ...client.trio.config import ADMIN_DEFAULTS, normalize
from ..http.basic_auth import parse_basic
from .errors import RestError

LOGGER = logging.getLogger("trio_broker.broker.rest_proxy")

MAX_SESSIONS = 64
MAX_CONCURRENT_LOGINS = 4
IDLE_TIMEOUT_S = 300.0
LOGIN_TIMEOUT_S = 10.0
REALM = "trio-broker"


def unauthorized(message: str = "Unauthorized") -> RestError:
    return RestError(401, 401, message)


def credentials(authorization: str | None) -> tuple[str, str]:
    """``Basic base64(user:password)`` -> (user, password), or 401."""
    parsed = parse_basic(authorization)
    if parsed is None:
        raise unauthorized()
    return parsed


@attrs.define(eq=False)
class Session:
    user: str
    admin: Admin
    scope: trio.CancelScope
    last_used: float = attrs.field(factory=trio.current_time)


class BasicAuth:
    """The logged-in users' Kafka clients."""

    def __init__(self, client_config: Callable[[str, str], dict[str, Any]],
                 nursery: trio.Nursery) -> None:
        #: (user, password) -> the admin client's config for them
        self._client_config = client_config
        self._nursery = nursery
        self._salt = secrets.token_bytes(16)
        self._sessions: OrderedDict[tuple[str, bytes], Session] = OrderedDict()
        self._logins = trio.Semaphore(MAX_CONCURRENT_LOGINS)

    def client_config(self, user: str, password: str) -> dict[str, Any]:
        return self._client_config(user, password)

    async def login(self, user: str, password: str) -> Session:
        """The user's client, logging in with their SASL credentials if need be; 401 when
        the broker refuses them."""
        key = (user, hashlib.sha256(self._salt + password.encode()).digest())
        session = self._sessions.get(key)
        if session is not None:
            session.last_used = trio.current_time()
            self._sessions.move_to_end(key)
            return session
        async with self._logins:
            session = await self._open(user, password)
            try:
                with trio.fail_after(LOGIN_TIMEOUT_S):
                    await session.admin.client.refresh_metadata()
            except (KafkaError, trio.TooSlowError) as exc:
                session.scope.cancel()
                LOGGER.info("REST proxy: login of %s refused: %s", user, exc)
                raise unauthorized() from None
        while len(self._sessions) >= MAX_SESSIONS:
            _, oldest = self._sessions.popitem(last=False)
            oldest.scope.cancel()
        self._sessions[key] = session
        return session

    async def _open(self, user: str, password: str) -> Session:
        async def hold(task_status: trio.TaskStatus[Session]) -> None:
            admin = Admin(normalize("admin", ADMIN_DEFAULTS, self._client_config(user, password),
                                    {}))
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    admin.client.start(nursery)
                    try:
                        task_status.started(Session(user, admin, scope))
                        await trio.sleep_forever()
                    finally:
                        admin.client.close()
                        nursery.cancel_scope.cancel()

        session: Session = await self._nursery.start(hold)
        return session

    async def expire_loop(self) -> None:
        while True:
            await trio.sleep(min(60.0, IDLE_TIMEOUT_S / 2))
            deadline = trio.current_time() - IDLE_TIMEOUT_S
            for key, session in list(self._sessions.items()):
                if session.last_used < deadline:
                    del self._sessions[key]
                    session.scope.cancel()
