"""Suite-wide conventions: tests that need an optional binary skip, saying which and why."""

from __future__ import annotations

import shutil

import pytest

_REQUIRED_BINARIES: dict[str, tuple[tuple[str, ...], str]] = {
    "bwrap": (("bwrap",), "bubblewrap is not installed (apt-get install bubblewrap)"),
    "tmux": (("tmux",), "tmux is not installed (apt-get install tmux)"),
    "apptainer": (
        ("apptainer", "singularity"),
        "neither apptainer nor singularity is on PATH: Apptainer is not packaged for this machine's "
        "Debian and no registry ships it; these tests run on HPC clusters that have it",
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, (binaries, reason) in _REQUIRED_BINARIES.items():
        if any(shutil.which(b) for b in binaries):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
