# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl swe build --generate`: SWE instances by the hundred, offline, SWE-smith style.

For each project of `projects.json`:
  1. download: its pinned sdist (pip, once) unpacked as the upstream tree;
  2. baseline: its tests once in a sandbox, with the probe plugin recording which project
     functions each test runs (cached per project);
  3. mutate: every AST mutation site in functions that some passing test runs (`mutations.py`),
     in a seeded order that takes one site per function in turn, so bugs spread over the code;
  4. validate: each candidate's tests (the files whose tests ran the mutated function) in a fresh
     sandbox, candidates concurrently; kept when FAIL_TO_PASS (passed on upstream, not with the
     bug) is non-empty, with PASS_TO_PASS the rest of what passed in those files, and its
     FAIL_TO_PASS set new for the project; a project stops at its quota;
  5. write: the instance's repository (root commit only, hidden tests removed), gold patch,
     test patch, eval script and a problem statement from the failing tests, in the SWE-bench
     schema with its recipe; the repository itself is deleted again and rebuilt on first use.
Everything lands under `${PRORL_HOME:-~/.cache/prorl}/swe/generated/` (see `store.py`); a
second run reuses the instances, baselines and the record of tried candidates.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.tasks.swe.build import render_eval_script
from nemo_gym_prorl.tasks.swe.config import SweConfig
from nemo_gym_prorl.tasks.swe.materialize import build_generated_repo, read_source
from nemo_gym_prorl.tasks.swe.mutations import MutationError, Site, apply_site, find_sites
from nemo_gym_prorl.tasks.swe.projects import (
    Project,
    list_source_files,
    list_test_files,
    load_projects,
    upstream_tree,
)
from nemo_gym_prorl.tasks.swe.runner import PASSED, PYTEST_ARGS, RunResult, run_project_tests
from nemo_gym_prorl.tasks.swe.sdist_repo import fetch_sdists
from nemo_gym_prorl.tasks.swe.statement import StatementLeakError, write_statement
from nemo_gym_prorl.tasks.swe.store import (
    GeneratedRecipe,
    append_jsonl,
    candidates_path,
    instances_path,
    load_candidates,
    load_generated,
)

logger = logging.getLogger(__name__)
COLLECT = "<collect>"
KIND_SHARE = 0.3  # of a project's quota, per mutation kind, while candidates of other kinds remain


class GenerateOptions(BaseModel):
    projects: int | None = Field(None, ge=1, description="Use the first N projects of projects.json.")
    only: list[str] | None = Field(None, description="Project names to use (default: all).")
    per_project: int = Field(20, ge=1, description="Instances to keep per project (its quota).")
    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    seed: int = 0
    candidates_per_kept: int = Field(5, ge=1, description="At most quota x this many candidates per project.")
    max_fail_to_pass: int = Field(40, ge=1, description="Broader bugs (an import broken) are not kept.")


class Baseline(BaseModel):
    project: str
    version: str
    test_files: list[str]
    statuses: dict[str, str]
    calls: dict[str, list[str]]
    seconds: float


class Candidate(BaseModel):
    id: str
    project: str
    file: str
    site: Site
    seed: int
    test_files: list[str]
    mutated: str = Field(repr=False)


class Outcome(BaseModel):
    id: str
    project: str
    file: str
    site: Site
    status: (
        str  # kept | duplicate | no_failing_test | too_broad | collection_error | timeout | over_quota | ...
    )
    fail_to_pass: list[str] = Field(default_factory=list)
    pass_to_pass: list[str] = Field(default_factory=list)
    failures: dict[str, str] = Field(default_factory=dict)
    seconds: float = 0.0


class ProjectReport(BaseModel):
    project: str
    functions: int = 0
    sites: int = 0
    candidates: int = 0
    kept: int = 0
    kept_before: int = 0
    outcomes: dict[str, int] = Field(default_factory=dict)
    note: str = ""


class GenerateReport(BaseModel):
    projects: list[ProjectReport]
    stages: dict[str, float]
    candidates: int
    kept: int
    total: int
    seconds: float
    instances_path: str


def _instance_id(project: Project, candidate_id: str) -> str:
    return f"prorl-gen__{project.project}-{candidate_id}"


def _candidate_id(project: Project, file: str, site: Site) -> str:
    key = json.dumps([project.key, file, site.model_dump()], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:10]


# ---------------------------------------------------------------- stages 1-2: download, baseline


async def _baseline(config: SweConfig, project: Project, tree: Path) -> Baseline | None:
    path = config.generated_dir / "baselines" / f"{project.key}.json"
    files = list_test_files(project, tree)
    if path.is_file():
        cached = Baseline.model_validate_json(path.read_text())
        if cached.test_files == files:
            return cached
    run = await run_project_tests(config, project, tree, files, trace=True, timeout=600)
    if run.statuses is None or not any(s in PASSED for s in run.statuses.values()):
        logger.warning("%s: baseline tests did not run: %s", project.key, run.log_tail[-1500:])
        return None
    baseline = Baseline(project=project.project, version=project.version, test_files=files,
                        statuses=run.statuses, calls=run.calls, seconds=run.seconds)  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(baseline.model_dump_json())
    return baseline


# ---------------------------------------------------------------- stage 3: mutate


def _tests_by_function(baseline: Baseline) -> tuple[dict[str, set[str]], set[str]]:
    """function key -> the baseline-passing tests that ran it; and the functions collection ran."""
    by_function: dict[str, set[str]] = defaultdict(set)
    for test, functions in baseline.calls.items():
        if test == COLLECT or baseline.statuses.get(test) not in PASSED:
            continue
        for fn in functions:
            by_function[fn].add(test)
    return by_function, set(baseline.calls.get(COLLECT, []))


def _interleave_kinds(sites: list[tuple[str, Site]], rng: random.Random) -> list[tuple[str, Site]]:
    """The function's sites shuffled, kinds taken in turn (popped from the end), so its first
    candidates are of different kinds rather than of whichever kind it has most sites of."""
    by_kind: dict[str, list[tuple[str, Site]]] = defaultdict(list)
    for item in sites:
        by_kind[item[1].kind].append(item)
    kinds = sorted(by_kind)
    rng.shuffle(kinds)
    for kind in kinds:
        rng.shuffle(by_kind[kind])
    out: list[tuple[str, Site]] = []
    while any(by_kind.values()):
        out.extend(by_kind[kind].pop() for kind in kinds if by_kind[kind])
    return out[::-1]


def make_candidates(
    project: Project, tree: Path, baseline: Baseline, limit: int, seed: int, skip: set[str]
) -> tuple[list[Candidate], ProjectReport]:
    """Up to `limit` valid mutants of functions the tests run (not the ones collection runs), one
    site per function in turn, in an order fixed by the seed; ids in `skip` were tried before."""
    report = ProjectReport(project=project.project)
    by_function, collected = _tests_by_function(baseline)
    sources = {f: read_source(tree / f) for f in list_source_files(project, tree)}
    sites: dict[str, list[tuple[str, Site]]] = defaultdict(list)
    for file, text in sources.items():
        try:
            found = find_sites(text)
        except SyntaxError:
            continue  # a file for another Python version
        for site in found:
            key = f"{file}:{site.function_line}"
            if key in by_function and key not in collected:
                sites[key].append((file, site))
    report.functions, report.sites = len(sites), sum(len(v) for v in sites.values())
    rng = random.Random(f"{seed}:{project.key}")
    order = sorted(sites)
    rng.shuffle(order)
    for key in order:
        sites[key] = _interleave_kinds(sites[key], rng)
    candidates: list[Candidate] = []
    while order and len(candidates) < limit:
        for key in list(order):
            if not sites[key]:
                order.remove(key)
                continue
            file, site = sites[key].pop()
            cid = _candidate_id(project, file, site)
            if cid in skip:
                continue
            try:
                mutated = apply_site(sources[file], site)
            except MutationError:
                continue
            files = sorted({t.split("::", 1)[0] for t in by_function[key]})
            candidates.append(Candidate(id=cid, project=project.project, file=file, site=site, seed=seed,
                                        test_files=files, mutated=mutated))  # fmt: skip
            if len(candidates) >= limit:
                break
    return candidates, report


# ---------------------------------------------------------------- stage 4: validate


def _failure_of(test: str, failures: dict[str, str]) -> str:
    """A test's crash message; swebench's parser cuts ids at the first space, pytest's do not."""
    if test in failures:
        return failures[test]
    return next((m for t, m in failures.items() if t.startswith(test + " ")), "")


def judge(candidate: Candidate, baseline: Baseline, run: RunResult, max_fail_to_pass: int) -> Outcome:
    """FAIL_TO_PASS / PASS_TO_PASS of one mutant run against the baseline (no dedup, no quota)."""
    outcome = Outcome(id=candidate.id, project=candidate.project, file=candidate.file, site=candidate.site,
                      status="", seconds=run.seconds)  # fmt: skip
    if run.timed_out:
        outcome.status = "timeout"
        return outcome
    statuses = run.statuses
    if statuses is None or any("::" not in t and s == "ERROR" for t, s in statuses.items()):
        outcome.status = "collection_error"  # a test file no longer imports: not a targeted bug
        return outcome
    ran = set(candidate.test_files)
    passed_before = {t for t, s in baseline.statuses.items() if s in PASSED and t.split("::", 1)[0] in ran}
    f2p = sorted(t for t in passed_before if statuses.get(t) not in PASSED)
    hidden = {t.split("::", 1)[0] for t in f2p}
    outcome.fail_to_pass = f2p
    outcome.pass_to_pass = sorted(t for t in passed_before - set(f2p) if t.split("::", 1)[0] in hidden)
    outcome.failures = {t: _failure_of(t, run.failures) for t in f2p[:10]}
    if not f2p:
        outcome.status = "no_failing_test"
    elif len(f2p) > max_fail_to_pass:
        outcome.status = "too_broad"
    else:
        outcome.status = "kept"
    return outcome


class _Quota:
    """Per-project kept counts and FAIL_TO_PASS sets seen (dedup), shared by the workers."""

    def __init__(self, per_project: int, existing: list[dict[str, Any]]) -> None:
        self.per_project = per_project
        self.kept: dict[str, int] = defaultdict(int)
        self.seen: dict[str, set[frozenset[str]]] = defaultdict(set)
        self.kinds: dict[tuple[str, str], int] = defaultdict(int)
        for inst in existing:
            project = inst["recipe"]["project"]
            self.kept[project] += 1
            self.kinds[project, inst["recipe"]["kind"]] += 1
            self.seen[project].add(frozenset(inst["FAIL_TO_PASS"]))

    def full(self, project: str) -> bool:
        return self.kept[project] >= self.per_project

    def kind_full(self, project: str, kind: str) -> bool:
        return self.kinds[project, kind] >= math.ceil(self.per_project * KIND_SHARE)

    def admit(self, outcome: Outcome) -> Outcome:
        if outcome.status != "kept":
            return outcome
        key = frozenset(outcome.fail_to_pass)
        if key in self.seen[outcome.project]:
            outcome.status = "duplicate"
        elif self.full(outcome.project):
            outcome.status = "over_quota"
        else:
            self.seen[outcome.project].add(key)
            self.kept[outcome.project] += 1
            self.kinds[outcome.project, outcome.site.kind] += 1
        return outcome


async def validate_all(
    config: SweConfig,
    trees: dict[str, Path],
    projects: dict[str, Project],
    baselines: dict[str, Baseline],
    queues: dict[str, list[Candidate]],
    quota: _Quota,
    options: GenerateOptions,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> list[tuple[Candidate, Outcome]]:
    """Run the candidates, `workers` at a time, taking projects in turn; a project that reaches
    its quota gets no more candidates started."""
    results: list[tuple[Candidate, Outcome]] = []
    order = [name for name in queues if queues[name]]
    turn = 0

    def next_candidate() -> Candidate | None:
        nonlocal turn
        for _ in range(len(order)):
            name = order[turn % len(order)]
            turn += 1
            if queues[name] and not quota.full(name):
                # a kind that has its share waits while others remain: swapped arguments break
                # tests so reliably that they would otherwise fill most quotas
                queue = queues[name]
                pick = next((i for i, c in enumerate(queue) if not quota.kind_full(name, c.site.kind)), 0)
                return queue.pop(pick)
        return None

    async def worker() -> None:
        while (candidate := next_candidate()) is not None:
            baseline = baselines[candidate.project]
            timeout = min(300.0, max(15.0, 4 * baseline.seconds))  # an endless loop costs little
            run = await run_project_tests(config, projects[candidate.project], trees[candidate.project],
                                          candidate.test_files, replace={candidate.file: candidate.mutated},
                                          timeout=timeout)  # fmt: skip
            outcome = quota.admit(judge(candidate, baseline, run, options.max_fail_to_pass))
            results.append((candidate, outcome))
            if on_outcome is not None:
                on_outcome(outcome)

    if order:
        await asyncio.gather(*(worker() for _ in range(options.workers)))
    return results


# ---------------------------------------------------------------- stage 5: write


def write_instance(
    config: SweConfig, project: Project, candidate: Candidate, outcome: Outcome
) -> dict[str, Any]:
    """The SWE-bench row of one kept candidate (its repository is built, read and deleted)."""
    iid = _instance_id(project, candidate.id)
    hidden = sorted({t.split("::", 1)[0] for t in outcome.fail_to_pass})
    recipe = GeneratedRecipe(project=project.project, version=project.version, file=candidate.file,
                             function=candidate.site.function, kind=candidate.site.kind, site=candidate.site,
                             seed=candidate.seed, hidden_test_files=hidden, pythonpath=project.pythonpath)  # fmt: skip
    scratch = config.generated_dir / "repos"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".write-", dir=scratch) as tmp:
        built = build_generated_repo(config, recipe, iid, Path(tmp) / "repo")
    return {
        "instance_id": iid,
        "repo": project.upstream,
        "version": project.version,
        "base_commit": built.base_commit,
        "problem_statement": write_statement(
            project.project, outcome.fail_to_pass, outcome.failures, built.patch
        ),
        "patch": built.patch,
        "test_patch": built.test_patch,
        "eval_script": render_eval_script(hidden, project.pythonpath, built.test_patch, PYTEST_ARGS),
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "image": "",
        "license": project.license,
        "source": f"pypi:{project.project}=={project.version} (sdist sha256 {project.sdist_sha256[:12]}...), "
        f"generated: {candidate.site.kind} in {candidate.file}::{candidate.site.function}",
        "FAIL_TO_PASS": outcome.fail_to_pass,
        "PASS_TO_PASS": outcome.pass_to_pass,
        "recipe": recipe.model_dump(),
    }


# ---------------------------------------------------------------- the whole run


def select_projects(options: GenerateOptions) -> list[Project]:
    projects = load_projects()
    if options.only:
        unknown = set(options.only) - {p.project for p in projects}
        if unknown:
            raise ValueError(f"not in projects.json: {sorted(unknown)}")
        projects = [p for p in projects if p.project in options.only]
    return projects[: options.projects] if options.projects else projects


async def _bounded(limit: int, jobs: list[Callable[[], Any]]) -> list[Any]:
    semaphore = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Any]) -> Any:
        async with semaphore:
            return await job()

    return await asyncio.gather(*(one(j) for j in jobs))


async def generate(
    config: SweConfig | None = None,
    options: GenerateOptions | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> GenerateReport:
    config = config or SweConfig()
    options = options or GenerateOptions()
    started = time.perf_counter()
    stages: dict[str, float] = {}
    projects = {p.project: p for p in select_projects(options)}
    existing = load_generated(config)
    quota = _Quota(options.per_project, [i for i in existing if i["recipe"]["project"] in projects])
    reports = {name: ProjectReport(project=name, kept_before=quota.kept[name]) for name in projects}
    todo = [name for name in projects if not quota.full(name)]

    t = time.perf_counter()
    await asyncio.to_thread(fetch_sdists, [projects[n] for n in todo], config.sdists_dir)
    trees = dict(zip(todo, await _bounded(options.workers, [
        (lambda p=projects[n]: asyncio.to_thread(upstream_tree, p, config)) for n in todo
    ]), strict=True))  # fmt: skip
    stages["download"] = time.perf_counter() - t

    t = time.perf_counter()
    found = await _bounded(
        options.workers, [(lambda n=n: _baseline(config, projects[n], trees[n])) for n in todo]
    )
    baselines = {n: b for n, b in zip(todo, found, strict=True) if b is not None}
    for n in todo:
        if n not in baselines:
            reports[n].note = "baseline tests did not run"
    stages["baseline"] = time.perf_counter() - t
    say(f"baselines: {len(baselines)} projects in {stages['baseline']:.1f} s")

    t = time.perf_counter()
    tried = {c["id"] for c in load_candidates(config)}
    queues: dict[str, list[Candidate]] = {}
    for name, baseline in baselines.items():
        need = options.per_project - quota.kept[name]
        queue, report = await asyncio.to_thread(make_candidates, projects[name], trees[name], baseline,
                                                need * options.candidates_per_kept, options.seed, tried)  # fmt: skip
        queues[name] = queue
        reports[name].functions, reports[name].sites = report.functions, report.sites
    stages["mutate"] = time.perf_counter() - t
    say(f"candidates: {sum(map(len, queues.values()))} queued in {stages['mutate']:.1f} s")

    t = time.perf_counter()

    def progress(outcome: Outcome) -> None:
        reports[outcome.project].candidates += 1
        if outcome.status == "kept":
            say(f"  kept {outcome.project} {outcome.site.kind} in {outcome.site.function} "
                f"({len(outcome.fail_to_pass)} FAIL_TO_PASS, {outcome.seconds:.1f} s)")  # fmt: skip

    results = await validate_all(config, trees, projects, baselines, queues, quota, options, progress)
    stages["validate"] = time.perf_counter() - t

    t = time.perf_counter()
    kept = [(c, o) for c, o in results if o.status == "kept"]

    async def write(candidate: Candidate, outcome: Outcome) -> dict[str, Any] | None:
        try:
            return await asyncio.to_thread(
                write_instance, config, projects[candidate.project], candidate, outcome
            )
        except StatementLeakError:
            outcome.status = "statement_leak"
            return None

    written = await _bounded(options.workers, [(lambda c=c, o=o: write(c, o)) for c, o in kept])
    rows = [w for w in written if w is not None]
    append_jsonl(instances_path(config), rows)
    append_jsonl(
        candidates_path(config), [o.model_dump(exclude={"failures", "pass_to_pass"}) for _, o in results]
    )
    stages["write"] = time.perf_counter() - t

    for _, outcome in results:
        counts = reports[outcome.project].outcomes
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    for row in rows:
        reports[row["recipe"]["project"]].kept += 1
    return GenerateReport(
        projects=list(reports.values()),
        stages={k: round(v, 2) for k, v in stages.items()},
        candidates=len(results),
        kept=len(rows),
        total=len(existing) + len(rows),
        seconds=round(time.perf_counter() - started, 2),
        instances_path=str(instances_path(config)),
    )


def remove_generated(config: SweConfig) -> None:
    """Forget every generated instance (the sdists stay)."""
    shutil.rmtree(config.generated_dir, ignore_errors=True)
