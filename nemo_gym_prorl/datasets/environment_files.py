# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`environments/<name>/` of every dataset environment, written from the catalog.

Per environment (NeMo Gym 0.7's catalog layout):
  - `config.yaml`: the domain's Gym composition (`configs/gym/prorl_<domain>.yaml`) with this
    dataset's turn limit and its datasets: `example` (committed), `train` and `validation`
    (`data/<name>/*.jsonl`, written by the prepare scripts; `source` names the upstream Hub
    dataset, `license` its licence);
  - `manifest.yaml`: the catalog entry, its mirrored fields equal to the config's;
  - `prepare_train.py`, `prepare_validation.py`: Gym prepare scripts (`gym eval prepare`);
  - `data/upstream_sample.jsonl`: a few records in the dataset's published schema (hand-written
    to that schema, tricky fields included; the converter tests read them) and
    `data/example.jsonl`: those records converted, the environment's example rows.
`prorl data environments` rewrites everything but the samples; `--check` fails on any drift.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment
from nemo_gym_prorl.datasets.prepare import convert_records, split_path
from nemo_gym_prorl.datasets.rows import DEFAULT_AGENT, read_jsonl

SAMPLE = "data/upstream_sample.jsonl"
EXAMPLE = "data/example.jsonl"
AGENT_TIME_LIMIT_S = 1800.0  # the Gym agent's default wall-clock budget, kept beside max_turns
# Gym's manifest domains (nemo_gym.environment.manifest), as the prorl_<domain> manifests use them
GYM_DOMAINS = {"math": "math", "stem": "knowledge", "code": "coding", "swe": "coding"}
DESCRIPTIONS = {
    "math": "boxed answers checked by math-verify, with a sandboxed IPython tool",
    "stem": "multiple-choice or numeric answers, with a sandboxed IPython tool",
    "code": "programs graded by hidden tests in sandboxes, with bash, editor and IPython tools",
    "swe": "repository issues graded by FAIL_TO_PASS / PASS_TO_PASS, with bash and editor tools",
}


def environment_dir(root: Path, env: DatasetEnvironment) -> Path:
    return root / "environments" / env.name


def datasets_entries(env: DatasetEnvironment) -> list[dict[str, Any]]:
    base = f"environments/{env.name}"
    source = {"type": "huggingface", "repo_id": env.hub_id}
    entries: list[dict[str, Any]] = [
        {"name": f"{env.name}_example", "type": "example", "jsonl_fpath": f"{base}/{EXAMPLE}"}
    ]
    for split in ("train", "validation"):
        entries.append({
            "name": f"{env.name}_{split}", "type": split, "jsonl_fpath": str(split_path(env.name, split)),
            "prepare_script": f"{base}/prepare_{split}.py", "source": dict(source), "license": env.gym_license,
        })  # fmt: skip
    return entries


def config_yaml(env: DatasetEnvironment) -> str:
    config = {
        "config_paths": [f"configs/gym/prorl_{env.domain}.yaml"],
        "prorl_agent": {"responses_api_agents": {"prorl_agent": {
            "agent": {"max_turns": env.max_turns, "max_time_s": AGENT_TIME_LIMIT_S},
            "datasets": datasets_entries(env),
        }}},
    }  # fmt: skip
    header = (
        f"# {env.title} ({env.hub_id}) as a prorl_{env.domain} environment. Written by `prorl data environments`\n"
        f"# from nemo_gym_prorl/datasets/converters; edit the catalog entry, not this file.\n"
        f"# Rows: `prorl data prepare --environment {env.name} [--source PATH_OR_HUB_ID]`\n"
        f"#   (or `gym eval prepare --config environments/{env.name}/config.yaml`).\n"
    )
    return header + yaml.safe_dump(config, sort_keys=False)


def manifest_yaml(env: DatasetEnvironment) -> str:
    manifest = {
        "name": env.name, "version": "0.1.0", "experimental": True, "kind": "environment",
        "integration_profile": "custom-gym-agent-loop", "domain": GYM_DOMAINS[env.domain],
        "description": f"{env.title} ({env.hub_id}, {env.license}) through ProRL Agent's INIT/RUN/EVAL "
        f"pipeline: {DESCRIPTIONS[env.domain]}.",
        "modality": "text", "licensing": "Apache-2.0", "authors": ["nemo-gym-prorl"],
        "reward": {"range": [0.0, 1.0], "higher_is_better": True}, "determinism": "stochastic",
        "resources_server": f"prorl_{env.domain}", "agent_server": "prorl_agent",
        "datasets": [
            {"name": d["name"], "type": d["type"], "jsonl_fpath": d["jsonl_fpath"],
             **({"prepare_script": d["prepare_script"]} if "prepare_script" in d else {}), "num_repeats": 1}
            for d in datasets_entries(env)
        ],
        "model_server": "policy_model", "session_model": "episode", "state": "per_session",
        "sandbox": "bubblewrap", "lifecycle": "active",
    }  # fmt: skip
    return yaml.safe_dump(manifest, sort_keys=False)


def prepare_script(env: DatasetEnvironment, split: str) -> str:
    return (
        '"""Gym prepare script (`gym eval prepare`): this environment\'s '
        f'{split} rows, from the Hub or `source`."""\n\n'
        "from pathlib import Path\n\n"
        "from nemo_gym_prorl.datasets.prepare import prepare_split\n\n\n"
        "def prepare(source: str | None = None, limit: int | None = None) -> Path:\n"
        f'    return prepare_split("{env.name}", "{split}", source, limit=limit)\n'
    )


def example_rows(env: DatasetEnvironment, root: Path) -> str:
    records = read_jsonl(environment_dir(root, env) / SAMPLE)
    skipped: Counter[str] = Counter()
    rows = convert_records(env, records, DEFAULT_AGENT, skipped)
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def rendered(env: DatasetEnvironment, root: Path) -> dict[str, str]:
    """Every generated file of one environment: relative path -> content."""
    return {
        "config.yaml": config_yaml(env),
        "manifest.yaml": manifest_yaml(env),
        "prepare_train.py": prepare_script(env, "train"),
        "prepare_validation.py": prepare_script(env, "validation"),
        EXAMPLE: example_rows(env, root),
    }


def write_environment(env: DatasetEnvironment, root: Path, check: bool = False) -> list[str]:
    """Write (or with `check`, compare) the environment's files; returns the paths that differ."""
    folder = environment_dir(root, env)
    if not (folder / SAMPLE).is_file():
        raise FileNotFoundError(f"{folder / SAMPLE}: every dataset environment needs its upstream sample")
    stale = []
    for relative, content in rendered(env, root).items():
        path = folder / relative
        if path.is_file() and path.read_text(encoding="utf-8") == content:
            continue
        stale.append(str(path.relative_to(root)))
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    return stale


# -- the README's table -----------------------------------------------------------------------

README_MARKERS = (
    "<!-- datasets-table:start (generated by `prorl data environments` from the catalog) -->",
    "<!-- datasets-table:end -->",
)


def readme_table(envs: list[DatasetEnvironment]) -> str:
    lines = [
        "| environment | dataset (Hub id) | domain | rows as published | licence | turns | needs |",
        "|---|---|---|---|---|---|---|",
    ]
    for env in envs:
        lines.append(
            f"| `{env.name}` | {env.title} (`{env.hub_id}`) | {env.domain} | {env.published_rows} | "
            f"{env.license} | {env.max_turns} | {env.needs or '`make setup`'} |"
        )
    return "\n".join(lines)


def sync_readme(readme: Path, envs: list[DatasetEnvironment], check: bool = False) -> bool:
    """Rewrite the table between its markers (with `check`, only compare); True if it differed."""
    start, end = README_MARKERS
    text = readme.read_text(encoding="utf-8")
    block = re.compile(re.escape(start) + r"\n(.*?)\n?" + re.escape(end), re.S)
    match = block.search(text)
    if match is None:
        raise ValueError(f"{readme}: no datasets table markers ({start} ... {end})")
    table = readme_table(envs)
    if match.group(1).strip() == table:
        return False
    if not check:
        readme.write_text(block.sub(lambda _: f"{start}\n{table}\n{end}", text), encoding="utf-8")
    return True
