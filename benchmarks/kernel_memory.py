# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What one IPython-kernel rollout costs the node: memory, processes, threads, descriptors.

`measure_kernels(n)` opens `n` bubblewrap sandboxes, starts a kernel in each and runs one cell
(`1+1`: a kernel that has answered, as a rollout's first tool call leaves it), then reads:

- every process of each sandbox (the kernel's spawn and all its descendants: the launch shells
  while they live, bubblewrap outside and as pid 1, the kernel, any child of it) from
  `/proc/<pid>/smaps_rollup`: PSS (shared pages split among their users, so the sum over all
  processes on the host is the real use) and USS (pages no other process maps: what closing that
  sandbox would free at least);
- each sandbox's memory cgroup (the benchmark gives every sandbox one, with a limit far above a
  kernel's use): what the host charges the sandbox, anonymous memory plus the kernel memory no
  smaps shows (page tables, thread stacks, socket buffers); absent where no memory cgroup is
  writable;
- the host's used memory (MemTotal - MemAvailable) before and after; other work on the machine
  makes it noisy, so it is a cross-check, not the figure;
- the service's side (this process): threads, file descriptors and USS it adds per kernel.

    .venv/bin/python benchmarks/kernel_memory.py --kernels 1 8 32

prints, for each `n`, a line for kernels started as before (`ipykernel`: ipykernel's own
launcher, the host's thread pools) and one for the lean launcher, the default (`lean`);
`--cell 'import numpy, sympy'` measures kernels that have done some math, `--json` prints the
models. Reuse: `await measure_kernels(n)` in a benchmark, with `kernel_options` for
`IPythonKernel`'s keyword arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from nemo_gym_prorl.sandbox import Sandbox, SandboxLimits, SandboxSpec, open_sandbox
from nemo_gym_prorl.tools.ipython_kernel import IPythonKernel

_KIB = 1024
# Each sandbox gets a memory cgroup, to read what the host charges it; far above a kernel's use.
_CGROUP_LIMIT_MB = 4096


class ProcessMemory(BaseModel):
    """One process's memory (KiB, from smaps_rollup) and threads."""

    pid: int
    name: str
    rss_kib: int
    pss_kib: int
    uss_kib: int  # Private_Clean + Private_Dirty
    threads: int


class SandboxMemory(BaseModel):
    """Everything one sandbox's kernel runs as."""

    processes: list[ProcessMemory]

    @property
    def pss_kib(self) -> int:
        return sum(p.pss_kib for p in self.processes)

    @property
    def uss_kib(self) -> int:
        return sum(p.uss_kib for p in self.processes)

    @property
    def threads(self) -> int:
        return sum(p.threads for p in self.processes)


class KernelMemory(BaseModel):
    """Per-kernel cost with `kernels` kernels live at once (memory in MiB)."""

    kernels: int
    label: str = ""
    cell: str = "1+1"
    pss_mib_per_kernel: float  # mean over sandboxes of the sum over their processes
    uss_mib_per_kernel: float
    rss_mib_per_kernel: float  # counts shared pages in full: an upper bound, not a cost
    kernel_pss_mib: float  # the python (ipykernel) process alone, mean
    kernel_uss_mib: float
    cgroup_mib_per_kernel: float | None  # memory cgroup charge, mean; None without one
    host_used_mib_per_kernel: float  # (MemTotal - MemAvailable) growth / kernels: noisy
    processes_per_kernel: float
    threads_per_kernel: float  # inside the sandbox, all its processes
    service_threads_per_kernel: float  # this process's threads added per kernel
    service_fds_per_kernel: float
    service_uss_mib_per_kernel: float
    start_s_p50: float  # kernel start to its first answer, as the tool waits for it
    process_names: list[str]  # one sandbox's processes, outermost first

    def line(self) -> str:
        charged = self.cgroup_mib_per_kernel
        return (
            f"{self.label + ' ' if self.label else ''}kernels={self.kernels:>3}  "
            f"PSS {self.pss_mib_per_kernel:6.1f} MiB  USS {self.uss_mib_per_kernel:6.1f} MiB  "
            f"(kernel process PSS {self.kernel_pss_mib:5.1f} / USS {self.kernel_uss_mib:5.1f})  "
            f"cgroup {f'{charged:5.1f}' if charged is not None else '  n/a'} MiB  "
            f"host {self.host_used_mib_per_kernel:6.1f} MiB  "
            f"procs {self.processes_per_kernel:.1f}  threads {self.threads_per_kernel:.1f}  "
            f"service: +{self.service_threads_per_kernel:.2f} threads "
            f"+{self.service_fds_per_kernel:.2f} fds +{self.service_uss_mib_per_kernel:.2f} MiB  "
            f"start p50 {self.start_s_p50:.2f}s"
        )


def _smaps_rollup(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            fields[key] = int(words[0])  # kB
    return fields


def _status_field(pid: int, key: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def process_memory(pid: int) -> ProcessMemory:
    rollup = _smaps_rollup(pid)
    return ProcessMemory(
        pid=pid,
        name=Path(f"/proc/{pid}/comm").read_text().strip(),
        rss_kib=rollup.get("Rss", 0),
        pss_kib=rollup.get("Pss", 0),
        uss_kib=rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0),
        threads=int(_status_field(pid, "Threads") or 0),
    )


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name may hold spaces and parentheses
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def process_tree(root: int, children: Mapping[int, list[int]] | None = None) -> list[int]:
    """`root` and all its descendants, parents before children."""
    children = _children_map() if children is None else children
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(sorted(children.get(pid, [])))
    return out


def sandbox_memory(roots: Iterable[int], children: Mapping[int, list[int]] | None = None) -> SandboxMemory:
    """The memory of the processes `roots` and all their descendants (those that vanish while
    being read are left out)."""
    children = _children_map() if children is None else children
    processes: list[ProcessMemory] = []
    for root in roots:
        for pid in process_tree(root, children):
            try:
                processes.append(process_memory(pid))
            except (OSError, ValueError):
                continue
    return SandboxMemory(processes=processes)


def cgroup_memory_kib(sandbox: Sandbox) -> int | None:
    """What the sandbox's memory cgroup is charged (v1 `memory.usage_in_bytes`, v2
    `memory.current`), or None where it has none."""
    cgroup = sandbox._cgroup  # the groups its processes joined: the benchmark reads, never writes
    for path in cgroup.paths if cgroup is not None else []:
        for name in ("memory.usage_in_bytes", "memory.current"):
            with contextlib.suppress(OSError, ValueError):
                return int((path / name).read_text()) // _KIB
    return None


def _host_used_kib() -> int:
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0])
    return info["MemTotal"] - info["MemAvailable"]


def _service_counts() -> tuple[int, int, int]:
    """This process's threads, descriptors and USS (KiB)."""
    rollup = _smaps_rollup(os.getpid())
    uss = rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0)
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd")), uss


async def measure_kernels(
    n: int,
    *,
    label: str = "",
    kernel_options: Mapping[str, Any] | None = None,
    spec: SandboxSpec | None = None,
    cell: str = "1+1",
    settle_s: float = 1.0,
) -> KernelMemory:
    """Start `n` kernels, one per sandbox, all live at once, run `cell` in each and measure them
    (see the module). The default cell leaves the kernel as idle as a started one; a cell such as
    `import numpy, sympy` shows what a math rollout's kernel grows to."""
    with tempfile.TemporaryDirectory(prefix="prorl-kmem-", dir="/tmp") as root:
        base_spec = spec or SandboxSpec(
            backend="bubblewrap", limits=SandboxLimits(sandbox_memory_mb=_CGROUP_LIMIT_MB)
        )
        sandboxes: list[Sandbox] = []
        kernels: list[IPythonKernel] = []
        # A first kernel, closed again, before the baseline: the service's own one-time costs
        # (the shared zmq context's threads, jupyter_client's imports) are not per-kernel.
        with open_sandbox(base_spec.model_copy(update={"root_dir": Path(root)})) as warm_sb:
            async with IPythonKernel(warm_sb, **(kernel_options or {})) as warm:
                await warm.execute(cell)
        await asyncio.sleep(settle_s)
        threads0, fds0, uss0 = _service_counts()
        host0 = _host_used_kib()
        starts: list[float] = []
        try:
            for _ in range(n):
                sb = open_sandbox(base_spec.model_copy(update={"root_dir": Path(root)}))
                sandboxes.append(sb)
                kernel = IPythonKernel(sb, **(kernel_options or {}))
                kernels.append(kernel)
                started = time.perf_counter()
                await kernel.start()
                starts.append(time.perf_counter() - started)
                result = await kernel.execute(cell)
                if not result.ok:
                    raise RuntimeError(f"a kernel failed to run {cell!r}: {result}")
            await asyncio.sleep(settle_s)  # let start-up garbage be freed and threads settle
            threads1, fds1, uss1 = _service_counts()
            host1 = _host_used_kib()
            children = _children_map()
            charged = [cgroup_memory_kib(sb) for sb in sandboxes]
            per_sandbox: list[SandboxMemory] = []
            kernel_procs: list[ProcessMemory] = []
            for kernel in kernels:
                assert kernel._proc is not None
                memory = sandbox_memory([kernel._proc.pid], children)
                per_sandbox.append(memory)
                kernel_procs.append(max(memory.processes, key=lambda p: p.pss_kib))
        finally:
            for kernel in kernels:
                await kernel.close()
            for sb in sandboxes:
                await sb.aclose()

    def mean_mib(values: Iterable[float]) -> float:
        return round(statistics.fmean(values) / _KIB, 2)

    return KernelMemory(
        kernels=n,
        label=label,
        cell=cell,
        pss_mib_per_kernel=mean_mib(s.pss_kib for s in per_sandbox),
        uss_mib_per_kernel=mean_mib(s.uss_kib for s in per_sandbox),
        rss_mib_per_kernel=mean_mib(sum(p.rss_kib for p in s.processes) for s in per_sandbox),
        kernel_pss_mib=mean_mib(p.pss_kib for p in kernel_procs),
        kernel_uss_mib=mean_mib(p.uss_kib for p in kernel_procs),
        cgroup_mib_per_kernel=None if None in charged else mean_mib(c or 0 for c in charged),
        host_used_mib_per_kernel=round((host1 - host0) / n / _KIB, 2),
        processes_per_kernel=statistics.fmean(len(s.processes) for s in per_sandbox),
        threads_per_kernel=statistics.fmean(s.threads for s in per_sandbox),
        service_threads_per_kernel=(threads1 - threads0) / n,
        service_fds_per_kernel=(fds1 - fds0) / n,
        service_uss_mib_per_kernel=round((uss1 - uss0) / n / _KIB, 2),
        start_s_p50=round(statistics.median(starts), 3),
        process_names=[p.name for p in per_sandbox[0].processes],
    )


async def _main(counts: list[int], launchers: list[str], cell: str, as_json: bool) -> None:
    for n in counts:
        for launcher in launchers:
            options = {"launcher": launcher}
            result = await measure_kernels(n, label=f"{launcher:<9}", kernel_options=options, cell=cell)
            print(result.model_dump_json() if as_json else result.line(), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--json", action="store_true", help="print each KernelMemory as JSON")
    parser.add_argument(
        "--launcher",
        nargs="+",
        default=["ipykernel", "lean"],
        choices=["ipykernel", "lean"],
        help="how kernels start: ipykernel's own launcher (before) and the lean one (the default)",
    )
    parser.add_argument("--cell", default="1+1", help="the code each kernel runs before it is measured")
    args = parser.parse_args()
    asyncio.run(_main(args.kernels, args.launcher, args.cell, args.json))
    sys.exit(0)
