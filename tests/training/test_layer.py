# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`training` sits beside `integrations`: it builds on the rollout parts and the datasets, never
on the service's internals or the CLI."""

from __future__ import annotations

from test_layering import graph

ALLOWED = {"training", "agent", "tasks", "tools", "sandbox", "llm", "pipeline", "datasets"}


def test_training_imports_only_the_layers_below_it() -> None:
    imports = {
        target
        for source, targets in graph().items()
        if source.startswith("nemo_gym_prorl.training")
        for target in targets
    }
    assert imports, "the import graph sees the package"
    assert {t.split(".")[1] for t in imports} <= ALLOWED, sorted(imports)
