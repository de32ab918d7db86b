# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The demo's HTML report, opened in a real headless Chromium (Debian's package): the page renders
its trajectories with its own JS, from a file, with no server and no network."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from nemo_gym_prorl.demo.html_report import table_html, write_html_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (as root: apt-get install -y chromium; bootstrap does it)",
)


@dataclass
class Row:
    domain: str
    rollouts: int
    mean_reward: float


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", *args],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def timeline_png(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.barh([0, 1], [2, 3], left=[0, 1])
    fig.savefig(path)
    plt.close(fig)
    return path


def test_rows_render_generically_whatever_their_columns() -> None:
    html = table_html([{"domain": "math", "stop reasons": {"answered": 3}}, Row("code", 2, 0.5)])
    assert "<th>stop reasons</th>" in html and "<th>mean_reward</th>" in html
    assert "answered: 3" in html and "0.500" in html
    with pytest.raises(TypeError, match="mapping or a dataclass"):
        table_html([("math", 1)])


def _write_report(trajectories_file: Path, tmp_path: Path, title: str) -> Path:
    """The demo's report over the recorded trajectories, with a timeline."""
    records = [json.loads(line) for line in trajectories_file.read_text().splitlines()]
    return write_html_report(
        tmp_path / "report.html", title=title, rows=[Row("math", 2, 1.0)], records=records,
        timeline_png=timeline_png(tmp_path / "timeline.png"),
    )  # fmt: skip


async def test_the_report_is_one_self_contained_file(trajectories_file: Path, tmp_path: Path) -> None:
    report = _write_report(trajectories_file, tmp_path, "demo")
    page = report.read_text()
    assert 'src="data:image/png;base64,' in page
    assert "http://" not in page and "https://" not in page  # nothing fetched from anywhere
    assert "<b>bold</b>" not in page  # a prompt's markup is data, never markup


@needs_chromium
async def test_chromium_renders_every_trajectory_turn(trajectories_file: Path, tmp_path: Path) -> None:
    report = _write_report(trajectories_file, tmp_path, "ProRL demo")

    dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    assert 'data-rendered="2"' in page  # the page's JS ran over both rollouts
    assert page.count('class="turn"') == 4  # three turns, then one
    for n in (1, 2, 3):
        assert f'data-turn="{n}"' in page
    assert "print(6*7)" in page and "malformed tool call" in page and "\\boxed{42}" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page  # the prompt as text, not as markup

    shot = tmp_path / "report.png"
    run = chromium(tmp_path, "--window-size=1200,1600", f"--screenshot={shot}", report.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1200, 1600)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20  # text, table and timeline, not a blank page
