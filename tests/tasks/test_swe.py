# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE: wrong and fuzzy patches on a real offline instance; image path templates for clusters."""

import asyncio
import concurrent.futures
import json
import shutil
import time
from pathlib import Path

import pytest

from nemo_gym_prorl.pipeline.handler import InvalidInstanceError
from nemo_gym_prorl.tasks.swe import SweConfig, SweTask, ensure_built, load_instances
from nemo_gym_prorl.tasks.swe.build import load_recipes, recipe_ids
from nemo_gym_prorl.tasks.swe.sdist_repo import fetch_sdist


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


def test_a_recipe_not_built_yet_passes_the_door_without_being_built(tmp_path: Path) -> None:
    task = SweTask(SweConfig(cache_dir=tmp_path / "swe"))
    for iid in sorted(recipe_ids()):
        task.check_row({"instance_id": iid, "responses_create_params": {"input": "fix it"}})
    with pytest.raises(InvalidInstanceError, match="instance_id"):
        task.check_row({"instance_id": "nobody__nothing-1", "responses_create_params": {"input": "fix it"}})
    assert not (tmp_path / "swe").exists()  # checked from the committed recipes: nothing built


async def test_a_burst_of_first_uses_in_one_process_builds_once_and_all_of_them_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A burst of SWE rollouts on a new cache all ask for the build at once. Waiting for the
    # build's file lock in the default thread pool, they once held every thread of it, and the
    # build (which runs in that pool) never ran.
    import nemo_gym_prorl.tasks.swe.build as build

    builds: list[list[str]] = []

    async def build_all(config: SweConfig, only: list[str]) -> list[dict]:
        builds.append(list(only))
        await asyncio.to_thread(time.sleep, 0.05)  # the build's own work in the default pool
        config.instances_path.parent.mkdir(parents=True, exist_ok=True)
        config.instances_path.write_text("".join(json.dumps({"instance_id": i}) + "\n" for i in only))
        return []

    monkeypatch.setattr(build, "build_all", build_all)
    monkeypatch.setattr(build, "has_history_beyond_base", lambda _: False)
    config = SweConfig(cache_dir=tmp_path / "swe")
    iid = sorted(recipe_ids())[0]
    (config.repos_dir / iid / ".git").mkdir(parents=True)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    firsts = [ensure_built(config, only=[iid]) for _ in range(6)]
    built = await asyncio.wait_for(asyncio.gather(*firsts), timeout=20)
    assert builds == [[iid]] and all(b == [{"instance_id": iid}] for b in built)


@pytest.mark.bwrap
async def test_init_builds_a_recipe_instance_on_first_use_and_only_that_one(tmp_path: Path) -> None:
    await ensure_built()  # the suite's cache, which holds the pinned sdists: no download here
    iid = sorted(recipe_ids())[0]
    recipe = next(r for r in load_recipes() if r.instance_id == iid)
    cache = tmp_path / "swe"
    (cache / "sdists").mkdir(parents=True)
    shutil.copy(fetch_sdist(recipe, SweConfig().sdists_dir), cache / "sdists")  # just its own
    task = SweTask(SweConfig(cache_dir=cache))
    row = {"instance_id": iid, "responses_create_params": {"input": "fix it"}}
    with pytest.raises(LookupError):
        task.resolve_instance(row)
    await task.build_if_needed(row)
    instance = task.resolve_instance(row)
    assert instance["FAIL_TO_PASS"] and (cache / "repos" / iid / ".git").is_dir()
    assert [p.name for p in (cache / "repos").iterdir()] == [iid]  # the one asked for
    await task.build_if_needed(row)  # built: nothing to do
    assert [i["instance_id"] for i in load_instances(task.config)] == [iid]
