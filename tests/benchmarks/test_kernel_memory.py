# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""benchmarks/kernel_memory.py measures what an IPython kernel costs the node, and the lean
launcher (the default) costs less than ipykernel's own: less private memory, fewer threads, and
nothing more in the service."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from types import ModuleType

import pytest

pytestmark = [pytest.mark.bwrap, pytest.mark.asyncio]


async def test_the_lean_kernel_costs_less_than_ipykernels_launcher(
    bench: Callable[[str], ModuleType],
) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (`bwrap`) is not installed: apt-get install bubblewrap")
    kernel_memory = bench("kernel_memory")
    before = await kernel_memory.measure_kernels(2, kernel_options={"launcher": "ipykernel"}, settle_s=0.2)
    after = await kernel_memory.measure_kernels(2, settle_s=0.2)
    for measured in (before, after):
        assert measured.kernels == 2
        assert "python" in measured.process_names and "bwrap" in measured.process_names
        assert 0 < measured.uss_mib_per_kernel <= measured.pss_mib_per_kernel <= measured.rss_mib_per_kernel
        assert measured.kernel_uss_mib <= measured.uss_mib_per_kernel
        assert measured.service_threads_per_kernel == 0  # one zmq context for every kernel
    # debugpy and pydevd alone are about 7 MiB of each kernel's private memory.
    assert after.uss_mib_per_kernel < before.uss_mib_per_kernel - 4, (before, after)
    if before.cgroup_mib_per_kernel is not None and after.cgroup_mib_per_kernel is not None:
        assert after.cgroup_mib_per_kernel < before.cgroup_mib_per_kernel - 4, (before, after)
    # The heartbeat's thread and its zmq context's two.
    assert after.threads_per_kernel == before.threads_per_kernel - 3, (before, after)
    assert after.service_fds_per_kernel <= before.service_fds_per_kernel
