# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The TRL integration runs in the model venv: its modules compile under that venv's Python 3.11
and import nothing from the rest of the package (whose dependencies live in the 3.13 venv) but
the bottom-layer modules written for both venvs (`SHARED`: pure Python, pydantic and httpx)."""

from __future__ import annotations

import ast
import subprocess

from trl_venv import REPO, TRL_PACKAGE, model_python, run_in_model_venv

SHARED = (
    "nemo_gym_prorl.intervals",
    "nemo_gym_prorl.retry",
    "nemo_gym_prorl.rollouts",
    "nemo_gym_prorl.rollouts.delivery",
    "nemo_gym_prorl.rollouts.results",
    "nemo_gym_prorl.rollouts.stats",
)
MODULES = sorted(TRL_PACKAGE.glob("*.py")) + [
    path
    for name in SHARED
    for path in (REPO / (name.replace(".", "/") + ".py"), REPO / name.replace(".", "/") / "__init__.py")
    if path.is_file()
]


def test_every_module_byte_compiles_with_the_model_venvs_python() -> None:
    python = model_python()
    version = subprocess.run(
        [str(python), "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert version == ["3", "11"]
    # Compiled in memory (no __pycache__ written into the tree): a PEP 695 generic or a `type`
    # statement is a SyntaxError here.
    script = "import sys\nfor path in sys.argv[1:]:\n    compile(open(path).read(), path, 'exec')\n"
    out = subprocess.run(
        [str(python), "-c", script, *map(str, MODULES)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert {m.name for m in MODULES} >= {"fields.py", "reward.py", "rollout.py", "callback.py", "client.py"}


def test_the_modules_import_only_each_other_and_the_shared_modules_from_this_package() -> None:
    outside = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            outside += [
                f"{path.relative_to(REPO)}: {name}"
                for name in names
                if name.startswith("nemo_gym_prorl")
                and not name.startswith("nemo_gym_prorl.integrations.trl")
                and name not in SHARED
            ]
    assert outside == []


def test_a_trainer_process_imports_trl_with_no_vllm_and_no_vllm_warnings() -> None:
    # run_in_model_venv runs its script as the trainer programs run: hide_vllm() first.
    seen = run_in_model_venv(
        "import importlib.util, json, sys, warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    from trl import GRPOTrainer, SFTTrainer\n"
        "print(json.dumps({'spec': importlib.util.find_spec('vllm') is None,\n"
        "    'loaded': sorted(m for m in sys.modules if m.startswith('vllm.')),\n"
        "    'warnings': [str(w.message) for w in caught if 'vLLM' in str(w.message)]}))\n"
    )
    assert seen == {"spec": True, "loaded": [], "warnings": []}
