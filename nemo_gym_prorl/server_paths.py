# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Server paths out of what a client reads: `redact_server_paths("... /root/.cache/prorl/swe/x")`
is `"... $PRORL_HOME/swe/x"`.

An error a door answers (a refusal, a rollout's error or traceback) may quote an exception that
names a file of the server: its instances file under PRORL_HOME, a sandbox's directory, a module
of its venv. A client needs what went wrong, not where the server keeps its files, and a policy
that can make a rollout fail must not learn the host's layout from the answer. Messages say what
was wrong at their source; this is the net under them, applied where errors become answers. The
server's own log keeps the paths.

Each known root (PRORL_HOME, the sandbox root, the home directory, the venv and the interpreter,
the project, the temp directory; and any a server adds with `add_server_root`) becomes a label,
the longest root first, so a path keeps its tail (`<venv>/lib/.../x.py`, line numbers and all)
and loses the host's part.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nemo_gym_prorl

# Added by a server for a root its configuration chose (a sandbox root_dir of its own, say).
_EXTRA_ROOTS: dict[str, str] = {}

# A root matches only as a whole path component: "/root" is not the start of "/rootfs".
_NAME_CHAR = r"[\w.\-]"
# A system interpreter's prefix names no host of its own, and the same directories are inside
# every sandbox: relabelling them would only garble the sandbox's own messages.
_SHARED = frozenset({"/", "/usr", "/usr/local"})


def add_server_root(path: str | os.PathLike[str], label: str) -> None:
    """Redact `path` (and where it resolves to) as `label` from now on."""
    _EXTRA_ROOTS[os.fspath(path)] = label
    _pattern.cache_clear()


def _known_roots() -> list[tuple[str, str]]:
    # Imported here: the sandbox package imports much, and this module is imported by the
    # pipeline's records; either may be half-initialised when the other loads.
    from nemo_gym_prorl.sandbox.base import default_sandbox_root
    from nemo_gym_prorl.sandbox.runtime import prorl_home

    return [
        (str(prorl_home()), "$PRORL_HOME"),
        (str(default_sandbox_root()), "<sandbox root>"),
        (str(Path(nemo_gym_prorl.__file__).parent.parent), "<project>"),
        (sys.prefix, "<venv>"),
        (sys.exec_prefix, "<venv>"),
        (sys.base_prefix, "<python>"),
        (str(Path.home()), "~"),
        (tempfile.gettempdir(), "<tmp>"),
        *_EXTRA_ROOTS.items(),
    ]


def _spellings(path: str) -> Iterable[str]:
    yield path.rstrip("/") or "/"
    try:
        yield str(Path(path).resolve())
    except OSError:  # a loop of links: the given spelling is all there is
        return


@functools.lru_cache(maxsize=8)
def _pattern(key: tuple[tuple[str, str], ...]) -> tuple[re.Pattern[str], dict[str, str]]:
    labels: dict[str, str] = {}
    for root, label in key:
        for spelling in _spellings(root):
            if spelling not in _SHARED and spelling not in labels:
                labels[spelling] = label
    if not labels:
        return re.compile(r"(?!x)x"), labels
    alternatives = "|".join(re.escape(s) for s in sorted(labels, key=len, reverse=True))
    return re.compile(rf"(?<!{_NAME_CHAR})(?:{alternatives})(?!{_NAME_CHAR})"), labels


def redact_server_paths(text: str) -> str:
    """`text` with every known server root replaced by its label."""
    if "/" not in text:
        return text
    pattern, labels = _pattern(tuple(_known_roots()))
    return pattern.sub(lambda match: labels[match.group(0)], text)


def redact_strings(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with `redact_server_paths` applied to every
    string in it, keys left as they are."""
    if isinstance(value, str):
        return redact_server_paths(value)
    if isinstance(value, dict):
        return {key: redact_strings(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_strings(item) for item in value]
    return value
