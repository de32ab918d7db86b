# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A Ray node that joins late is told every backend change in order, and only the current policy."""

from __future__ import annotations

from nemo_gym_prorl.pipeline.backend_changes import BackendChanges


def test_a_late_node_replays_backend_changes_in_order_with_only_the_newest_policy() -> None:
    changes = BackendChanges()
    changes.record("add", ("http://b:8000/v1",), {})
    changes.record("publish_policy", ({"version": 1},), {})
    changes.record("drain", ("http://a:8000/v1",), {})
    changes.record("publish_policy", ({"version": 2},), {})
    assert changes.replay() == [
        ("add", ("http://b:8000/v1",), {}),
        ("drain", ("http://a:8000/v1",), {}),
        ("publish_policy", ({"version": 2},), {}),
    ]


def test_nothing_to_replay_before_any_change() -> None:
    assert BackendChanges().replay() == []
