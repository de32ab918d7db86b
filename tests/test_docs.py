# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The README is a front door and the pages under docs/ hold the rest; every measured figure they
quote is one a results file holds.

How to quote a figure (the rule this file checks; docs/development.md says the same):

1. A measured figure is written as a Markdown link to the results file that holds it,
   `[38.3 ms p50, 15.7x](benchmarks/results/gym_sandbox.json)` (from docs/:
   `../benchmarks/results/...`). Every number in the link's text is a figure and must be held by
   that file: some number in it (at any depth, and numbers written inside its strings) equals the
   quoted one at the quoted precision, i.e. |value - quoted| <= half a unit of the quoted last
   digit (`0.62` holds for 0.625, `-0.02` for -0.0156). Normalised first: thousands separators
   dropped (`1,409` is 1409), a leading `+` dropped, `80%` read as 80 or 0.80, `2.4e-05` rounded
   on its mantissa; a unit after the number (`ms`, `x`, `s`, `min`) is not part of it. Digits
   glued to a letter (`p50`, `v9`, `r16`) are not numbers; keep labels such as `E(8)` outside the
   link. A file holding more than 300 numbers (train.json, train_sweep.json, overlap.json) is quoted
   through a JSON pointer to the part quoted, and only that part is searched:
   `[+0.48 [+0.31, +0.62]](benchmarks/results/train.json#/figures/gains/rl_over_sft:rl_families)`;
   a `*` takes every member (`#/figures/grpo_steps/*/reward`). Any link may name a part.
2. A sentence that calls itself a measurement (it says measured, measures or recorded) quotes no
   decimal, signed (`+0.26`) or unit-bearing (`38.3 ms`, `15.7x`, `12 s`, `80%`) number outside
   such a link. So a measured figure cannot sit in prose without its file.
3. A figure keeps the company it is quoted in: a sentence that quotes a results link, and every row
   of a table and every item of a list (continuation lines included) any of whose rows or items
   quotes one, holds no decimal, signed or unit-bearing number outside a results link either. So an
   unrecorded figure cannot hide in a measured table's unlinked row, a bullet beside linked ones, or
   a clause after a linked figure (`[+0.48](...), and products started at 0.53 against 0.28`). A
   config value or threshold there is written as code (KL `0.04`, at least `+0.10`). Not read: a
   figure another work published, said so beside it (`0.42 s per action (published, other
   hardware)`, `the paper's 0.42 s`), and a confidence level (`95% intervals`).
4. A number a statistic names is a measured figure wherever it stands: `median 175 tokens`, `a mean
   of 0.41`, `p95 2.8 s`, `on average 67 s` (integers included) are quoted through a results link
   or not at all.

Not read by any rule: fenced code blocks, inline code spans (config values, thresholds, flags),
and generated blocks (`<!-- name:start ... -->` to `<!-- name:end -->`, which their generators
rebuild from the results files and other tests keep in step). Section numbers, versions, config
defaults and CLI flags outside a results link, a measurement sentence and a measured table or list
are not figures; plain integers (`6 prompts`, `64 tasks`) are read only by rule 1 and rule 4.
A figure no results file holds is removed or worded as not measured, never kept.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"

README_MAX_LINES = 260
README_MAX_LINE_CHARS = 200
# A results file with more numbers than this is quoted through a JSON pointer to the part quoted.
POINTER_ABOVE = 300


def pages() -> list[Path]:
    """The README and every page under docs/, a subject's own folder included (docs/training/*.md)."""
    return [README, *sorted(DOCS.rglob("*.md"))]


# -- reading a page --------------------------------------------------------------------------------

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_GENERATED = re.compile(r"<!-- ([\w-]+):start.*?-->.*?<!-- \1:end -->", re.S)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1)[^\n]|\n(?![ \t]*\n))+?\1")
_RESULTS_TARGET = re.compile(r"\]\(((?:\.\./)*benchmarks/results/[\w.-]+\.json)(?:#([^)\s]*))?\)")


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    """Replace each match by spaces (newlines kept), so offsets and line numbers stay true."""
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def readable(text: str) -> str:
    """The page without fenced code and generated blocks (blanked, offsets kept)."""
    return _blank(_blank(text, _GENERATED), _FENCE)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


@dataclass(frozen=True)
class Citation:
    """One results link: its text, the file it names and where it is."""

    text: str
    target: str
    pointer: str | None
    start: int
    end: int


def citations(text: str) -> list[Citation]:
    """Every `[text](.../benchmarks/results/NAME.json)` link; the text may hold brackets of its own
    (an interval `[+0.31, +0.62]`), so the opening bracket is found by balancing."""
    found = []
    for match in _RESULTS_TARGET.finditer(text):
        close, depth, i = match.start(), 0, match.start()
        while i >= 0:
            depth += {"]": 1, "[": -1}.get(text[i], 0)
            if depth == 0:
                break
            i -= 1
        if i < 0:
            continue
        found.append(Citation(text[i + 1 : close], match.group(1), match.group(2), i, match.end()))
    return found


# -- numbers -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """A quoted number: its value, the half-unit of its last digit, and whether it was a percent."""

    quoted: str
    value: Decimal
    tolerance: Decimal
    percent: bool


# A number not glued to a word or another number (`p50`, `v9`, `1.2.3` give none); a sign counts only
# where it starts the number (`43-65` is 43 and 65, `[-0.17` is -0.17).
_FIGURE = re.compile(
    r"(?<![\w.])(?P<sign>[-+](?=\d))?(?P<int>\d{1,3}(?:,\d{3})+(?![\d])|\d+)(?P<frac>\.\d+)?"
    r"(?P<exp>[eE][-+]?\d+)?(?P<pct>%)?(?![\d.]\d)"
)


def figures(text: str) -> list[Figure]:
    """Every number in `text`, read as rule 1 reads them."""
    out = []
    for match in _FIGURE.finditer(text):
        sign = match.group("sign") or ""
        whole = match.group("int").replace(",", "")
        frac = match.group("frac") or ""
        exp = match.group("exp") or ""
        places = len(frac) - 1 if frac else 0
        scale = int(exp[1:]) if exp else 0
        value = Decimal(f"{'-' if sign == '-' else ''}{whole}{frac}{exp}")
        tolerance = Decimal(5) * Decimal(10) ** (scale - places - 1)
        out.append(Figure(match.group(0), value, tolerance, bool(match.group("pct"))))
    return out


_HASH = re.compile(r"[0-9a-f]{7,40}")
_NOT_FIGURES = ("commit", "versions")  # provenance, not figures


def _json_numbers(value: object) -> list[Decimal]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [Decimal(repr(value))] if value == value and abs(value) != float("inf") else []
    if isinstance(value, str):
        return [] if _HASH.fullmatch(value) else [f.value for f in figures(value)]
    if isinstance(value, dict):
        return [n for k, v in value.items() if k not in _NOT_FIGURES for n in _json_numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _json_numbers(v)]
    return []


def results_numbers(path: Path) -> list[Decimal]:
    """Every number a results file holds (values at any depth, and numbers inside its strings)."""
    return _json_numbers(json.loads(path.read_text()))


def pointed(document: object, pointer: str) -> list[object]:
    """The parts of `document` a JSON pointer names (`/figures/gains/rl_over_sft:all`); a `*` part
    takes every member (`/figures/grpo_steps/*/reward`: the reward of every step)."""
    nodes = [document]
    for part in pointer.strip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        found: list[object] = []
        for node in nodes:
            if part == "*" and isinstance(node, dict | list):
                found += list(node.values()) if isinstance(node, dict) else list(node)
            elif isinstance(node, dict) and part in node:
                found.append(node[part])
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                found.append(node[int(part)])
        nodes = found
    return nodes


def holds(numbers: list[Decimal], figure: Figure) -> bool:
    slack = Decimal("1e-9") * figure.tolerance
    candidates = [(figure.value, figure.tolerance)]
    if figure.percent:
        candidates.append((figure.value / 100, figure.tolerance / 100))
    return any(abs(n - value) <= tol + slack for value, tol in candidates for n in numbers)


# -- the two rules ---------------------------------------------------------------------------------

MEASUREMENT = re.compile(r"\b(measured|measures|recorded)\b", re.I)
UNIT = r"(?:ms|s|sec|seconds?|min|minutes?|h|hours?|GB|GiB|MB|MiB|KB|tok/s|tokens/s|rollouts/s|jobs/s|problems/s)"
MEASURED_LOOKING = re.compile(
    rf"(?<![\w.])(?:[-+]?\d[\d,]*(?:\.\d+)?(?:\s?{UNIT}\b|x\b|%)|[-+]\d[\d,]*(?:\.\d+)?|\d[\d,]*\.\d+(?![\d.]\d))"
)
_BLOCK_START = re.compile(r"^\s*(?:[-*] |\d+\. |\|)")
# rule 4: `median 175 tokens`, `a mean of 0.41`, `p95 2.8 s`, `on average 67 s`
STATISTIC = re.compile(
    r"\b(?:median|mean|average|p50|p9[059])(?:\s+(?:of|was|is|at|reward|time))?\s+(?:~|about\s+)?"
    r"(?P<figure>[-+]?\d[\d,]*(?:\.\d+)?(?:\s?" + UNIT + r"\b|x\b|%)?)(?![\w.]\w)",
    re.I,
)
# what rules 3 and 4 do not read: another work's published figure, said so beside it (`0.42 s per
# action (published, other hardware)`, `ProRL Agent's published 0.42 s`); a confidence level
_NOT_OURS_BEFORE = re.compile(r"\b(?:published|paper's)\s+$")
_NOT_OURS_AFTER = re.compile(r"[^|;\n]{0,40}?\(published\b|\d+%\s+(?:confidence|intervals?)\b")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s")


def _groups(text: str) -> list[list[tuple[int, int]]]:
    """Every table (its rows) and every list (its items, continuation lines included) of the page,
    as (begin, end) offsets."""
    groups: list[list[tuple[int, int]]] = []
    kind, offset = None, 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if kind == "list-gap" and stripped and line[0] in " \t" and not _ITEM.match(line):
            kind = "list"  # an item's paragraph after a blank line
            begin, _ = groups[-1][-1]
            groups[-1][-1] = (begin, offset + len(line))
        elif stripped.startswith("|"):
            if kind != "table":
                groups.append([])
            kind = "table"
            groups[-1].append((offset, offset + len(line)))
        elif _ITEM.match(line):
            if kind not in ("list", "list-gap"):
                groups.append([])
            kind = "list"
            groups[-1].append((offset, offset + len(line)))
        elif kind == "list" and stripped and (line[0] in " \t" or not stripped.startswith("#")):
            begin, _ = groups[-1][-1]  # a continuation line of the item
            groups[-1][-1] = (begin, offset + len(line))
        elif kind == "list" and not stripped:
            kind = "list-gap"  # a blank line: the list goes on only if an item follows
        else:
            kind = None
        offset += len(line)
    return groups


def _sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) over paragraphs, list items, table rows and headings."""
    blocks: list[tuple[int, int]] = []
    start, offset = None, 0
    for line in text.splitlines(keepends=True):
        if not line.strip() or _BLOCK_START.match(line) or line.startswith("#"):
            if start is not None:
                blocks.append((start, offset))
            start = offset if line.strip() else None
        elif start is None:
            start = offset
        offset += len(line)
    if start is not None:
        blocks.append((start, len(text)))
    out = []
    for begin, end in blocks:
        block, pos = text[begin:end], 0
        for sep in re.finditer(r"(?<=[.!?])\s+(?=[A-Z*_(\[`])", block):
            out.append((begin + pos, block[pos : sep.start()]))
            pos = sep.end()
        out.append((begin + pos, block[pos:]))
    return out


@dataclass(frozen=True)
class Problem:
    page: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.what}"


def check_page(text: str, page: Path, root: Path, results_dir: Path) -> list[Problem]:
    """Both rules over one page; `root` is what `page`'s links are relative to."""
    name = str(page.relative_to(root)) if page.is_relative_to(root) else page.name
    body = readable(text)
    problems = []
    cache: dict[Path, list[Decimal]] = {}
    for cite in citations(body):
        path = (page.parent / cite.target).resolve()
        if path.parent != results_dir.resolve() or not path.is_file():
            problems.append(Problem(name, line_of(body, cite.start), f"no results file {cite.target}"))
            continue
        numbers = cache.setdefault(path, results_numbers(path))
        where = path.name
        if cite.pointer:
            parts = pointed(json.loads(path.read_text()), cite.pointer)
            if not parts:
                problems.append(
                    Problem(name, line_of(body, cite.start), f"{path.name} has no #{cite.pointer}")
                )
                continue
            numbers, where = [n for part in parts for n in _json_numbers(part)], f"{path.name}#{cite.pointer}"
        elif len(numbers) > POINTER_ABOVE and figures(cite.text):
            problems.append(
                Problem(
                    name,
                    line_of(body, cite.start),
                    f"{path.name} holds {len(numbers)} numbers: name the part quoted (#/json/pointer)",
                )
            )
            continue
        for figure in figures(cite.text):
            if not holds(numbers, figure):
                problems.append(
                    Problem(name, line_of(body, cite.start), f"{figure.quoted!r} is not in {where}")
                )
    # rule 2: the links (and code spans) out, then the measurement sentences
    prose = body
    for cite in reversed(citations(body)):
        prose = prose[: cite.start] + re.sub(r"[^\n]", " ", prose[cite.start : cite.end]) + prose[cite.end :]
    prose = _blank(prose, _CODE_SPAN)
    prose = re.sub(r"\]\([^)\s]*\)", lambda m: " " * len(m.group(0)), prose)  # other links' targets
    cited = [cite.start for cite in citations(body)]

    def quotes(begin: int, end: int) -> bool:
        return any(begin <= at < end for at in cited)

    # rule 2 by its words, rule 3 by the company a figure keeps: a sentence, list or table quoting a
    # results link; rule 4: a number a statistic names
    measured: list[tuple[int, str]] = [
        (offset, sentence)
        for offset, sentence in _sentences(prose)
        if MEASUREMENT.search(sentence) or quotes(offset, offset + len(sentence))
    ]
    for group in _groups(body):  # the structure read before code spans were blanked
        if any(quotes(begin, end) for begin, end in group):
            measured += [(begin, prose[begin:end]) for begin, end in group]
    found: dict[int, str] = {}
    for offset, sentence in measured:
        for match in MEASURED_LOOKING.finditer(sentence):
            found[offset + match.start()] = match.group(0).strip()
    for match in STATISTIC.finditer(prose):
        found.setdefault(match.start("figure"), match.group("figure"))
    for at, quoted in sorted(found.items()):
        if _NOT_OURS_BEFORE.search(prose, max(0, at - 40), at) or _NOT_OURS_AFTER.match(prose, at):
            continue
        problems.append(
            Problem(name, line_of(prose, at), f"measured figure {quoted!r} without its results file")
        )
    return problems


# -- the unit tests of the checker ---------------------------------------------------------------------


@pytest.fixture
def fake(tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "tools.json").write_text(
        json.dumps(
            {
                "commit": {"sha": "abc"},
                "table": {"measured": "shell 0.14 ms p50: 38x tmux"},
                "figures": {"pty_p50_ms": 0.13819, "speedup": 37.61, "tests": 1409, "share": 0.8,
                            "gain": {"mean": -0.0156, "low": -0.1702}, "mismatch": 2.391e-05},
            }
        )
    )  # fmt: skip
    (tmp_path / "docs").mkdir()
    return tmp_path, results


def run_checker(root: Path, results: Path, text: str, where: str = "docs/page.md") -> list[str]:
    page = root / where
    page.write_text(text)
    return [problem.what for problem in check_page(text, page, root, results)]


def test_a_figure_its_results_file_holds_passes(fake: tuple[Path, Path]) -> None:
    root, results = fake
    text = (
        "The shell answers in [0.14 ms p50, 37.6x tmux](../benchmarks/results/tools.json); "
        "[1,409 passed, 80% shared, -0.02 [-0.17, +0.00]](../benchmarks/results/tools.json) "
        "and [2.4e-05](../benchmarks/results/tools.json).\n"
    )
    assert run_checker(root, results, text) == []
    assert run_checker(root, results, text.replace("../", ""), where="README.md") == []


def test_a_planted_stale_figure_fails(fake: tuple[Path, Path]) -> None:
    root, results = fake
    text = "Measured: [0.42 ms p50, 37.6x](../benchmarks/results/tools.json).\n"
    assert run_checker(root, results, text) == ["'0.42' is not in tools.json"]
    # more digits than the file rounds to are stale too, and so is a figure of another file
    assert run_checker(root, results, "[0.139 ms](../benchmarks/results/tools.json)") == [
        "'0.139' is not in tools.json"
    ]
    assert run_checker(root, results, "[1 s](../benchmarks/results/nope.json)") == [
        "no results file ../benchmarks/results/nope.json"
    ]


def test_a_big_results_file_is_quoted_through_a_pointer_to_the_part_quoted(fake: tuple[Path, Path]) -> None:
    root, results = fake
    steps = [{"reward": 0.15 + i / 100, "seconds": 40 + i} for i in range(200)]
    (results / "train.json").write_text(json.dumps({"figures": {"steps": steps, "gain": {"mean": 0.4844}}}))
    assert run_checker(root, results, "[0.48](../benchmarks/results/train.json)") == [
        "train.json holds 401 numbers: name the part quoted (#/json/pointer)"
    ]
    cite = "[+0.48](../benchmarks/results/train.json#/figures/gain)"
    assert run_checker(root, results, cite) == []
    # the pointer narrows the search: 40 s is a step's seconds, not a reward
    assert run_checker(
        root, results, "[0.15, 0.16, 40 s](../benchmarks/results/train.json#/figures/steps/*/reward)"
    ) == ["'40' is not in train.json#/figures/steps/*/reward"]
    assert run_checker(root, results, "[0.15](../benchmarks/results/train.json#/figures/nope)") == [
        "train.json has no #/figures/nope"
    ]


def test_a_measured_figure_outside_a_results_link_fails(fake: tuple[Path, Path]) -> None:
    root, results = fake
    problems = run_checker(root, results, "Measured on 2 cores: make test took 11.8 minutes.\n")
    assert problems == ["measured figure '11.8 minutes' without its results file"]
    problems = run_checker(root, results, "- recorded: RL +0.48 over SFT, E(8) 0.99\n")
    assert problems == [
        "measured figure '+0.48' without its results file",
        "measured figure '0.99' without its results file",
    ]


def test_a_figure_beside_a_linked_one_fails_in_a_sentence_a_table_or_a_list(fake: tuple[Path, Path]) -> None:
    root, results = fake
    link = "[0.14 ms](../benchmarks/results/tools.json)"
    # a clause after a linked figure
    assert run_checker(root, results, f"The shell answers in {link}, and tmux in 4.2 ms.\n") == [
        "measured figure '4.2 ms' without its results file"
    ]
    # a table one of whose rows quotes a results file: every row is read, the header's plain integers not
    table = (
        "| arm | p50 (of 64) |\n|---|---|\n| shell | " + link + " |\n| tmux | 4.2 ms |\n"
        "| KL `0.04` | 2 runs |\n"
    )
    assert run_checker(root, results, table) == ["measured figure '4.2 ms' without its results file"]
    # a list one of whose items quotes one, an item's continuation line and paragraph included
    items = f"- shell {link}\n- tmux answers\n  in 4.2 ms\n\n  and 12x slower\n- 3 turns, `0.5 s` sleeps\n"
    assert run_checker(root, results, items) == [
        "measured figure '4.2 ms' without its results file",
        "measured figure '12x' without its results file",
    ]
    # the same table, list and sentence with no results link in them are not measurements
    unlinked = table.replace(link, "`echo`") + "\n" + items.replace(link, "`echo`") + "\nA 4.2 ms backoff.\n"
    assert run_checker(root, results, unlinked) == []


def test_another_work_s_published_figure_and_a_confidence_level_are_not_read(fake: tuple[Path, Path]) -> None:
    root, results = fake
    link = "[0.14 ms p50](../benchmarks/results/tools.json)"
    text = (
        f"| shell | ptyprocess, 0.42 s per action (published, other hardware) | {link} |\n\n"
        f"Ours {link} against the paper's 0.42 s, paired, 95% intervals.\n"
    )
    assert run_checker(root, results, text) == []


def test_a_number_a_statistic_names_is_measured_anywhere(fake: tuple[Path, Path]) -> None:
    root, results = fake
    text = (
        "The edit was long (median 175 tokens, up to 288); by number a median 38.\n\n"
        "Its p95 2.8 s and a mean of 0.41, on average 67 s.\n\n"
        "The mean reward of a group is its baseline; `median 9` is code; the [median](x.md) is linked.\n"
    )
    assert run_checker(root, results, text) == [
        "measured figure '175' without its results file",
        "measured figure '38' without its results file",
        "measured figure '2.8 s' without its results file",
        "measured figure '0.41' without its results file",
        "measured figure '67 s' without its results file",
    ]
    assert run_checker(root, results, "A median [175](../benchmarks/results/tools.json).\n") == [
        "'175' is not in tools.json"
    ]


def test_config_values_flags_versions_code_and_generated_blocks_are_not_figures(
    fake: tuple[Path, Path],
) -> None:
    root, results = fake
    text = (
        "## 3. Scaling out\n\nNeMo Gym 0.7 with `timeout_s=0.5` and `--max-tokens 96`: a backoff of "
        "0.5 s, KL 0.04 (no sentence here calls itself a measurement).\n\n"
        "A recorded run is in [the file](../benchmarks/results/tools.json), measured with `0.5 s` sleeps.\n\n"
        "```bash\nprorl train  # measured 45.7 min\n```\n\n"
        "<!-- t:start (generated) -->\n| recorded | 99.9 s |\n<!-- t:end -->\n"
    )
    assert run_checker(root, results, text) == []


def test_numbers_are_read_with_their_precision_sign_and_separators() -> None:
    read = {
        f.quoted: (f.value, f.tolerance)
        for f in figures("1,409 p50 v9 43-65 s +0.48 [-0.17 2.4e-05 80% E(8)")
    }
    assert read == {
        "1,409": (Decimal(1409), Decimal("0.5")),
        "43": (Decimal(43), Decimal("0.5")),
        "65": (Decimal(65), Decimal("0.5")),
        "+0.48": (Decimal("0.48"), Decimal("0.005")),
        "-0.17": (Decimal("-0.17"), Decimal("0.005")),
        "2.4e-05": (Decimal("2.4e-05"), Decimal("5e-07")),
        "80%": (Decimal(80), Decimal("0.5")),
        "8": (Decimal(8), Decimal("0.5")),
    }


# -- the real pages ----------------------------------------------------------------------------------


def test_every_quoted_figure_is_one_a_results_file_holds() -> None:
    problems = [p for page in pages() for p in check_page(page.read_text(), page, ROOT, RESULTS)]
    assert not problems, "figures without a results file behind them:\n" + "\n".join(map(str, problems))


def test_the_pages_cite_results_files_at_all() -> None:
    """The rule is not met by quoting nothing: the benchmarks and training pages cite their files."""
    for name in ("benchmarks.md", "training/recorded_run.md", "training/through_a_harness.md"):
        assert citations(readable((DOCS / name).read_text())), name


def test_the_readme_is_a_front_door_starting_with_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    long = [i + 1 for i, line in enumerate(lines) if len(line) > README_MAX_LINE_CHARS]
    assert not long, f"README.md lines over {README_MAX_LINE_CHARS} characters: {long}"
    content = [line for line in lines if line.strip()]
    assert content[0].startswith("# ")
    assert content[1].startswith("```"), "the README starts with its two commands"
    block = content[2 : content.index("```", 2)]
    assert [line.split("#")[0].split() for line in block] == [["make", "demo"], ["make", "test"]]


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    broken = []
    for page in pages():
        for target in LINK.findall(readable(page.read_text())):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_readme_links_every_docs_page() -> None:
    linked = {(README.parent / t.split("#")[0]).resolve() for t in LINK.findall(README.read_text())}
    missing = [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked]
    assert not missing, f"docs pages the README's table of contents leaves out: {missing}"


def test_a_subject_folder_s_pages_are_each_linked_from_its_index() -> None:
    """docs/training/*.md are reached from docs/training.md (the README links the index)."""
    missing = []
    for folder in (p for p in DOCS.iterdir() if p.is_dir() and any(p.glob("*.md"))):
        index = DOCS / f"{folder.name}.md"
        assert index.is_file(), f"docs/{folder.name}/ has no index page docs/{folder.name}.md"
        linked = {(index.parent / t.split("#")[0]).resolve() for t in LINK.findall(index.read_text())}
        missing += [str(p.relative_to(ROOT)) for p in folder.glob("*.md") if p.resolve() not in linked]
    assert not missing, f"pages their index leaves out: {missing}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _blank(page.read_text(), _FENCE)
    return {_anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def test_every_link_to_a_section_of_a_page_finds_that_section() -> None:
    """A link `page.md#section` names a heading the page has (a moved section's links moved with it)."""
    broken = []
    for page in pages():
        for target in LINK.findall(readable(page.read_text())):
            path, _, section = target.partition("#")
            if re.match(r"[a-z]+:", target) or not section or not (path or page.name).endswith(".md"):
                continue
            linked = (page.parent / path).resolve() if path else page
            if linked.is_file() and section not in anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_architecture_picture_is_committed_with_its_source() -> None:
    assert "docs/images/architecture.png" in README.read_text()
    assert (DOCS / "images" / "architecture.png").is_file() and (
        DOCS / "images" / "architecture.py"
    ).is_file()


def _cli_block() -> str:
    text = README.read_text()
    start = text.index("## Command line")
    block = text[start : text.index("\n## ", start + 1)]
    return "\n".join(line for line in block.splitlines() if line.startswith("prorl "))


def test_the_readme_command_list_names_every_benchmark() -> None:
    benches = {p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py")}
    line = next(line for line in _cli_block().splitlines() if line.startswith("prorl bench ") and "|" in line)
    listed = set(line.split()[2].split("|"))
    assert listed == benches | {"report"} or listed == benches, (
        sorted(benches - listed),
        sorted(listed - benches),
    )


def test_the_readme_command_list_names_every_command_and_subcommand() -> None:
    import argparse

    from nemo_gym_prorl.cli.main import build_parser

    block = _cli_block()
    missing = []
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        if f"prorl {name}" not in block:
            missing.append(name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                lines = [line for line in block.splitlines() if line.startswith(f"prorl {name} ")]
                missing += [f"{name} {s}" for s in action.choices if not any(s in line for line in lines)]
    assert not missing, f"commands the README's command list leaves out: {missing}"


# -- the benchmarks page's commands ------------------------------------------------------------------

BENCHMARKS_PAGE = DOCS / "benchmarks.md"
_ROW_COMMAND = re.compile(r"^\|\s*`(prorl [^`]+)`\s*\|", re.M)


def _table_commands(text: str) -> list[str]:
    """The command each table row of the page quotes in its first cell."""
    return _ROW_COMMAND.findall(text)


def _parse(words: list[str]) -> argparse.Namespace:
    """The CLI's own parser on `prorl WORDS...` (a benchmark's name checked against its registry,
    `benchmark_names()`); nothing runs."""
    from nemo_gym_prorl.cli.main import build_parser

    try:
        return build_parser().parse_args(words[1:])
    except SystemExit as exc:  # argparse's error: it printed why
        raise AssertionError(f"`{shlex.join(words)}` does not parse: exit {exc.code}") from None


def test_every_command_the_benchmarks_page_quotes_is_one_the_cli_runs() -> None:
    text = BENCHMARKS_PAGE.read_text()
    commands = _table_commands(text)
    assert len(commands) >= 10, commands
    for command in commands:
        words = shlex.split(command)
        args = _parse(words)
        if words[1] == "train" and args.config != "default" and not args.config.endswith(".yaml"):
            assert (ROOT / "configs" / "train" / f"{args.config}.yaml").is_file(), command


def test_each_generated_row_quotes_the_command_that_records_its_file() -> None:
    """The generated table's rows: one per results file, each quoting a distinct command that writes
    that file (a benchmark whose module records under that name with --json, or a train config whose
    `name` is the file's)."""
    from nemo_gym_prorl.cli.bench import _load_module

    provenance = _load_module("provenance")  # what `prorl bench report` runs
    block = re.search(r"<!-- bench-table:start.*?<!-- bench-table:end -->", BENCHMARKS_PAGE.read_text(), re.S)
    assert block is not None
    quoted = _table_commands(block.group(0))
    results = provenance.load_results()
    assert sorted(quoted) == sorted(provenance.recording_command(d) for d in results)
    assert len(set(quoted)) == len(quoted), (
        f"rows that read alike: {sorted(c for c in quoted if quoted.count(c) > 1)}"
    )
    for d in results:
        command = provenance.recording_command(d)
        words = shlex.split(command)
        args = _parse(words)
        if words[1] == "bench":
            assert args.json, f"{command}: records nothing without --json"
            source = (ROOT / "benchmarks" / f"bench_{args.name}.py").read_text()
            assert f'"{d["benchmark"]}"' in source, f"{command} does not record {d['benchmark']}.json"
        else:
            assert words[1] == "train", command
            config = ROOT / "configs" / "train" / f"{args.config}.yaml"
            assert re.search(rf"^name:\s*{re.escape(d['benchmark'])}\s*$", config.read_text(), re.M), (
                f"{command} records {config.name}'s name, not {d['benchmark']}.json"
            )
