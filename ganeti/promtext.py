"""The Prometheus text exposition format (version 0.0.4): pure helpers.

    out = Exposition()
    out.family("ganeti_daemon_up", "gauge", "Whether the daemon runs.")
    out.sample("ganeti_daemon_up", 1, daemon="ganeti-noded")
    out.histogram("ganeti_job_run_seconds", "...", BUCKETS, values, opcode="OP_TEST_DELAY")
    body = out.render()
"""

from __future__ import annotations

import math
from typing import Iterable

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def labels_text(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join('%s="%s"' % (k, escape_label(str(v))) for k, v in labels.items()) + "}"


class Exposition:
    """Metric families in the order they are declared, their samples grouped."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def family(self, name: str, kind: str, help_text: str) -> None:
        if name not in self._families:
            self._families[name] = (kind, help_text, [])

    def sample(self, name: str, value: float, suffix: str = "", **labels: str) -> None:
        """A sample of family C{name} (C{suffix}: C{_bucket}, C{_sum}, C{_count})."""
        self._families[name][2].append("%s%s%s %s" % (name, suffix, labels_text(labels), format_value(value)))

    def histogram(self, name: str, help_text: str, buckets: Iterable[float], values: Iterable[float],
                  **labels: str) -> None:
        """A histogram of C{values} (cumulative C{le} buckets, C{_sum}, C{_count})."""
        self.family(name, "histogram", help_text)
        data = sorted(values)
        total = 0
        index = 0
        for bound in buckets:
            while index < len(data) and data[index] <= bound:
                index += 1
            self.sample(name, index, "_bucket", **labels, le=format_value(float(bound)))
        total = len(data)
        self.sample(name, total, "_bucket", **labels, le="+Inf")
        self.sample(name, float(sum(data)), "_sum", **labels)
        self.sample(name, total, "_count", **labels)

    def histogram_counts(self, name: str, help_text: str, buckets: Iterable[float], counts: list[int],
                         total: float, count: int, **labels: str) -> None:
        """A histogram from cumulative C{counts} per bucket already kept by the caller."""
        self.family(name, "histogram", help_text)
        for bound, n in zip(buckets, counts):
            self.sample(name, n, "_bucket", **labels, le=format_value(float(bound)))
        self.sample(name, count, "_bucket", **labels, le="+Inf")
        self.sample(name, float(total), "_sum", **labels)
        self.sample(name, count, "_count", **labels)

    def render(self) -> bytes:
        lines = []
        for name, (kind, help_text, samples) in self._families.items():
            if not samples:
                continue
            lines.append("# HELP %s %s" % (name, help_text.replace("\\", "\\\\").replace("\n", "\\n")))
            lines.append("# TYPE %s %s" % (name, kind))
            lines.extend(samples)
        return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


class Histogram:
    """A cumulative histogram kept in memory (e.g. request latencies)."""

    def __init__(self, buckets: Iterable[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * len(self.buckets)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.total += value
        self.count += 1
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


__all__ = ["CONTENT_TYPE", "Exposition", "Histogram", "escape_label", "format_value", "labels_text"]
