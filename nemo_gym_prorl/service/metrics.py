# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`GET /metrics`: Prometheus text exposition, computed from the pipeline at scrape time.

Values are read when scraped (a registry per scrape, not the global one, so several apps can
live in one process); prometheus_client writes the exposition. The latency histograms
(`nemo_gym_prorl.latency`: event-loop lag, sandbox open and close) are the process's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from nemo_gym_prorl import latency
from nemo_gym_prorl.pipeline import Pipeline, PipelineStatus, Stage
from nemo_gym_prorl.service.backends import BackendInfo

CONTENT_TYPE = CONTENT_TYPE_LATEST


@dataclass
class Metric:
    name: str  # counters without the `_total` suffix (added when rendered)
    kind: Literal["counter", "gauge"]
    help: str
    label: str | None = None
    samples: list[tuple[str | None, float]] = field(default_factory=list)


def collect(pipeline: Pipeline, backends: list[BackendInfo], accepting: bool) -> list[Metric]:
    status = pipeline.status()
    totals = pipeline.stage_totals
    stages = list(Stage)

    def per_stage(
        name: str, kind: Literal["counter", "gauge"], help_: str, values: dict[Stage, float]
    ) -> Metric:
        return Metric(name, kind, help_, "stage", [(s.value, float(values[s])) for s in stages])

    backend_states = {"healthy": 0, "unhealthy": 0, "unknown": 0, "draining": 0}
    for b in backends:
        key = "draining" if b.draining else {True: "healthy", False: "unhealthy", None: "unknown"}[b.healthy]
        backend_states[key] += 1
    metrics = [
        Metric(
            "prorl_accepting",
            "gauge",
            "1 when the service accepts new jobs.",
            None,
            [(None, float(accepting))],
        ),
        Metric(
            "prorl_jobs_submitted", "counter", "Jobs accepted.", None, [(None, float(status.submitted_total))]
        ),
        Metric(
            "prorl_jobs_finished",
            "counter",
            "Jobs that reached a terminal state.",
            "state",
            [(s.value, float(n)) for s, n in status.finished_total.items()],
        ),
        Metric(
            "prorl_jobs_critical_errors",
            "counter",
            "Failed jobs by the stage that failed (or timeout).",
            "kind",
            [(k, float(status.critical_errors_total.get(k, 0))) for k in ("init", "run", "eval", "timeout")],
        ),
        Metric("prorl_jobs_live", "gauge", "Jobs not yet finished.", None, [(None, float(status.live_jobs))]),
        Metric(
            "prorl_results_retained",
            "gauge",
            "Finished results held.",
            None,
            [(None, float(status.retained_results))],
        ),
        Metric(
            "prorl_results_retained_bytes",
            "gauge",
            "Bytes of finished results held (as JSON).",
            None,
            [(None, float(status.retained_bytes))],
        ),
        Metric(
            "prorl_results_retained_bytes_budget",
            "gauge",
            "The byte budget of held results (pipeline.max_retained_bytes).",
            None,
            [(None, float(status.max_retained_bytes))],
        ),
        Metric(
            "prorl_results_evicted",
            "counter",
            "Results pushed out of memory by the count or byte budget.",
            None,
            [(None, float(status.evicted_total))],
        ),
        Metric(
            "prorl_results_spilled",
            "counter",
            "Evicted results a journal holds, still served from it.",
            None,
            [(None, float(status.spilled_total))],
        ),
        per_stage(
            "prorl_stage_queued",
            "gauge",
            "Jobs waiting for the stage.",
            {s: status.stages[s].queued for s in stages},
        ),
        per_stage(
            "prorl_stage_queue_capacity",
            "gauge",
            "Queue bound.",
            {s: status.stages[s].queue_capacity for s in stages},
        ),
        per_stage(
            "prorl_stage_in_flight",
            "gauge",
            "Jobs executing the stage.",
            {s: status.stages[s].in_flight for s in stages},
        ),
        per_stage(
            "prorl_stage_workers", "gauge", "Pool size.", {s: status.stages[s].workers for s in stages}
        ),
        per_stage(
            "prorl_stage_active_seconds", "counter", "Time spent executing the stage.", totals.active_s
        ),
        per_stage("prorl_stage_wait_seconds", "counter", "Time spent queued for the stage.", totals.wait_s),
        per_stage("prorl_stage_completions", "counter", "Stage executions ended.", totals.count),
        Metric(
            "prorl_backends",
            "gauge",
            "LLM backends by health.",
            "state",
            [(k, float(v)) for k, v in backend_states.items()],
        ),
    ]
    if status.nodes:  # only executors that place jobs on nodes have these
        metrics += node_metrics(status)
    metrics += policy_metrics(status)
    return metrics


def policy_metrics(status: PipelineStatus) -> list[Metric]:
    return [
        Metric(
            "prorl_jobs_stale",
            "counter",
            "Rollouts past max_staleness, by the action taken (rerun, drop, flag).",
            "action",
            [(a, float(status.stale_total.get(a, 0))) for a in ("rerun", "drop", "flag")],
        ),
        Metric(
            "prorl_policy_version",
            "gauge",
            "The trainer's current policy version (-1: none published or reported).",
            None,
            [(None, float(-1 if status.policy_version is None else status.policy_version))],
        ),
    ]


def node_metrics(status: PipelineStatus) -> list[Metric]:
    """Per-node gauges and counters, labelled by Ray node id."""

    def per_node(name: str, kind: Literal["counter", "gauge"], help_: str, attr: str) -> Metric:
        return Metric(name, kind, help_, "node", [(n.node, float(getattr(n, attr))) for n in status.nodes])

    return [
        per_node("prorl_node_slots", "gauge", "Jobs with live state a node may hold.", "slots"),
        per_node("prorl_node_in_flight", "gauge", "Jobs holding a slot on the node.", "in_flight"),
        per_node("prorl_node_healthy", "gauge", "1 while the node answers and gets new work.", "healthy"),
        per_node("prorl_node_jobs_placed", "counter", "Jobs placed on the node.", "placed_total"),
        per_node(
            "prorl_node_jobs_lost", "counter", "Jobs the node lost (re-run elsewhere).", "lost_jobs_total"
        ),
        Metric(
            "prorl_jobs_infra_retries",
            "counter",
            "Jobs re-run because their node was lost.",
            None,
            [(None, float(status.infra_retries_total))],
        ),
    ]


class _Snapshot(Collector):
    """The metrics of one scrape, as prometheus_client metric families."""

    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        for histogram in latency.EXPOSED:
            family = HistogramMetricFamily(histogram.name, histogram.help)
            family.add_metric([], histogram.cumulative(), sum_value=histogram.total)
            yield family
            yield GaugeMetricFamily(
                f"{histogram.name}_max", f"The longest: {histogram.help}", value=histogram.max
            )
        for m in self.metrics:
            family_cls = CounterMetricFamily if m.kind == "counter" else GaugeMetricFamily
            family = family_cls(m.name, m.help, labels=[m.label] if m.label else [])
            for label_value, value in m.samples:
                family.add_metric([label_value] if m.label and label_value is not None else [], value)
            yield family


def render(metrics: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(metrics))
    return generate_latest(registry)
