"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): the SCRAM users of
``sasl.credentials.file`` (unset: ``scram-credentials.json`` in the first log dir), managed over
the wire.

Why the file: it is where this broker's SASL listeners find their users (``security/``), and an
alter replaces it atomically and fsynced (mode 0600), so a change survives a crash and the next
login sees it (the listeners re-read a changed file). Kafka's rules and messages apply
(``security.credentials.alter_scram_credentials``). As Kafka stores credentials with no setting,
so does this broker: a file that does not exist yet holds no users.
"""

from __future__ import annotations

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..security.credentials import (
    CredentialsError,
    ScramDeletion,
    ScramUpsertion,
    UserResult,
    alter_scram_credentials,
    describe_scram_credentials,
)
from ..security.scram import MECHANISM_TYPES
from ..server import authz
from ..server.bodies import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from ..server.context import HandlerContext, HandlerResult

_TYPE_OF = {name: number for number, name in MECHANISM_TYPES.items()}
_DESCRIBE = response_type(ApiKey.DescribeUserScramCredentials).DescribeUserScramCredentialsResult
_ALTER = response_type(ApiKey.AlterUserScramCredentials).AlterUserScramCredentialsResult


async def handle_describe_user_scram_credentials(
        ctx: HandlerContext, request: DescribeUserScramCredentialsRequest) -> HandlerResult:
    users = None if request.users is None else [u.name for u in request.users]
    if not authz.cluster(ctx, authz.DESCRIBE):
        return ctx.response(throttle_time_ms=0,
                            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=None, results=[])
    path = ctx.broker.config.scram_credentials_path
    try:
        found = await trio.to_thread.run_sync(describe_scram_credentials, path, users)
    except CredentialsError as exc:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                            error_message=str(exc), results=[])
    info = _DESCRIBE.CredentialInfo
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                        results=[_DESCRIBE(user=user, error_code=error, error_message=message,
                                           credential_infos=[
                                               info(mechanism=_TYPE_OF[m], iterations=n)
                                               for m, n in mechanisms.items()])
                                 for user, error, message, mechanisms in found])


async def handle_alter_user_scram_credentials(
        ctx: HandlerContext, request: AlterUserScramCredentialsRequest) -> HandlerResult:
    deletions = [ScramDeletion(d.name, MECHANISM_TYPES.get(d.mechanism))
                 for d in request.deletions]
    upsertions = [ScramUpsertion(u.name, MECHANISM_TYPES.get(u.mechanism), u.iterations,
                                 bytes(u.salt), bytes(u.salted_password))
                  for u in request.upsertions]
    path = ctx.broker.config.scram_credentials_path
    results: list[UserResult]
    if not authz.cluster(ctx, authz.ALTER):
        users = dict.fromkeys([*(d.user for d in deletions), *(u.user for u in upsertions)])
        results = [(user, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for user in users]
    else:
        try:
            results = await trio.to_thread.run_sync(alter_scram_credentials, path, deletions,
                                                    upsertions)
        except CredentialsError as exc:
            results = [(user, ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) for user in dict.fromkeys(
                [*(d.user for d in deletions), *(u.user for u in upsertions)])]
    return ctx.response(throttle_time_ms=0, results=[
        _ALTER(user=user, error_code=error, error_message=message)
        for user, error, message in results])
