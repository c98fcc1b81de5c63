"""The broker's own counters and gauges as plain numbers, turned into Prometheus families only
when scraped.

Why not prometheus-client's ``Counter`` and ``Gauge``: importing prometheus-client imports its
whole package (the HTTP exposition server, ``http.server``, ``email``, ``gzip``), which every
start would pay for (docs/benchmarks.md, "Start-up"), and its objects take a lock on every
``inc``. A broker that is never scraped needs none
of it; these keep the numbers, and ``collect`` (imported with the first scrape) names them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import Metric


class Value:
    """A label-less counter or gauge: ``inc``, ``dec``, ``set``, or ``set_function`` to read it
    from elsewhere at scrape time."""

    __slots__ = ("_function", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self._function: Callable[[], float] | None = None

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)

    def set_function(self, function: Callable[[], float]) -> None:
        self._function = function

    def get(self) -> float:
        """The value now (the function's answer, when one was set)."""
        return float(self._function()) if self._function is not None else self.value


class Family:
    """A counter or gauge under one Kafka name, label-less or with labels (``labels(...)``)."""

    def __init__(self, name: str, doc: str, kind: str, labelnames: Sequence[str] = ()) -> None:
        if kind not in ("counter", "gauge"):
            raise ValueError(f"not a counter or a gauge: {kind}")
        self.name, self.doc, self.kind = name, doc, kind
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], Value] = {}
        self._value = Value()

    def labels(self, *values: str) -> Value:
        """The child of these label values (created on first use, as prometheus-client's)."""
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} has labels {self.labelnames}, given {values}")
        key = tuple(str(v) for v in values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = Value()
        return child

    def _unlabelled(self) -> Value:
        if self.labelnames:
            raise ValueError(f"{self.name} has labels {self.labelnames}: use labels(...)")
        return self._value

    def inc(self, amount: float = 1) -> None:
        # no call for a label-less family: the socket server counts every read and write here
        (self._unlabelled() if self.labelnames else self._value).value += amount

    def dec(self, amount: float = 1) -> None:
        self._unlabelled().value -= amount

    def set(self, value: float) -> None:
        self._unlabelled().set(value)

    def set_function(self, function: Callable[[], float]) -> None:
        self._unlabelled().set_function(function)

    def get(self, *labels: str) -> float:
        """The value of the label-less metric, or of the child of ``labels`` (0 if none yet)."""
        if not labels:
            return self._unlabelled().get()
        child = self._children.get(tuple(labels))
        return child.get() if child is not None else 0.0

    def family(self) -> Metric:
        """The Prometheus family (a counter's samples get ``_total``, as prometheus-client's)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        cls = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        family = cls(self.name, self.doc, labels=self.labelnames)
        if self.labelnames:
            for labels, child in sorted(self._children.items()):
                family.add_metric(list(labels), child.get())
        else:
            family.add_metric([], self._value.get())
        return family


class Families:
    """The broker's families, in the order they are made: ``counter(...)``, ``gauge(...)``,
    and ``collect`` for the registry."""

    def __init__(self) -> None:
        self._all: list[Family] = []

    def counter(self, name: str, doc: str, labelnames: Sequence[str] = ()) -> Family:
        return self._add(Family(name, doc, "counter", labelnames))

    def gauge(self, name: str, doc: str, labelnames: Sequence[str] = ()) -> Family:
        return self._add(Family(name, doc, "gauge", labelnames))

    def _add(self, family: Family) -> Family:
        if any(f.name == family.name for f in self._all):
            raise ValueError(f"duplicate metric {family.name}")
        self._all.append(family)
        return family

    def collect(self) -> Iterator[Metric]:
        for family in self._all:
            yield family.family()


__all__ = ["Families", "Family", "Value"]
