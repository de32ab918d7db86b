# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The paper trail of every benchmark figure: results files and the README table made from them.

`record(...)` writes `benchmarks/results/<name>.json`: the figures, the commit they were measured
at, the machine (cores, CPU model, memory, load average before and after: on a shared machine
the figures are contended, and the file says so), Python and key package versions, and
`simulated`, the list of every simulated part of the run (empty when every part is real).
`render_table()` builds the README's benchmark table from the committed results files only;
`sync_readme()` writes it between the marker comments, and a test fails when they disagree.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import shlex
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Recording lives in the product (`prorl train` records too); the README table is built here.
from nemo_gym_prorl.provenance import SCHEMA, commit, machine, record, versions

__all__ = [
    "SCHEMA", "commit", "machine", "record", "recording_command", "render_table", "sync_readme", "versions",
]  # fmt: skip

HERE = Path(__file__).resolve().parent
TRAIN_CONFIGS = HERE.parent / "configs" / "train"
RESULTS_DIR = HERE / "results"
README = HERE.parent / "docs" / "benchmarks.md"  # the page holding the generated tables
ORDER = (
    "tools", "balancer", "balancer_real", "pipeline", "pipeline_real", "service_cost", "eval", "dapo", "scaleout",
    "train", "harness_math", "harness_swe", "train_sweep", "overlap", "gym_sandbox", "harness", "network",
)  # fmt: skip


def publish(
    name: str,
    figures: dict[str, Any],
    *,
    as_json: bool,
    render: Callable[[dict[str, Any]], str],
    summary: Callable[[dict[str, Any]], str],
    simulated: Sequence[str],
    ours: str,
    against: str,
    show_simulated: bool = True,
    command: str | None = None,
) -> int:
    """The end of `prorl bench <name> [--json]`. With --json: record the figures (`record`) and
    print them as one JSON object; else print the report, after what was simulated. Returns the
    exit status (0). `command`: what recorded it, when a benchmark's own options did (default
    `prorl bench <name>`)."""
    if as_json:
        record(
            name, figures, simulated=simulated, ours=ours, against=against, measured=summary(figures),
            command=command,
        )  # fmt: skip
    elif show_simulated:
        print("simulated: " + "; ".join(simulated))
    print(json.dumps(figures) if as_json else render(figures), flush=True)
    return 0


Say = Callable[[str], None]
Figures = dict[str, Any]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark as `prorl bench NAME [--json]` runs it: measure, then print the report (and
    with --json record the figures and print them as one JSON object). `measure` gets where to
    say its progress (stderr under --json, so stdout holds only the figures); `ours` and
    `against` are templates over the figures, for the results file and the README table."""

    name: str
    measure: Callable[[Say], Awaitable[Figures] | Figures]
    render: Callable[[Figures], str]
    summary: Callable[[Figures], str]
    simulated: Sequence[str]
    ours: str
    against: str
    show_simulated: bool = True

    def main(self, as_json: bool = False) -> int:
        def say(message: str) -> None:
            print(f"[bench {self.name}] {message}", file=sys.stderr if as_json else sys.stdout, flush=True)

        measured = self.measure(say)
        figures = asyncio.run(measured) if inspect.isawaitable(measured) else measured
        return publish(
            self.name, figures, as_json=as_json, render=self.render, summary=self.summary,
            simulated=self.simulated, ours=self.ours.format_map(figures),
            against=self.against.format_map(figures), show_simulated=self.show_simulated,
        )  # fmt: skip


def load_results(results_dir: Path | None = None) -> list[dict[str, Any]]:
    found = []
    for path in sorted((results_dir or RESULTS_DIR).glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA:
            raise ValueError(f"{path}: unknown results schema {data.get('schema')!r}")
        found.append(data)
    rank = {n: i for i, n in enumerate(ORDER)}
    return sorted(found, key=lambda d: (rank.get(d["benchmark"], len(ORDER)), d["benchmark"]))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _where(d: Mapping[str, Any]) -> str:
    m, c = d["machine"], d["commit"]
    sha = (c.get("sha") or "unknown")[:8] + ("+dirty" if c.get("dirty") else "")
    load = m["load_avg_start"][0]
    contended = ", contended" if m.get("contended") else ""
    return f"{m['cores']} cores, load {load:g}{contended}; `{sha}`"


def _train_config(name: str) -> str | None:
    """The `configs/train/<stem>.yaml` whose `name:` is `name` (a train run's results file is named
    after its config's `name`), or None."""
    for path in sorted(TRAIN_CONFIGS.glob("*.yaml")):
        found = re.search(r"^name:\s*(\S+)\s*$", path.read_text(), re.M)
        if found and found.group(1) == name:
            return path.stem
    return None


def recording_command(d: Mapping[str, Any]) -> str:
    """The command line that records this results file as the CLI runs it now: `prorl bench NAME
    --json`, or `prorl bench --json NAME -- OPTION...` for a benchmark's own options (a file
    recorded as `prorl bench NAME`, or before benchmarks ran under `prorl bench`, as `python
    benchmarks/bench_NAME.py OPTION...`), or `prorl train [--config NAME]
    [OVERRIDE...]` (a train run recorded as a bare `prorl train` names its config from the file's
    `figures.config.name`, so runs of different configs never read alike)."""
    words = shlex.split(d["command"])
    script = words[1] if len(words) > 1 and words[0].startswith("python") else ""
    legacy = re.fullmatch(r"(?:benchmarks/)?bench_(\w+)\.py", script)
    if legacy:
        options = words[2:]
        words = ["prorl", "bench", legacy.group(1), *(["--", *options] if options else [])]
    if words[:2] == ["prorl", "bench"]:
        cut = words.index("--") if "--" in words else len(words)
        head = [w for w in words[2:cut] if w != "--json"]  # NAME and its flags, --json anywhere
        name = next((w for w in head if not w.startswith("-")), "")
        own, options = [w for w in head if w != name], words[cut:]
        words = [*words[:2], name]
        # argparse takes NAME and the options after `--` as one run of positionals: a flag between
        # them (`prorl bench harness --json -- ...`) leaves `-- ...` unrecognised, so --json goes first
        words = (
            ["prorl", "bench", "--json", words[2], *own, *options]
            if options
            else [*words[:3], "--json", *own]
        )
    if words == ["prorl", "train"]:
        name = (d.get("figures", {}).get("config") or {}).get("name")
        stem = _train_config(name) if name else None
        if stem and stem != "default":
            words += ["--config", stem]
    return shlex.join(words)


def render_table(results_dir: Path | None = None) -> str:
    rows = [
        "| command | ours | against | measured | simulated parts | machine; commit |",
        "|---|---|---|---|---|---|",
    ]
    for d in load_results(results_dir):
        t = d["table"]
        simulated = "; ".join(d["simulated"]) or "none (all real)"
        rows.append(
            f"| `{recording_command(d)}` | {_cell(t['ours'])} | {_cell(t['against'])} | {_cell(t['measured'])} "
            f"| {_cell(simulated)} | {_cell(_where(d))} |"
        )
    return "\n".join(rows)


def render_scaleout(results_dir: Path | None = None) -> str:
    """The scale-out table of README's "Scaling out", from `scaleout.json`."""
    found = [d for d in load_results(results_dir) if d["benchmark"] == "scaleout"]
    if not found:
        return "(no scaleout results: run `prorl bench scaleout --json`)"
    d = found[0]
    f = d["figures"]
    rows = [
        "| nodes | workers per stage | jobs | X Ray (jobs/s) | E(N) | X in-process, same pools | Ray / in-process | CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for point in f["points"]:
        ray, local = point["ray"], point["inprocess"]
        ratio = ray["throughput"] / local["throughput"] if local["throughput"] else 0.0
        cpu = f"{ray['cpu_share']:.0%}" + (" (CPU-bound)" if ray["cpu_bound"] else "")
        rows.append(
            f"| {point['nodes']} | {point['slots']} | {ray['jobs']} | {ray['throughput']:.2f} "
            f"| {point['efficiency']:.2f} | {local['throughput']:.2f} | {ratio:.2f} | {cpu} |"
        )
    kill = f["node_kill"]
    m = d["machine"]
    rows += [
        "",
        f"Node loss ({kill['nodes']} nodes, one removed gracefully and one raylet SIGKILLed while jobs ran): "
        f"{kill['submitted']} submitted, {kill['completed']} completed, {kill['rerun']} re-run on other "
        f"nodes, {kill['failed']} failed, {kill['pending']} pending. `--json`: `efficiency_n2` "
        f"{f['efficiency_n2']}, `efficiency_n4` {f['efficiency_n4']}, `efficiency_n8` {f['efficiency_n8']}, "
        f"`ray_overhead_ratio` {f['ray_overhead_ratio']} (X_ray / X_in-process at "
        f"{f['points'][-1]['nodes']} nodes), `node_kill_submitted` {f['node_kill_submitted']}, "
        f"`node_kill_completed` {f['node_kill_completed']}. Measured {d['measured_at'][:10]} on "
        f"{_where(d)} (1-minute load {m['load_avg_end'][0]:g} at the end).",
    ]
    return "\n".join(rows)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def render_load(results_dir: Path | None = None) -> str:
    """One node under load, a row per level of `load.json`, with the soak and the kill -9 under it."""
    by_name = {d["benchmark"]: d for d in load_results(results_dir)}
    load = by_name.get("load")
    if load is None:
        return "(no load results: run `prorl bench --json load`)"
    rows = [
        "| series | RUN pool | live at most | rollouts/s (steady) | service failures | event-loop lag p50 / p99 / max "
        "| agent turn p50 / p99 | sandbox open / close p99 | host memory per live rollout | processes per live rollout "
        "| service RSS, threads, fds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in load["figures"]["curve"]:
        lag, turn = p["event_loop_lag_s"], p["turn_s"]
        # Per rollout the service really held (the file divides by the RUN pool's size).
        per_live = p["concurrent_rollouts"] / p["live_rollouts_max"] if p.get("live_rollouts_max") else 1.0
        rows.append(
            f"| {p['series']} | {p['concurrent_rollouts']} | {p.get('live_rollouts_max', '-')} "
            f"| {p['rollouts_per_s']:.1f} ({p['steady_rollouts_per_s'] or 0:.1f}) | {p['service_failures']} "
            f"| <= {_ms(lag['p50'])} / {_ms(lag['p99'])} / {_ms(lag['max_bucket'])} ms "
            f"| <= {_ms(turn['p50'])} / {_ms(turn['p99'])} ms "
            f"| <= {_ms(p['sandbox_open_s']['p99'])} / {_ms(p['sandbox_close_s']['p99'])} ms "
            f"| {p['host_memory_per_rollout_mib'] * per_live:.1f} MiB | {p['host_processes_per_rollout'] * per_live:.1f} "
            f"| {p['service_rss_max_bytes'] / 2**20:.0f} MiB, {p['service_threads_max']}, {p['service_fds_max']} |"
        )
    rows += [
        "",
        f"Load measured {load['measured_at'][:10]} on {_where(load)}. Lag and times are bucket upper bounds.",
    ]
    soak = by_name.get("soak")
    if soak is not None:
        f = soak["figures"]
        rss = f["rss_after_warmup_mib"]
        series = f["series"]
        marks = [series[round(k * (len(series) - 1) / 4)] for k in range(5)] if series else []
        curve = ", ".join(f"{m['rss_bytes'] / 2**20:.0f} MiB at {m['rollouts']}" for m in marks)
        rows.append(
            f"Soak ({_where(soak)}): {f['jobs']} plain rollouts and {f['dapo'].get('batches', 0)} DAPO batches in "
            f"{f['wall_s']:.0f} s, {f['concurrent_rollouts']} at once, results budget "
            f"{f['results_budget_bytes'] >> 20} MiB, DAPO batch budget {f.get('batch_budget_bytes', 1 << 30) >> 20} MiB; "
            f"service RSS after warm-up {rss['first']:.0f} -> {rss['last']:.0f} MiB "
            f"(max {rss['max']:.0f}), fds {f['fds_after_warmup']['first']} -> {f['fds_after_warmup']['last']}; "
            f"service RSS along the run: {curve}; left behind: {f['leftovers']}."
        )
    recovery = by_name.get("recovery")
    if recovery is not None:
        f = recovery["figures"]
        rows.append(
            f"kill -9 ({_where(recovery)}): {f['in_flight_at_kill']} rollouts in flight, restart in "
            f"{f['restart_s']:.1f} s; lost {f['lost']}, duplicated {f['duplicated']}, not done {f['not_done']}; "
            f"run again {f['resumed'].get('1', 0)}; the dead service's debris at the kill {f['dead_service_left_at_kill']}, "
            f"after the restart {f['dead_service_left_after_restart']}."
        )
    return "\n".join(rows)


# README blocks this module writes: marker name -> renderer.
BLOCKS = {"bench-table": render_table, "scaleout-table": render_scaleout, "load-table": render_load}


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- {name}:start (generated by `prorl bench report` from benchmarks/results/*.json) -->",
        f"<!-- {name}:end -->",
    )


def _block(name: str) -> re.Pattern[str]:
    start, end = _markers(name)
    return re.compile(re.escape(start) + r"\n(.*?)\n?" + re.escape(end), re.S)


def readme_table(readme: Path | None = None, name: str = "bench-table") -> str:
    match = _block(name).search((readme or README).read_text())
    if match is None:
        raise ValueError(f"{readme or README}: no {name} markers ({' ... '.join(_markers(name))!r})")
    return match.group(1).strip()


def stale_blocks(readme: Path | None = None, results_dir: Path | None = None) -> list[str]:
    """The README blocks that differ from what the results files generate."""
    return [name for name, render in BLOCKS.items() if readme_table(readme, name) != render(results_dir)]


def sync_readme(readme: Path | None = None, results_dir: Path | None = None) -> bool:
    """Rewrite every block between its markers; True when the file changed."""
    path = readme or README
    text = new = path.read_text()
    for name, render in BLOCKS.items():
        readme_table(path, name)  # the markers must be there
        start, end = _markers(name)
        body = render(results_dir)
        new = _block(name).sub(lambda _, body=body, start=start, end=end: f"{start}\n{body}\n{end}", new)
    if new != text:
        path.write_text(new)
    return new != text


def main(as_json: bool = False, check: bool = False) -> int:
    """`prorl bench report [--check]`: regenerate (or check) the README's generated blocks."""
    if check:
        stale = stale_blocks()
        print("README benchmark tables match benchmarks/results" if not stale else
              f"README blocks {stale} differ from benchmarks/results: run `prorl bench report`")  # fmt: skip
        return 0 if not stale else 1
    changed = sync_readme()
    if as_json:
        print(json.dumps({"changed": changed, "results": [d["benchmark"] for d in load_results()]}))
    else:
        print(render_table())
        print(f"\nREADME.md {'updated' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(as_json="--json" in sys.argv, check="--check" in sys.argv))
