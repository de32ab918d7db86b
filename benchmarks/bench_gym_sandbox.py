# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench gym_sandbox`: a sandbox's life through NeMo Gym's provider interface.

One cycle is what a rollout pays at minimum: `create(SandboxSpec())`, `exec("echo hi")`,
`close`, through the providers Gym's registry returns by name. Side by side in one run, arms
alternated within each round (so drift in the machine's load hits both alike):
  - `bubblewrap`, this project's provider: isolated (own namespaces, no network, read-only
    system, no capabilities), a persistent init per sandbox that each exec joins;
  - `local`, Gym's built-in: a host subprocess with no isolation at all (the floor).
Gym's other built-ins that could run locally (docker, apptainer, enroot) need their runtime
on PATH; each is listed with why it was not measured. Nothing here is simulated.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from typing import Any

from nemo_gym.sandbox.providers.base import SandboxSpec
from nemo_gym.sandbox.providers.registry import create_provider

import provenance  # notes the load average the run starts under

ROUNDS, CYCLES = 5, 20
SIMULATED: list[str] = []
# Gym's other local-runtime providers, and the binary each needs to run here.
OTHER_LOCAL_PROVIDERS = {"docker": "docker", "apptainer": "apptainer", "enroot": "enroot"}


def _why_not(binary: str) -> str | None:
    """Why a provider's runtime cannot run here, or None when it can."""
    if shutil.which(binary) is None:
        return f"`{binary}` is not on PATH"
    if binary == "docker":  # a CLI without an engine behind it runs nothing
        try:
            subprocess.run(["docker", "info"], capture_output=True, timeout=10, check=True)
        except (subprocess.SubprocessError, OSError):
            return "the docker CLI is installed but no engine answers (`docker info` fails)"
    return None


def unavailable_providers() -> dict[str, str]:
    """Gym's other local providers and why they are not measured (empty when one could be)."""
    found = {name: _why_not(binary) for name, binary in OTHER_LOCAL_PROVIDERS.items()}
    return {name: why for name, why in found.items() if why is not None}


async def cycle_ms(provider: Any) -> float:
    started = time.perf_counter()
    handle = await provider.create(SandboxSpec())
    try:
        result = await provider.exec(handle, "echo hi", timeout_s=30)
    finally:
        await provider.close(handle)
    if result.stdout != "hi\n" or result.return_code != 0:
        raise RuntimeError(f"{provider.name}: echo hi gave {result!r}")
    return (time.perf_counter() - started) * 1000


async def measure(rounds: int = ROUNDS, cycles: int = CYCLES) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="prorl-bench-gym-sandbox-") as root:
        providers = {
            "bubblewrap": create_provider({"bubblewrap": {"root_dir": f"{root}/bwrap"}}),
            "local": create_provider({"local": {"workspace_root": f"{root}/local"}}),
        }
        samples: dict[str, list[float]] = {name: [] for name in providers}
        round_medians: dict[str, list[float]] = {name: [] for name in providers}
        try:
            for provider in providers.values():  # warm-up, not recorded
                await cycle_ms(provider)
            for index in range(rounds):
                order = list(providers) if index % 2 == 0 else list(reversed(providers))
                for name in order:
                    this_round = [await cycle_ms(providers[name]) for _ in range(cycles)]
                    samples[name] += this_round
                    round_medians[name].append(statistics.median(this_round))
        finally:
            for provider in providers.values():
                await provider.aclose()
    figures: dict[str, Any] = {"rounds": rounds, "cycles_per_round": cycles}
    for name, values in samples.items():
        figures[f"{name}_p50_ms"] = statistics.median(values)
        figures[f"{name}_p90_ms"] = statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
        figures[f"{name}_round_p50_ms"] = round_medians[name]
    figures["bubblewrap_vs_local"] = figures["bubblewrap_p50_ms"] / figures["local_p50_ms"]
    figures["not_measured"] = unavailable_providers()
    figures["simulated"] = SIMULATED
    return figures


def summary(r: dict[str, Any]) -> str:
    return (f"create+exec+close {r['bubblewrap_p50_ms']:.1f} ms p50 isolated in bubblewrap, "
            f"{r['bubblewrap_vs_local']:.1f}x Gym's unisolated local provider ({r['local_p50_ms']:.1f} ms)")  # fmt: skip


def render(r: dict[str, Any]) -> str:
    lines = [f"create + exec('echo hi') + close through Gym's provider interface, "
             f"{r['rounds']} rounds x {r['cycles_per_round']} cycles, arms alternated", ""]  # fmt: skip
    for name in ("bubblewrap", "local"):
        rounds = ", ".join(f"{v:.1f}" for v in r[f"{name}_round_p50_ms"])
        lines.append(f"  {name:<11} p50 {r[f'{name}_p50_ms']:7.2f} ms  p90 {r[f'{name}_p90_ms']:7.2f} ms"
                     f"  (round medians: {rounds})")  # fmt: skip
    lines.append(f"  bubblewrap / local: {r['bubblewrap_vs_local']:.2f}x")
    for name, why in r["not_measured"].items():
        lines.append(f"  {name}: not measured ({why})")
    return "\n".join(lines)


main = provenance.Benchmark(
    "gym_sandbox", lambda say: measure(), render, summary, SIMULATED, show_simulated=False,
    ours="the `bubblewrap` Gym sandbox provider (isolated, persistent namespaces)",
    against="Gym's built-in `local` provider (host subprocess, no isolation)",
).main  # fmt: skip
