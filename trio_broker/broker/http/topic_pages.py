"""Topic pages: the paged list, one topic's partitions and configs, the message browser, and
the forms that create, delete, alter, grow and produce."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from ...client.core.metadata import TopicInfo
from . import messages, writes
from .reads import (
    KafkaView,
    config_rows,
    fill_topic_rows,
    overrides_text,
    paged,
    partition_rows,
    topic_rows,
)
from .sessions import Session
from .web import (
    Write,
    console_of,
    error_page,
    int_or_none,
    kafka_call,
    page,
    render,
    view_of,
    write_page,
)


def _int(text: str | None, default: int) -> int:
    try:
        value = int_or_none(text)
    except ValueError:
        return default
    return default if value is None else value


async def _topic(view: KafkaView, name: str) -> TopicInfo | None:
    metadata = await view.metadata([name])
    info = metadata.topics.get(name)
    return None if info is None or info.error else info


@page
async def topics(request: Request, session: Session) -> Response:
    query = request.query_params.get("q", "")
    view = view_of(request, session)
    async with kafka_call():
        metadata = await view.metadata()
        rows, number, pages = paged(topic_rows(metadata, query),
                                    _int(request.query_params.get("page"), 1))
        await fill_topic_rows(view, metadata, rows)
    return render(request, "topics.html", session, rows=rows, query=query, page=number,
                  pages=pages, total=sum(1 for _ in topic_rows(metadata, query)))


@page
async def topic(request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    view = view_of(request, session)
    async with kafka_call():
        info = await _topic(view, name)
        if info is None:
            return error_page(request, session, f"topic {name!r} does not exist", 404)
        offsets = await view.start_end([info])
        sizes = await view.sizes([info])
        error, entries = (await view.configs([name]))[name]
    return render(request, "topic.html", session, info=info,
                  partitions=partition_rows(info, offsets, sizes),
                  configs=config_rows(entries), configs_error=error,
                  overrides=overrides_text(entries))


def _browse_query(params: Any) -> messages.BrowseQuery:
    mode = params.get("mode", "newest")
    fmt = params.get("format", "auto")
    when = params.get("timestamp", "").strip()
    timestamp_ms = messages.parse_time(when) if when else 0
    return messages.BrowseQuery(
        partition=int_or_none(params.get("partition")),
        mode=mode if mode in messages.MODES else "newest",
        offset=_int(params.get("offset"), 0), timestamp_ms=timestamp_ms,
        limit=min(max(_int(params.get("limit"), messages.DEFAULT_LIMIT), 1),
                  messages.MAX_LIMIT),
        fmt=fmt if fmt in messages.FORMATS else "auto", filter=params.get("filter", ""))


@page
async def browse(request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    view = view_of(request, session)
    try:
        query = _browse_query(request.query_params)
    except ValueError as exc:
        return error_page(request, session, f"bad browser query: {exc}", 400)
    async with kafka_call():
        info = await _topic(view, name)
        if info is None:
            return error_page(request, session, f"topic {name!r} does not exist", 404)
        offsets = await view.start_end([info])
        result = await messages.browse(view, info, offsets, query,
                                       console_of(request).state.attached.schema_registry)
    return render(request, "messages.html", session, info=info, query=query, result=result,
                  params=request.query_params, formats=messages.FORMATS,
                  max_limit=messages.MAX_LIMIT)


async def _topic_or_fail(view: KafkaView, name: str) -> TopicInfo:
    info = await _topic(view, name)
    if info is None:
        raise ValueError(f"topic {name!r} does not exist")
    return info


@write_page
async def create_topic(write: Write) -> str:
    name = write.form.get("name", "").strip()
    write.action, write.back = f"create topic {name!r}", "/topics"
    await writes.create_topic(write.view, name, int_or_none(write.form.get("partitions")),
                              writes.parse_configs(write.form.get("configs", "")))
    write.back = f"/topics/{quote(name, '')}"
    return f"created topic {name}"


@write_page
async def delete_topic(write: Write) -> str:
    name = write.request.path_params["name"]
    write.action, write.back = f"delete topic {name!r}", f"/topics/{quote(name, '')}"
    await writes.delete_topic(write.view, name)
    write.back = "/topics"
    return f"deleted topic {name}"


@write_page
async def alter_configs(write: Write) -> str:
    name = write.request.path_params["name"]
    write.action, write.back = f"alter configs of {name!r}", f"/topics/{quote(name, '')}"
    configs = writes.parse_configs(write.form.get("configs", ""))
    await writes.alter_configs(write.view, name, configs)
    shown = ", ".join(f"{k}={v}" for k, v in configs.items()) or "none"
    return f"set the overrides of {name} to: {shown}"


@write_page
async def add_partitions(write: Write) -> str:
    name = write.request.path_params["name"]
    write.action, write.back = f"add partitions to {name!r}", f"/topics/{quote(name, '')}"
    total = int_or_none(write.form.get("partitions"))
    if total is None:
        raise ValueError("give the new total number of partitions")
    await writes.add_partitions(write.view, name, total)
    return f"{name} now has {total} partitions"


@write_page
async def produce(write: Write) -> str:
    name = write.request.path_params["name"]
    form = write.form
    write.action = f"produce to {name!r}"
    write.back = f"/topics/{quote(name, '')}/messages"
    info = await _topic_or_fail(write.view, name)
    key = None if form.get("null_key") or not form.get("key") else form["key"].encode()
    value = None if form.get("null_value") else form.get("value", "").encode()
    partition = messages.choose_partition(info, int_or_none(form.get("partition")), key)
    offset = await messages.produce(write.view, info, partition, key, value,
                                    messages.parse_headers(form.get("headers", "")))
    write.back += f"?partition={partition}&mode=offset&offset={offset}"
    return f"produced to {name}-{partition} at offset {offset}"
