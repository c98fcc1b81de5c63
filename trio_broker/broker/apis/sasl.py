"""SaslHandshake (v1) and SaslAuthenticate (v0-1): the Kafka face of ``security.sasl``.

Why the handlers are thin: the connection's ``SaslAuthenticator`` owns the state machine and
the network layer enforces it (gating, frame limit, delayed close after a failure); these
handlers only translate requests into its calls. On a listener without SASL, or after a
connection has authenticated, both answer ILLEGAL_SASL_STATE, as Kafka's ``KafkaApis`` does.
"""

from __future__ import annotations

import trio

from ...protocol.errors import ErrorCode
from ..security.sasl import SaslState
from ..server.bodies import SaslAuthenticateRequest, SaslHandshakeRequest
from ..server.context import HandlerContext, HandlerResult


async def handle_sasl_handshake(ctx: HandlerContext,
                                request: SaslHandshakeRequest) -> HandlerResult:
    auth = ctx.request.sasl
    if auth is None or not auth.accepts_handshake:
        mechanisms = list(auth.settings.mechanisms) if auth is not None else []
        return ctx.response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=mechanisms)
    error, mechanisms = auth.handshake(request.mechanism)
    return ctx.response(error_code=error, mechanisms=mechanisms)


async def handle_sasl_authenticate(ctx: HandlerContext,
                                   request: SaslAuthenticateRequest) -> HandlerResult:
    auth = ctx.request.sasl
    if auth is None or auth.state is not SaslState.AUTHENTICATE:
        state = "no SASL on this listener" if auth is None else f"state {auth.state.value}"
        return ctx.response(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                            error_message=f"SaslAuthenticate request received in {state}",
                            auth_bytes=b"", session_lifetime_ms=0)
    token = bytes(request.auth_bytes or b"")
    # PLAIN costs a PBKDF2 of a few milliseconds: keep it off the event loop, in its own limiter
    limiter = auth.settings.plain_limiter if auth.costly(token) else None
    error, message, reply = await trio.to_thread.run_sync(auth.authenticate, token,
                                                          limiter=limiter)
    return ctx.response(error_code=error, error_message=message, auth_bytes=reply,
                        session_lifetime_ms=auth.session_lifetime_ms if not error else 0)
