# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Generated SWE instances end to end on a small sample: one small project (inflection), a few
candidates validated in real bubblewrap sandboxes, the instances written, then each one through
the real EVAL path: the gold patch resolves it, the empty patch does not, and on the unfixed base
exactly FAIL_TO_PASS fails. The sdist comes from the shared cache, as for the built instances
(pip downloads it once where the cache lacks it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nemo_gym_prorl.tasks.swe.build import has_history_beyond_base
from nemo_gym_prorl.tasks.swe.config import SweConfig, default_swe_dir
from nemo_gym_prorl.tasks.swe.generate import GenerateOptions, generate
from nemo_gym_prorl.tasks.swe.projects import load_projects
from nemo_gym_prorl.tasks.swe.statement import changed_lines
from nemo_gym_prorl.tasks.swe.store import load_generated
from nemo_gym_prorl.tasks.swe.verify import verify_instances


def test_projects_are_pinned_and_permissive() -> None:
    projects = load_projects()
    assert len(projects) >= 10 and len({p.project for p in projects}) == len(projects)
    permissive = ("MIT", "BSD", "Apache", "ISC", "PSF")
    for p in projects:
        assert len(p.sdist_sha256) == 64 and p.version and p.source and p.tests, p.project
        assert any(word in p.license for word in permissive), p.project


@pytest.mark.bwrap
@pytest.mark.slow
async def test_generated_instances_gold_resolves_and_empty_does_not(tmp_path: Path) -> None:
    config = SweConfig(cache_dir=tmp_path)
    shared = default_swe_dir() / "sdists"
    if shared.is_dir():
        shutil.copytree(shared, config.sdists_dir, dirs_exist_ok=True)
    options = GenerateOptions(only=["inflection"], per_project=2, workers=2, candidates_per_kept=3)
    report = await generate(config, options)
    rows = load_generated(config)
    assert report.kept == len(rows) == 2, report
    assert set(report.stages) == {"download", "baseline", "mutate", "validate", "write"}
    for row in rows:
        assert row["FAIL_TO_PASS"] and row["PASS_TO_PASS"] and row["recipe"]["project"] == "inflection"
        assert not any(line in row["problem_statement"] for line in changed_lines(row["patch"]))
        assert not (config.generated_dir / "repos" / row["instance_id"]).exists()  # built on first use

    checked = await verify_instances(config, rows, workers=2)
    assert checked.ok == checked.instances == 2, checked.failed
    for row in rows:  # the repositories EVAL built: one root commit, hidden tests absent
        repo = config.offline_repo(row)
        assert not has_history_beyond_base(repo)
        assert not any((repo / f).exists() for f in row["recipe"]["hidden_test_files"])

    again = await generate(config, options)  # the quota is met: nothing is run again
    assert again.kept == 0 and again.candidates == 0 and again.total == 2
