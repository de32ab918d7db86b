# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A real local Ray cluster of two raylets on this machine for a test module (tests only)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ray_local import (
    add_local_node,
    connect,
    shutdown_local_cluster,
    start_local_cluster,
)


@contextlib.contextmanager
def two_node_cluster() -> Iterator[Any]:
    """The head and one worker, one CPU each, this process connected; a test may add and kill
    more nodes. On exit, fails if any Ray process outlived the cluster."""
    # The nodes' workers import test-support handlers from tests/, as this process does.
    tests_dir = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [tests_dir, os.environ.get("PYTHONPATH")]))
    cluster = start_local_cluster()
    try:
        add_local_node(cluster)
        connect(cluster)
        yield cluster
    finally:
        assert shutdown_local_cluster(cluster) == [], "Ray processes outlived the cluster"
