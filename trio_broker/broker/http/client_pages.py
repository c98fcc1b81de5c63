"""The clients page: every client instance that asked for a telemetry subscription (KIP-714),
with what it was asked to push and the metrics it pushed last.

Why read from the broker state, not through a Kafka client as the other pages: Kafka has no API
that reads client metrics back (they go to a reporter plugin); this broker holds them itself
(``server/telemetry_state.py``). Who may see them follows Kafka's rule for the subscriptions
they come from: DESCRIBE_CONFIGS on the cluster, checked against the ACLs when an authorizer is
on.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from ..security.acl import CLUSTER_NAME, Operation, ResourceType
from .sessions import Session
from .web import console_of, error_page, page, render, session_may

#: metrics shown per client (the page stays readable; /metrics has them all)
MAX_SHOWN_SERIES = 500


class ClientRow(NamedTuple):
    instance_id: str
    client_id: str
    software: str
    source: str
    requested: str
    push_interval_ms: int
    #: seconds since its last push, None before the first
    last_push_s: float | None
    terminating: bool
    #: (metric, labels text, value) sorted by metric
    series: list[tuple[str, str, float]]
    total_series: int


def _rows(request: Request) -> list[ClientRow]:
    state = console_of(request).state
    telemetry = state.telemetry
    now_ms = state.now_ms()
    telemetry.expire(now_ms)
    rows = []
    for instance_id, i in telemetry.instances.items():
        series = sorted((name, ", ".join(f"{k}={v}" for k, v in labels), float(value))
                        for (name, labels), (_, value) in i.series.items())
        requested = ("every metric" if i.requested_metrics == ("",)
                     else ", ".join(i.requested_metrics) or "none")
        software = " ".join(p for p in (i.software_name, i.software_version) if p) or "-"
        rows.append(ClientRow(
            str(instance_id), i.client_id or "-", software, f"{i.source[0]}:{i.source[1]}",
            requested, i.push_interval_ms,
            round((now_ms - i.last_push_ms) / 1000, 1) if i.last_push_ms else None,
            i.terminating, series[:MAX_SHOWN_SERIES], len(series)))
    return sorted(rows, key=lambda r: (r.client_id, r.instance_id))


def _may_see(request: Request, session: Session) -> bool:
    return session_may(request, session, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER,
                       CLUSTER_NAME)


@page
async def clients(request: Request, session: Session) -> Response:
    if not _may_see(request, session):
        return error_page(request, session, "Client metrics need DESCRIBE_CONFIGS on the "
                          "cluster.", status=403)
    config = console_of(request).state.config
    return render(request, "clients.html", session, rows=_rows(request),
                  subscribe_all=config.telemetry_subscribe_all,
                  shown_at=time.strftime("%H:%M:%S"))
