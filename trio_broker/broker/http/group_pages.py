"""Consumer group pages: the paged list, one group's lag and members, its live lag JSON, and
the reset and delete forms. Group ids may hold any character, so they travel as a query or
form field (``/groups/view?id=...``), never as a path segment."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...client.core.errors import KafkaError
from . import messages, writes
from .reads import LagRow, paged
from .sessions import Session
from .web import (
    Write,
    error_page,
    int_or_none,
    kafka_call,
    page,
    render,
    session_of,
    view_of,
    write_page,
)


def _page_number(request: Request) -> int:
    try:
        return int(request.query_params.get("page", "1"))
    except ValueError:
        return 1


@page
async def groups(request: Request, session: Session) -> Response:
    view = view_of(request, session)
    async with kafka_call():
        rows = await view.list_groups()
        shown, number, pages = paged(rows, _page_number(request))
        await view.describe_rows(shown)
    return render(request, "groups.html", session, rows=shown, page=number, pages=pages,
                  total=len(rows))


def lag_chart(rows: list[LagRow], bars_width: int = 360, bar_height: int = 14,
              ) -> dict[str, object]:
    """Bars for a small SVG chart of each partition's lag (drawn by the template; the SVG's
    view box scales it to the page)."""
    lags = [row.lag or 0 for row in rows]
    top = max(lags, default=0) or 1
    labels = [f"{row.topic}-{row.partition}" for row in rows]
    label_width = min(max((len(label) for label in labels), default=0) * 7 + 10, 420)
    width = label_width + bars_width + 60
    bars = [{"label": label, "lag": row.lag, "y": i * (bar_height + 4),
             "width": round(bars_width * (lag / top), 1)}
            for i, (label, row, lag) in enumerate(zip(labels, rows, lags, strict=True))]
    return {"bars": bars, "width": width, "height": len(rows) * (bar_height + 4),
            "bar_height": bar_height, "label_width": label_width}


@page
async def group(request: Request, session: Session) -> Response:
    group_id = request.query_params.get("id", "")
    view = view_of(request, session)
    async with kafka_call():
        description = await view.describe_group(group_id)
        rows = await view.group_lag(group_id, description)
    return render(request, "group.html", session, group_id=group_id, description=description,
                  rows=rows, total_lag=sum(row.lag or 0 for row in rows),
                  chart=lag_chart(rows[:200]), topics=sorted({row.topic for row in rows}),
                  targets=writes.RESET_TARGETS)


async def group_lag(request: Request) -> Response:
    """``{"lag": total, "partitions": {...}}`` for the group page's live chart."""
    session = session_of(request)
    if session is None:
        return JSONResponse({"error": "login required"}, status_code=401)
    group_id = request.query_params.get("id", "")
    view = view_of(request, session)
    try:
        async with kafka_call():
            description = await view.describe_group(group_id)
            rows = await view.group_lag(group_id, description)
    except KafkaError as exc:
        return JSONResponse({"error": str(exc)}, status_code=502)
    return JSONResponse({"state": description.state,
                         "lag": sum(row.lag or 0 for row in rows),
                         "partitions": {f"{r.topic}-{r.partition}": r.lag for r in rows}},
                        headers={"Cache-Control": "no-store"})


def _back(group_id: str) -> str:
    return f"/groups/view?id={quote(group_id, '')}"


@write_page
async def reset_offsets(write: Write) -> str:
    form = write.form
    group_id, topic = form.get("id", ""), form.get("topic", "")
    target = form.get("target", "")
    write.action = f"reset offsets of group {group_id!r} on {topic!r} to {target}"
    write.back = _back(group_id)
    value = 0
    text = form.get("value", "").strip()
    if target in ("offset", "shift", "timestamp"):
        if not text:
            raise ValueError(f"reset to {target} needs a value")
        value = messages.parse_time(text) if target == "timestamp" else int(text)
    metadata = await write.view.metadata([topic])
    info = metadata.topics.get(topic)
    if info is None or info.error:
        raise ValueError(f"topic {topic!r} does not exist")
    done = await writes.reset_offsets(write.view, group_id, info,
                                      int_or_none(form.get("partition")), target, value)
    shown = ", ".join(f"{tp.partition}:{offset}" for tp, offset in sorted(done.items()))
    return f"group {group_id} now starts {topic} at {shown}"


@write_page
async def delete_group(write: Write) -> str:
    group_id = write.form.get("id", "")
    write.action, write.back = f"delete group {group_id!r}", _back(group_id)
    await writes.delete_group(write.view, group_id)
    write.back = "/groups"
    return f"deleted group {group_id}"


async def not_found(request: Request) -> Response:
    return error_page(request, session_of(request), "no such page", 404)
