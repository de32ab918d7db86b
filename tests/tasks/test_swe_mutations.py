# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE bug injection: each mutation kind makes one minimal, parseable change to a small source,
replays from its recorded site, and the candidates' order is fixed by the seed; the generator's
dedup and problem statements."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

from nemo_gym_prorl.tasks.swe.generate import Baseline, Candidate, _Quota, judge, make_candidates
from nemo_gym_prorl.tasks.swe.mutations import MUTATION_KINDS, MutationError, Site, apply_site, find_sites
from nemo_gym_prorl.tasks.swe.projects import Project
from nemo_gym_prorl.tasks.swe.runner import RunResult
from nemo_gym_prorl.tasks.swe.statement import changed_lines, write_statement

SOURCE = '''\
"""A module."""


def window(seq, start, size):
    """Docstrings are never mutated: 1 < 2."""
    if start < 0 or size <= 0:
        return []
    out = seq[start:start + size]  # a trailing comment stays
    for i in range(len(out) - 1):
        if out[i] == out[i + 1]:
            continue
    return out if not strict() else list(out)


class Box:
    @property
    def label(self, verbose=True):
        if self.name is None:
            return "é"
        return fmt(self.name, self.size * 2)
'''

EXPECTED = {  # kind -> one (removed line, added line) it can produce here
    "flip_comparison": ("    if start < 0 or size <= 0:", "    if start <= 0 or size <= 0:"),
    "swap_boolean_operator": ("    if start < 0 or size <= 0:", "    if start < 0 and size <= 0:"),
    "negate_condition": ("    if start < 0 or size <= 0:", "    if not (start < 0 or size <= 0):"),
    "off_by_one_constant": ("    if start < 0 or size <= 0:", "    if start < 1 or size <= 0:"),
    "off_by_one_slice": ("    out = seq[start:start + size]  # a trailing comment stays",
                         "    out = seq[start + 1:start + size]  # a trailing comment stays"),
    "off_by_one_range": ("    for i in range(len(out) - 1):", "    for i in range((len(out) - 1) + 1):"),
    "remove_branch": ("        if self.name is None:", None),
    "remove_early_return": ("            continue", "            pass"),
    "swap_call_arguments": ("        return fmt(self.name, self.size * 2)", "        return fmt(self.size * 2, self.name)"),
    "change_constant": None,  # no bool constant in a body here (the default argument is not one)
    "swap_arithmetic": ("    out = seq[start:start + size]  # a trailing comment stays",
                        "    out = seq[start:start - size]  # a trailing comment stays"),
}  # fmt: skip


def _diff(a: str, b: str) -> tuple[list[str], list[str]]:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0))
    removed = [x[1:] for x in lines if x.startswith("-") and not x.startswith("---")]
    added = [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++")]
    return removed, added


def test_every_site_is_a_minimal_parseable_change_that_replays() -> None:
    sites = find_sites(SOURCE)
    assert {s.kind for s in sites} == set(MUTATION_KINDS) - {"change_constant"}
    original = ast.dump(ast.parse(SOURCE))
    for site in sites:
        mutated = apply_site(SOURCE, site)
        assert ast.dump(ast.parse(mutated)) != original, site
        removed, added = _diff(SOURCE, mutated)
        # one statement's lines at most, and everything else byte for byte
        assert 1 <= len(removed) <= 2 and len(added) <= 1, (site, removed, added)
        assert "Docstrings" not in "".join(removed)
        # a site recorded as JSON replays to the same text
        assert apply_site(SOURCE, Site.model_validate_json(site.model_dump_json())) == mutated


@pytest.mark.parametrize("kind", [k for k in MUTATION_KINDS if EXPECTED[k]])
def test_each_kind_makes_the_expected_change(kind: str) -> None:
    removed_line, added_line = EXPECTED[kind]
    changes = set()
    for site in (s for s in find_sites(SOURCE) if s.kind == kind):
        removed, added = _diff(SOURCE, apply_site(SOURCE, site))
        changes.add((removed[0], added[0] if added else None))
    assert (removed_line, added_line) in changes, changes


def test_sites_know_their_function_and_its_code_line() -> None:
    sites = find_sites(SOURCE)
    assert {s.function for s in sites} == {"window", "Box.label"}
    # co_firstlineno of a decorated function is its first decorator's line
    assert {s.function_line for s in sites if s.function == "Box.label"} == {16}
    assert {s.function_line for s in sites if s.function == "window"} == {4}


def test_bool_constants_and_removed_branches() -> None:
    src = "def f(x):\n    flag = True\n    if x:\n        flag = False\n    return flag\n"
    kinds = {s.kind: s for s in reversed(find_sites(src))}  # the first site of each kind
    assert apply_site(src, kinds["change_constant"]).splitlines()[1] == "    flag = False"
    assert apply_site(src, kinds["remove_branch"]) == "def f(x):\n    flag = True\n    return flag\n"


def test_a_site_that_is_not_there_is_refused() -> None:
    site = next(s for s in find_sites(SOURCE) if s.kind == "flip_comparison")
    with pytest.raises(MutationError):
        apply_site("def window():\n    return 0\n", site)


def _project() -> Project:
    return Project(project="demo", version="1", sdist_sha256="0" * 64, license="MIT", upstream="o/demo",
                   source=["demo.py"], tests=["test_demo.py"])  # fmt: skip


def test_candidates_are_seeded_and_only_in_functions_tests_ran(tmp_path: Path) -> None:
    (tmp_path / "demo.py").write_text(SOURCE)
    (tmp_path / "test_demo.py").write_text("def test_window(): pass\n")
    baseline = Baseline(project="demo", version="1", test_files=["test_demo.py"], seconds=1.0,
                        statuses={"test_demo.py::test_window": "PASSED"},
                        calls={"test_demo.py::test_window": ["demo.py:4"], "<collect>": []})  # fmt: skip
    first, report = make_candidates(_project(), tmp_path, baseline, 8, seed=3, skip=set())
    again, _ = make_candidates(_project(), tmp_path, baseline, 8, seed=3, skip=set())
    other, _ = make_candidates(_project(), tmp_path, baseline, 8, seed=4, skip=set())
    assert [c.id for c in first] == [c.id for c in again] and [c.id for c in first] != [c.id for c in other]
    assert {c.site.function for c in first} == {"window"} and report.functions == 1  # Box.label never ran
    assert len({c.site.kind for c in first[:4]}) == 4  # kinds taken in turn
    assert all(c.test_files == ["test_demo.py"] for c in first)
    skipped, _ = make_candidates(_project(), tmp_path, baseline, 8, seed=3, skip={first[0].id})
    assert first[0].id not in {c.id for c in skipped}
    # a function that collection runs is never mutated
    baseline.calls["<collect>"] = ["demo.py:4"]
    assert make_candidates(_project(), tmp_path, baseline, 8, seed=3, skip=set())[0] == []


def test_judge_and_dedup_by_fail_to_pass() -> None:
    baseline = Baseline(project="demo", version="1", test_files=["t.py", "u.py"], seconds=1.0, calls={},
                        statuses={"t.py::a": "PASSED", "t.py::b": "PASSED", "t.py::c": "FAILED",
                                  "u.py::d": "PASSED"})  # fmt: skip
    site = find_sites(SOURCE)[0]

    def outcome(cid: str, statuses: dict[str, str]) -> str:
        candidate = Candidate(id=cid, project="demo", file="demo.py", site=site, seed=0,
                              test_files=["t.py", "u.py"], mutated="")  # fmt: skip
        return quota.admit(judge(candidate, baseline, RunResult(statuses=statuses), 40)).status

    quota = _Quota(per_project=2, existing=[])
    bug = {"t.py::a": "FAILED", "t.py::b": "PASSED", "t.py::c": "FAILED", "u.py::d": "PASSED"}
    judged = judge(Candidate(id="x", project="demo", file="demo.py", site=site, seed=0, test_files=["t.py", "u.py"],
                             mutated=""), baseline, RunResult(statuses=bug), 40)  # fmt: skip
    # FAIL_TO_PASS: passed before, not now; PASS_TO_PASS: the rest of what passed, in the same files
    assert judged.fail_to_pass == ["t.py::a"] and judged.pass_to_pass == ["t.py::b"]
    assert outcome("1", bug) == "kept"
    assert outcome("2", {**bug, "t.py::c": "PASSED"}) == "duplicate"  # same FAIL_TO_PASS set
    assert outcome("3", {k: "PASSED" for k in bug}) == "no_failing_test"
    assert outcome("4", {"t.py": "ERROR"}) == "collection_error"
    assert outcome("5", {**bug, "t.py::b": "FAILED"}) == "kept"
    assert outcome("6", {**bug, "u.py::d": "FAILED"}) == "over_quota"
    assert quota.kind_full("demo", site.kind)  # its share of the quota: other kinds go first


def test_problem_statement_never_quotes_the_patch() -> None:
    patch = (
        "--- a/demo.py\n+++ b/demo.py\n@@ -1,1 +1,1 @@\n"
        "-    return seq[start - 1:start + size]\n+    return seq[start:start + size]\n"
    )
    failures = {
        "t.py::test_window": "AssertionError: assert [0, 1] == [1, 2]\n    return seq[start:start + size]\nmore",
        "t.py::test_other": "    return seq[start - 1:start + size]",
    }
    text = write_statement("demo", ["t.py::test_window", "t.py::test_other"], failures, patch)
    assert all(line not in text for line in changed_lines(patch))
    assert "t.py::test_window" in text and "assert [0, 1] == [1, 2]" in text and "2 tests fail" in text
