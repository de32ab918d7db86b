# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The IPython tool: a kernel inside the sandbox, what one cell returns, and how the kernel
survives timeouts and its own death."""

from __future__ import annotations

import base64
import os
import shutil
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from support.busy import second_call_is_refused

from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec, open_sandbox
from nemo_gym_prorl.tools.ipython_kernel import IPythonKernel, KernelBusyError, KernelError

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
