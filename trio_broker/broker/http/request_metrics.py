"""Requests, errors and latencies of the broker's HTTP services (the Schema Registry, the REST
proxy), per endpoint, on the broker's ``/metrics``.

Why here and under these names: Confluent's services report their requests through rest-utils'
Jersey metrics (``kafka.schema.registry:type=jersey-metrics``, ``kafka.rest:type=jersey-metrics``:
request and error counts and latencies, per endpoint), which the JMX exporter turns into
``kafka_schema_registry_jersey_metrics_*`` and ``kafka_rest_jersey_metrics_*`` series; the same
prefixes here put both services on the dashboards written for them. The endpoint label is the
method and the route's path template (``POST /subjects/{subject}/versions``), so the series stay
few whatever the paths asked for; a path no route serves counts as ``unmatched``.

Numbers are plain dictionaries updated per request; prometheus-client is imported only when
the broker is scraped (``collect``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client.core import Metric

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SCHEMA_REGISTRY = "kafka_schema_registry_jersey_metrics"
_CONVERTOR = re.compile(r"{(\w+):\w+}")
REST_PROXY = "kafka_rest_jersey_metrics"


class HttpMetrics:
    """One service's requests by endpoint (``prefix``: the series' common name)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        #: endpoint -> [requests, seconds spent answering them]
        self._requests: dict[str, list[float]] = {}
        #: (endpoint, HTTP status) -> answers with that status, 4xx and 5xx only
        self._errors: dict[tuple[str, str], int] = {}

    def record(self, endpoint: str, status: int, seconds: float) -> None:
        entry = self._requests.get(endpoint)
        if entry is None:
            entry = self._requests[endpoint] = [0, 0.0]
        entry[0] += 1
        entry[1] += seconds
        if status >= 400:
            key = (endpoint, str(status))
            self._errors[key] = self._errors.get(key, 0) + 1

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, SummaryMetricFamily

        requests = CounterMetricFamily(f"{self.prefix}_request", "HTTP requests answered.",
                                       labels=["endpoint"])
        latency = SummaryMetricFamily(f"{self.prefix}_request_latency_seconds",
                                      "Time to answer a request (to the last body byte).",
                                      labels=["endpoint"])
        for endpoint, (count, seconds) in sorted(self._requests.items()):
            requests.add_metric([endpoint], count)
            latency.add_metric([endpoint], count_value=int(count), sum_value=seconds)
        errors = CounterMetricFamily(f"{self.prefix}_request_error",
                                     "HTTP requests answered with a 4xx or 5xx status.",
                                     labels=["endpoint", "http_status_code"])
        for (endpoint, status), count in sorted(self._errors.items()):
            errors.add_metric([endpoint, status], count)
        yield from (requests, errors, latency)


class CountRequests:
    """ASGI middleware: each HTTP request into ``metrics``, by the route that served it."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # an exception before any answer is the server's error
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")  # set by Starlette's router on the route it matched
            path = getattr(route, "path", None)
            # the template as the API's reference writes it: {subject}, not {subject:path}
            template = _CONVERTOR.sub(r"{\1}", path) if path else None
            endpoint = f"{scope['method']} {template}" if template else "unmatched"
            self.metrics.record(endpoint, status, time.perf_counter() - started)


__all__ = ["REST_PROXY", "SCHEMA_REGISTRY", "CountRequests", "HttpMetrics"]
