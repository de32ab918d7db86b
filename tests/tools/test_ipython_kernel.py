# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The IPython tool: a kernel inside the sandbox, what one cell returns, and how the kernel
survives timeouts and its own death."""

from __future__ import annotations

import ast
import asyncio
import base64
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from support.busy import second_call_is_refused
from support.privilege_probe import PROBE, host_paths, request, verdict

from nemo_gym_prorl.sandbox import Sandbox, SandboxLimits, SandboxSpec, open_sandbox
from nemo_gym_prorl.tools import ipython_kernel
from nemo_gym_prorl.tools.ipython_kernel import (
    THREAD_POOL_VARIABLES,
    IPythonKernel,
    KernelBusyError,
    KernelError,
    KernelLauncher,
    thread_pool_env,
)

pytestmark = [pytest.mark.bwrap, pytest.mark.asyncio(loop_scope="module")]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def kernel_sandbox() -> Iterator[Sandbox]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (`bwrap`) is not installed: apt-get install bubblewrap")
    with open_sandbox(SandboxSpec(backend="bubblewrap")) as sb:
        yield sb


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(kernel_sandbox: Sandbox) -> AsyncIterator[IPythonKernel]:
    """One kernel shared by the tests that leave it healthy (a start costs about a second)."""
    k = IPythonKernel(kernel_sandbox, timeout=30.0, interrupt_grace_s=3.0)
    await k.start()
    yield k
    await k.close()


@pytest_asyncio.fixture(loop_scope="module")
async def fresh_kernel(kernel_sandbox: Sandbox) -> AsyncIterator[IPythonKernel]:
    """A kernel of its own, for tests that kill or restart it."""
    k = IPythonKernel(kernel_sandbox, timeout=30.0, interrupt_grace_s=1.0)
    await k.start()
    yield k
    await k.close()


# -- what a cell returns ---------------------------------------------------------------------------
async def test_value_of_the_last_expression_is_the_result(kernel: IPythonKernel) -> None:
    result = await kernel.execute("1+1")
    assert result.result == "2"
    assert result.ok and result.stdout == "" and result.error is None
    assert result.execution_count is not None


async def test_stdout_and_stderr_are_separate(kernel: IPythonKernel) -> None:
    result = await kernel.execute("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert result.result is None


async def test_output_of_subprocesses_is_captured(kernel: IPythonKernel) -> None:
    result = await kernel.execute("import os; os.system('echo from-a-child')")
    assert "from-a-child" in result.stdout


async def test_variables_and_imports_persist_between_cells(kernel: IPythonKernel) -> None:
    await kernel.execute("import math\nradius = 2")
    assert (await kernel.execute("round(math.pi * radius**2, 3)")).result == "12.566"


async def test_an_exception_comes_back_as_an_error_with_a_plain_traceback(kernel: IPythonKernel) -> None:
    result = await kernel.execute("def f():\n    return 1/0\nf()")
    assert result.error is not None
    assert result.error.ename == "ZeroDivisionError"
    assert result.error.evalue == "division by zero"
    assert "return 1/0" in result.error.traceback
    assert "\x1b" not in result.error.traceback
    assert not result.ok


async def test_matplotlib_figures_come_back_as_base64_png(kernel: IPythonKernel) -> None:
    result = await kernel.execute("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
    assert result.error is None, result.error
    assert len(result.images) == 1
    assert base64.b64decode(result.images[0]).startswith(PNG_MAGIC)


async def test_asking_for_input_is_an_error_not_a_hang(kernel: IPythonKernel) -> None:
    result = await kernel.execute("input('name? ')")
    assert result.error is not None and result.error.ename == "StdinNotImplementedError"


async def test_huge_output_is_capped(kernel_sandbox: Sandbox) -> None:
    async with IPythonKernel(kernel_sandbox, max_output_bytes=4096) as k:
        result = await k.execute("print('x' * 1_000_000)")
        assert result.truncated
        assert len(result.stdout) < 4096 + 200


async def test_the_kernel_runs_inside_the_sandbox(kernel: IPythonKernel) -> None:
    host_file = Path(__file__).resolve().parents[2] / "pyproject.toml"  # exists on the host only
    assert host_file.exists()
    code = f"import os, socket\n(os.getcwd(), socket.gethostname(), os.path.exists({str(host_file)!r}))"
    assert (await kernel.execute(code)).result == "('/workspace', 'sandbox', False)"


async def test_the_kernel_leaves_only_its_git_ignored_directory_in_the_workspace(
    kernel: IPythonKernel,
) -> None:
    workspace = kernel.sandbox.workspace
    assert (workspace / ".prorl" / ".gitignore").read_text() == "*\n"
    assert {p.name for p in workspace.iterdir()} <= {".prorl", ".cache"}  # .cache: fontconfig via $HOME


# -- timeouts and interrupts ------------------------------------------------------------------------
async def test_a_timed_out_cell_is_interrupted_and_the_kernel_keeps_its_state(kernel: IPythonKernel) -> None:
    await kernel.execute("kept = 'yes'")
    start = time.monotonic()
    result = await kernel.execute("import time\nprint('started')\ntime.sleep(30)", timeout=0.5)
    assert time.monotonic() - start < 5
    assert result.timed_out and not result.restarted
    assert "started" in result.stdout
    assert result.error is not None and result.error.ename == "KeyboardInterrupt"
    assert "timed out after 0.5s" in (result.hint or "")
    assert (await kernel.execute("kept")).result == "'yes'"


async def test_a_busy_loop_is_interrupted_too(kernel: IPythonKernel) -> None:
    result = await kernel.execute("while True:\n    pass", timeout=0.5)
    assert result.timed_out and not result.restarted
    assert (await kernel.execute("2*3")).result == "6"


async def test_a_kernel_that_ignores_the_interrupt_is_restarted(fresh_kernel: IPythonKernel) -> None:
    await fresh_kernel.execute("lost = 1")
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)"
    result = await fresh_kernel.execute(code, timeout=0.5)
    assert result.timed_out and result.restarted
    assert "restarted" in (result.hint or "")
    after = await fresh_kernel.execute("lost")
    assert after.error is not None and after.error.ename == "NameError"
    assert fresh_kernel.restarts == 1


# -- death -------------------------------------------------------------------------------------------
async def test_os_exit_in_the_kernel_is_detected_and_the_kernel_restarted(
    fresh_kernel: IPythonKernel,
) -> None:
    await fresh_kernel.execute("lost = 1")
    start = time.monotonic()
    result = await fresh_kernel.execute("import os; os._exit(1)")
    assert time.monotonic() - start < 10
    assert result.restarted and not result.timed_out
    assert "died" in (result.hint or "") and "exit status 1" in (result.hint or "")
    after = await fresh_kernel.execute("'lost' in dir()")
    assert after.result == "False"
    assert fresh_kernel.alive


async def test_a_kernel_killed_between_cells_is_replaced_on_the_next_cell(
    fresh_kernel: IPythonKernel,
) -> None:
    assert fresh_kernel._proc is not None
    fresh_kernel.sandbox.kill_process(fresh_kernel._proc)
    await fresh_kernel._proc.wait()
    result = await fresh_kernel.execute("40 + 2")
    assert result.result == "42" and result.restarted
    assert "had died" in (result.hint or "")


# -- misuse and lifecycle ------------------------------------------------------------------------------
async def test_a_second_concurrent_cell_is_refused_clearly(kernel: IPythonKernel) -> None:
    first = await second_call_is_refused(
        kernel.execute("import time; time.sleep(0.3); 'first'"),
        lambda: kernel.execute("'second'"),
        KernelBusyError,
    )
    assert first.result == "'first'"


async def test_close_is_idempotent_and_removes_the_sockets(kernel_sandbox: Sandbox) -> None:
    k = IPythonKernel(kernel_sandbox)
    await k.start()
    files = list(k._files)
    assert all(f.exists() for f in files[:1])
    await k.close()
    await k.close()
    assert not k.alive
    assert not any(f.exists() for f in files)
    with pytest.raises(KernelError, match="closed"):
        await k.execute("1")


async def test_a_kernel_that_cannot_start_reports_why(kernel_sandbox: Sandbox) -> None:
    k = IPythonKernel(kernel_sandbox, python="/nonexistent/python", start_timeout=10)
    with pytest.raises(KernelError, match="exited during start-up"):
        await k.start()
    await k.close()


def _native_threads() -> int:
    """Threads of this process that Python did not start (zmq's I/O and reaper threads)."""
    return len(os.listdir("/proc/self/task")) - threading.active_count()


async def test_kernels_share_one_zmq_context_so_more_kernels_add_no_zmq_threads(
    kernel_sandbox: Sandbox,
) -> None:
    first = IPythonKernel(kernel_sandbox, timeout=30.0)
    more = [IPythonKernel(kernel_sandbox, timeout=30.0) for _ in range(3)]
    try:
        await first.start()
        with_one = _native_threads()
        for k in more:
            await k.start()
        assert _native_threads() == with_one
        for k in (first, *more):
            assert (await k.execute("6 * 7")).result == "42"
    finally:
        for k in (first, *more):
            await k.close()


# -- what a kernel starts with (the lean launcher) ----------------------------------------------------
async def test_the_kernel_starts_without_debugpy_which_a_cell_can_still_import(kernel: IPythonKernel) -> None:
    loaded = await kernel.execute(
        "import sys\nsorted(m for m in sys.modules if 'pydev' in m or 'debugpy' in m)"
    )
    assert loaded.result == "[]"
    imported = await kernel.execute("import debugpy\ndebugpy.__name__")
    assert imported.result == "'debugpy'", imported.error


async def test_the_kernel_runs_no_heartbeat_thread(kernel: IPythonKernel) -> None:
    names = (await kernel.execute("import threading\nsorted(t.name for t in threading.enumerate())")).result
    assert names is not None and "Heartbeat" not in names
    assert "IOPub" in names and "Control" in names  # the channels the client uses are there


async def test_numpy_sympy_and_matplotlib_are_importable_and_work(kernel: IPythonKernel) -> None:
    code = (
        "import numpy, sympy, matplotlib\n"
        "x = sympy.Symbol('x')\n"
        "(int(numpy.arange(5).sum()), str(sympy.integrate(2 * x, x)), matplotlib.get_backend() != '')"
    )
    result = await kernel.execute(code)
    assert result.result == "(10, 'x**2', True)", result.error


async def test_in_out_and_underscore_work_with_the_history_database_off(kernel: IPythonKernel) -> None:
    first = await kernel.execute("6 * 7")
    n = first.execution_count
    assert first.result == "42" and n is not None
    after = await kernel.execute(f"(Out[{n}], In[{n}], _)")
    assert after.result == "(42, '6 * 7', 42)"
    assert after.execution_count == n + 1


async def test_numeric_libraries_start_one_thread_each_not_one_per_host_core(
    fresh_kernel: IPythonKernel,
) -> None:
    """A kernel of its own: numpy must not have been imported by another test's cell."""
    variables = await fresh_kernel.execute(
        f"import os\n[os.environ.get(v) for v in {list(THREAD_POOL_VARIABLES)!r}]"
    )
    assert variables.result == "['1', '1', '1']"
    code = (
        "import os, sys\nassert 'numpy' not in sys.modules\n"
        "before = len(os.listdir('/proc/self/task'))\nimport numpy\n"
        "numpy.linalg.inv(numpy.eye(300))\nlen(os.listdir('/proc/self/task')) - before"
    )
    result = await fresh_kernel.execute(code)
    assert result.result == "0", result.error


async def test_thread_pools_follow_the_cpu_quota_and_yield_to_the_sandboxs_own_env() -> None:
    assert thread_pool_env(SandboxSpec()) == dict.fromkeys(THREAD_POOL_VARIABLES, "1")
    assert thread_pool_env(SandboxSpec(limits=SandboxLimits(cpus=2.5))) == dict.fromkeys(
        THREAD_POOL_VARIABLES, "3"
    )
    spec = SandboxSpec(limits=SandboxLimits(cpus=0.5), env={"OMP_NUM_THREADS": "8"})
    assert thread_pool_env(spec) == {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


async def test_the_sandboxs_own_thread_pool_setting_reaches_the_kernel() -> None:
    with open_sandbox(SandboxSpec(backend="bubblewrap", env={"OPENBLAS_NUM_THREADS": "2"})) as sb:
        async with IPythonKernel(sb) as k:
            result = await k.execute(
                "import os\n(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])"
            )
    assert result.result == "('2', '1')"


async def test_a_workspace_file_named_like_a_kernel_module_does_not_stop_the_start(sandbox: Sandbox) -> None:
    """The workspace is off sys.path while ipykernel loads, and back on it for the cells."""
    sandbox.write_file("zmq.py", "raise SystemExit('the workspace shadowed zmq')\n")
    sandbox.write_file("helper_module.py", "VALUE = 7\n")
    async with IPythonKernel(sandbox, timeout=30.0) as k:
        result = await k.execute(
            "import sys, helper_module\n(helper_module.VALUE, sys.argv[0].endswith('ipykernel_launcher.py'))"
        )
    assert result.result == "(7, True)", result.error


# -- the kernel stays inside its own rollout's sandbox, whichever launcher starts it ----------------
_NAMESPACES = ("mnt", "pid", "net", "ipc", "uts")
# What a cell sees: its namespaces, the pids in its /proc, its own pid.
_SEEN = (
    "import os\n"
    f"namespaces = {{n: os.readlink('/proc/self/ns/' + n) for n in {_NAMESPACES!r}}}\n"
    "(namespaces, sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), os.getpid())"
)


@pytest.mark.parametrize("launcher", ["lean", "ipykernel"])
async def test_the_kernel_is_confined_as_every_sandbox_process_is(
    sandbox: Sandbox, launcher: KernelLauncher
) -> None:
    """Unprivileged (the sandbox's identity), every capability set empty, the syscall filter on,
    nothing setuid, no host path in pid 1; namespaces of its own; it sees bubblewrap and itself."""
    probe = f"import io, sys\nsys.stdin = io.StringIO({request()!r})\nexec(compile({PROBE!r}, 'probe', 'exec'), {{}})"
    async with IPythonKernel(sandbox, timeout=60.0, launcher=launcher) as k:
        probed = await k.execute(probe)
        assert probed.ok, probed.error
        seen = await k.execute(_SEEN)
    verdict(json.loads(probed.stdout.strip().splitlines()[-1]), host_dir=sandbox.workspace,
            hidden=host_paths(sandbox.workspace, sandbox.tmp_dir.parent))  # fmt: skip
    assert seen.result is not None
    namespaces, pids, own = ast.literal_eval(seen.result)
    for name in _NAMESPACES:
        assert namespaces[name] != os.readlink(f"/proc/self/ns/{name}"), name
    assert pids == [1, own]


async def test_kernels_of_two_rollouts_share_no_namespace_and_no_workspace(sandbox: Sandbox) -> None:
    with open_sandbox(SandboxSpec(backend="bubblewrap")) as other:
        async with IPythonKernel(sandbox) as mine, IPythonKernel(other) as theirs:
            await mine.execute("open('mine.txt', 'w').write('secret')")
            seen_mine, seen_theirs = (await mine.execute(_SEEN)).result, (await theirs.execute(_SEEN)).result
            found = await theirs.execute("import os\nos.path.exists('mine.txt')")
    assert seen_mine is not None and seen_theirs is not None
    for name in _NAMESPACES:
        assert ast.literal_eval(seen_mine)[0][name] != ast.literal_eval(seen_theirs)[0][name], name
    assert found.result == "False"


async def test_a_kernel_starts_in_a_sandbox_under_a_root_of_46_characters() -> None:
    # The room a sandbox root has: IPython's Unix sockets live below the sandbox's own directory,
    # in a path of at most 100 characters (a benchmark's temporary root is 40).
    base = Path(tempfile.mkdtemp(prefix="prorl-k-", dir="/tmp"))
    root = base / ("r" * (46 - len(str(base)) - 1))
    assert len(str(root)) == 46
    try:
        with open_sandbox(SandboxSpec(backend="bubblewrap", root_dir=root)) as sb:
            k = IPythonKernel(sb, timeout=30.0)
            try:
                await k.start()
                assert (await k.execute("6 * 7")).result == "42"
            finally:
                await k.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_kernels_start_a_few_at_a_time_and_a_queued_start_is_not_charged_to_its_timeout(
    kernel_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(1)
    ipython_kernel.start_slots.replace(loop, slots)
    starting, most = [0], [0]
    launch_now = IPythonKernel._launch_now

    async def counted(self: IPythonKernel) -> None:
        starting[0] += 1
        most[0] = max(most[0], starting[0])
        try:
            await launch_now(self)
        finally:
            starting[0] -= 1

    monkeypatch.setattr(IPythonKernel, "_launch_now", counted)
    kernels = [IPythonKernel(kernel_sandbox, timeout=30.0, start_timeout=8.0) for _ in range(3)]
    try:
        await slots.acquire()  # someone else's start holds the only slot past every start_timeout
        cells = [asyncio.ensure_future(k.execute("6 * 7")) for k in kernels]
        await asyncio.sleep(9.0)
        assert not any(cell.done() for cell in cells) and most[0] == 0
        slots.release()
        results = await asyncio.gather(*cells)
        assert [r.result for r in results] == ["42"] * 3, [r.error for r in results]
        assert most[0] == 1
    finally:
        for k in kernels:
            await k.close()
