"""The status page served at ``/``: what a person deciding about the worker wants to see, without Grafana.

Role, documents judged and the share of duplicates (a signer's page counts the
documents it signed, a shard's those it answered for), throughput and duplicate
share over the last minutes (inline SVG, no script, refreshed by the browser
every few seconds), consumer lag, index size, snapshot age, and the last
duplicates found beside their originals. Every number comes from the same
registry ``/metrics`` exposes, read once per page, so the page and a scrape
taken at the same moment agree.

Ids come from the input: every one is escaped (:mod:`stream_dedup.charts`).
A replica that is restoring or standing by has no rates, no lag and perhaps
no duplicates yet: the page says so rather than showing zeros as facts.
"""

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape

from stream_dedup.charts import Axis, Figure, Series, html_figures, html_page, html_table, line_chart
from stream_dedup.kafka.messages import match_coordinates
from stream_dedup.ops.metrics import WorkerMetrics
from stream_dedup.ops.status import (
    PARTS_WITHOUT_VERDICTS,
    FoundDuplicate,
    MetricsHistory,
    RecentDuplicates,
    Sample,
    rates,
    recent_rate,
    stage_part,
)

#: The browser reloads the page this often (seconds).
REFRESH_SECONDS = 5

_Labels = dict[str, str]


class _Readings:
    """Every sample of a registry, collected once, by sample name."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self._samples: defaultdict[str, list[tuple[_Labels, float]]] = defaultdict(list)
        for metric in metrics.registry.collect():
            for sample in metric.samples:
                self._samples[sample.name].append((sample.labels, sample.value))

    def value(self, name: str, **labels: str) -> float:
        """The value of one series (0 if absent)."""
        return next((v for found, v in self._samples[name] if found == labels), 0.0)

    def total(self, name: str) -> float:
        """The sum over every series of ``name``."""
        return sum(v for _, v in self._samples[name])

    def series(self, name: str) -> list[tuple[_Labels, float]]:
        return list(self._samples[name])


def render_status_page(
    metrics: WorkerMetrics,
    role: str,
    reason: str,
    history: MetricsHistory,
    duplicates: RecentDuplicates,
    now: float | None = None,
) -> str:
    """The whole page of a replica in ``role`` (for ``reason``), as of ``now`` (unix seconds; default: now)."""
    readings = _Readings(metrics)
    samples = history.samples()
    wall = time.time() if now is None else now
    part = stage_part(metrics)
    body = [
        _heading(readings, role, reason, part),
        html_figures(_figures(readings, samples, wall, part[0])),
        _charts(samples, history.clock(), part[0]),
        _lag_table(readings),
        "<h2>Last duplicates found</h2>",
        _duplicates_table(duplicates.newest_first()),
        f'<p class="note">Refreshed every {REFRESH_SECONDS} s; the charts hold one sample every '
        f"{history.interval_seconds:g} s. Raw numbers: "
        '<a href="/metrics">/metrics</a>, <a href="/healthz">/healthz</a>, <a href="/readyz">/readyz</a>.</p>',
    ]
    return html_page(f"stream-dedup: {role}", "".join(body), REFRESH_SECONDS)


def _heading(readings: _Readings, role: str, reason: str, part: tuple[str, str]) -> str:
    build = next((labels for labels, _ in readings.series("stream_dedup_build_info")), {})
    parameters = (
        f"version {build.get('version', '?')}, {_method_settings(build)}, parameters {build.get('fingerprint', '?')}"
    )
    shown = escape(role)
    unused = sorted(labels["setting"] for labels, _ in readings.series("stream_dedup_unused_settings"))
    warning = (
        f'<p class="note" id="unused-settings">Given but not read by this configuration: {escape(", ".join(unused))} '
        "(the start-up log says why).</p>"
        if unused
        else ""
    )
    return (
        f'<h1>stream-dedup {_part_name(part)} <span id="role" class="role role-{shown}">{shown}</span></h1>'
        f'<div class="subtitle">{escape(reason)}. {escape(parameters)}</div>{warning}'
    )


def _method_settings(build: dict[str, str]) -> str:
    """What decides the stage's duplicates, from ``stream_dedup_build_info``'s labels: only what its method reads.

    A ``simhash`` stage was shown a threshold and a banding it never reads.
    """
    method = build.get("method", "minhash")
    minhash = f"threshold {build.get('threshold', '?')}, {build.get('bands', '?')} bands x "
    minhash += f"{build.get('rows_per_band', '?')} rows"
    simhash = f"within {build.get('max_hamming', '?')} bits of SimHash"
    return {"minhash": minhash, "simhash": f"method simhash, {simhash}"}.get(
        method, f"method {method}: {minhash}, {simhash}"
    )


def _part_name(part: tuple[str, str]) -> str:
    """What the heading calls the process: ``worker`` (the single-process stage), ``signer``, ``shard K``, ``judge``."""
    role, shard = part
    return {"all": "worker", "shard": f"shard {escape(shard)}"}.get(role, escape(role))


def _documents_label(stage_role: str) -> str:
    """What the documents a part of the stage counts are: a signer signs them, a shard answers for them."""
    return {"signer": "documents signed", "shard": "documents answered for"}.get(stage_role, "documents judged")


def _figures(readings: _Readings, samples: Sequence[Sample], now: float, stage_role: str) -> list[Figure]:
    if stage_role in PARTS_WITHOUT_VERDICTS:
        # A signer or a shard gives no verdict: its documents are those it handled, and duplicates are the judge's.
        documents = readings.value("stream_dedup_role_documents_total", stage_role=stage_role)
        verdicts = [
            Figure("duplicates", "duplicates", "- (the judge's)"),
            Figure("duplicate-share", "duplicate share", "- (the judge's)"),
        ]
    else:
        # Every verdict kind is a document judged (contained, contains with containment on), as on the dashboard.
        duplicates = readings.value("stream_dedup_documents_total", verdict="duplicate")
        documents = readings.total("stream_dedup_documents_total")
        share = duplicates / documents if documents else None
        verdicts = [
            _count("duplicates", "duplicates", duplicates),
            Figure("duplicate-share", "duplicate share", "-" if share is None else f"{share:.1%}", share),
        ]
    last_minute = recent_rate(samples)
    lag = readings.series("stream_dedup_consumer_lag_records")
    snapshot = readings.value("stream_dedup_snapshot_last_success_timestamp_seconds")
    index_bytes = readings.value("stream_dedup_index_bytes")
    return [
        _count("documents", _documents_label(stage_role), documents),
        *verdicts,
        Figure(
            "throughput",
            "throughput, last minute",
            "-" if last_minute is None else f"{last_minute.documents_per_second:,.1f} documents/s",
            None if last_minute is None else last_minute.documents_per_second,
        ),
        (
            _count("lag", "consumer lag, records", sum(v for _, v in lag))
            if lag
            else Figure("lag", "consumer lag, records", "- (no partitions)")
        ),
        _count("indexed-documents", "documents in the index", readings.value("stream_dedup_indexed_documents")),
        Figure("index-bytes", "index memory", f"{index_bytes / 2**20:,.1f} MiB", index_bytes),
        (
            Figure("snapshot-age", "snapshot age", _age(now - snapshot), now - snapshot)
            if snapshot
            else Figure("snapshot-age", "snapshot age", "none yet")
        ),
        _count("dead-letters", "dead letters", readings.total("stream_dedup_dead_letters_total")),
        _count(
            "replay-remaining", "changelog records to replay", readings.value("stream_dedup_replay_remaining_records")
        ),
    ]


def _count(key: str, label: str, value: float) -> Figure:
    return Figure(key, label, f"{value:,.0f}", value)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _charts(samples: Sequence[Sample], now: float, stage_role: str) -> str:
    """Throughput and duplicate share per sample interval, against minutes before ``now`` (monotonic)."""
    intervals = rates(samples)
    judges = stage_role not in PARTS_WITHOUT_VERDICTS
    # The axis spans the history kept, at least a minute, so a young worker's line is not a sliver.
    oldest = samples[0].at if samples else now
    span = max(1.0, (now - oldest) / 60.0)
    minutes = Axis("minutes ago", -span, 0.0, ".0f" if span >= 5 else ".1f")
    throughput = [((r.at - now) / 60.0, r.documents_per_second) for r in intervals]
    shares = [((r.at - now) / 60.0, r.duplicate_share) for r in intervals if r.duplicate_share is not None and judges]
    top = max((y for _, y in throughput), default=0.0)
    waiting = "no samples yet" if len(samples) < 2 else "no documents in this window"
    if not judges:
        waiting = "no verdicts here: the judge gives them"
    return (
        '<h2>Last minutes</h2><div class="charts">'
        + "".join(
            [
                line_chart(
                    [Series(f"{_documents_label(stage_role)} per second", throughput)],
                    minutes,
                    Axis("documents/s", 0.0, max(top * 1.1, 1.0), ",g"),
                    title="Throughput",
                    width=560,
                    height=260,
                    empty="no samples yet",
                ),
                line_chart(
                    [Series("duplicates among the documents judged", shares)],
                    minutes,
                    Axis("share", 0.0, 1.0, ".0%"),
                    title="Duplicate share",
                    width=560,
                    height=260,
                    empty=waiting,
                ),
            ]
        )
        + "</div>"
    )


def _lag_table(readings: _Readings) -> str:
    lag = sorted(
        readings.series("stream_dedup_consumer_lag_records"), key=lambda s: (s[0]["topic"], int(s[0]["partition"]))
    )
    if not lag:
        return ""
    rows = [[labels["topic"], labels["partition"], f"{value:,.0f}"] for labels, value in lag]
    return "<h2>Consumer lag by partition</h2>" + html_table(
        ["topic", "partition", "records behind"], rows, [1, 2], "lag-table"
    )


def _duplicates_table(found: Iterable[FoundDuplicate]) -> str:
    rows = []
    for each in found:
        verdict, source = each.published
        match = "-"
        if verdict.match_source is not None:
            partition, offset = match_coordinates(verdict.match_source)
            match = f"{source.topic}:{partition}:{offset}"
        rows.append(
            [
                datetime.fromtimestamp(each.committed_at, UTC).strftime("%H:%M:%S UTC"),
                verdict.id,
                verdict.duplicate_of or "-",
                "-" if verdict.similarity is None else f"{verdict.similarity:.3f}",
                f"{source.topic}:{source.partition}:{source.offset}",
                match,
            ]
        )
    if not rows:
        return '<p id="no-duplicates" class="note">No duplicate found since this worker started.</p>'
    headers = ["found at", "id", "duplicate of", "similarity", "record (topic:partition:offset)", "original's record"]
    return html_table(headers, rows, [3], "last-duplicates")
