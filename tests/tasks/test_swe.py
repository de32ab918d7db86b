# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE: wrong and fuzzy patches on a real offline instance; image path templates for clusters."""

import asyncio

import pytest

from nemo_gym_prorl.tasks.swe import SweConfig, SweTask, ensure_built


def test_image_template_and_cluster_spec():
    cfg = SweConfig(
        backend="apptainer",
        sif_dir="/sif",
        image_template="{sif_dir}/swebench_sweb.eval.x86_64.{instance_id_docker}.sif",
    )
    row = {"instance_id": "astropy__astropy-12907"}
    assert cfg.resolve_image(row) == "/sif/swebench_sweb.eval.x86_64.astropy_1776_astropy-12907.sif"
    spec = cfg.sandbox_spec(row)
    assert (
        spec.backend == "apptainer" and spec.workspace_mount != "/testbed" and spec.python_runtime == "none"
    )
    assert cfg.repo_source(row) is None  # the repository is the image's own /testbed
    assert SweConfig().sandbox_spec(row).workspace_mount == "/testbed"


@pytest.mark.bwrap
@pytest.mark.slow
async def test_wrong_and_fuzzy_patches():
    inst = next(i for i in await ensure_built() if "toolz" in i["instance_id"])
    task = SweTask()
    wrong = inst["patch"].replace("yield prev[:len(seq) % n]", "yield prev[:len(seq) % n + 1]")
    assert wrong != inst["patch"]
    out = await task.evaluate(inst, None, {"git_patch": wrong})
    assert out.reward == 0.0 and out.reason == "unresolved"
    assert out.report["pass_rates"]["FAIL_TO_PASS"] < 1.0
    # the gold patch with its hunk header off by 3 lines: git apply refuses, patch --fuzz applies it
    fuzzy = inst["patch"].replace("@@ -732,7 +732,7 @@", "@@ -735,7 +735,7 @@")
    out = await task.evaluate(inst, None, {"git_patch": fuzzy})
    assert out.reward == 1.0 and out.report["applied_with"] in ("git_apply", "patch_fuzz")


@pytest.mark.bwrap
@pytest.mark.slow
async def test_every_gold_patch_resolves_and_an_empty_patch_does_not():
    instances = await ensure_built()
    assert len(instances) >= 5
    task = SweTask()

    async def grade(inst: dict, patch: str) -> tuple[str, float, str]:
        out = await task.evaluate(inst, None, {"git_patch": patch})
        return inst["instance_id"], out.reward, out.reason

    gold = await asyncio.gather(*(grade(inst, inst["patch"]) for inst in instances))
    empty = await asyncio.gather(*(grade(inst, "") for inst in instances))
    assert [r for r in gold if r[1] != 1.0] == [], gold
    assert all(reward == 0.0 for _, reward, _ in empty), empty
