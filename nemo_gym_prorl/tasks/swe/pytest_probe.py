# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A pytest plugin the SWE generator loads inside its sandboxes (`-p _prorl_probe`); never part
of an instance, its repository or its eval script.

It writes `$PRORL_PROBE_OUT` (JSON) at the end of the session:
  - `calls` (with PRORL_PROBE_TRACE=1, the baseline run): for each test, the project functions
    it ran, as "path:first line" (decorators included, as `co_firstlineno` counts) of the
    functions under `$PRORL_PROBE_ROOTS`; functions run outside any test (imports, collection,
    parametrization) go under "<collect>". The generator mutates only functions some test ran,
    and none that collection ran (a bug there changes what is collected, not what a test sees).
  - `failures`: each failed test's crash message, for the problem statement.

The call record comes from the project's own modules, compiled at import with one call added
at the top of each function body: `sys.settrace` would do the same for every frame of pytest
and the standard library too, several times slower. Line numbers are unchanged.
Runs on the sandbox runtime's Python (stdlib + pytest only).
"""

from __future__ import annotations

import ast
import builtins
import importlib.abc
import importlib.machinery
import json
import os
import sys
from typing import Any

import pytest

_COLLECT = "<collect>"
_HIT = "__prorl_hit__"
_ROOTS = tuple(r for r in os.environ.get("PRORL_PROBE_ROOTS", "").split(os.pathsep) if r)
_TRACE = os.environ.get("PRORL_PROBE_TRACE") == "1" and bool(_ROOTS)


class _Record:
    current = _COLLECT
    calls: dict[str, set[str]] = {}


def _hit(key: str) -> None:
    _Record.calls.setdefault(_Record.current, set()).add(key)


class _Instrument(ast.NodeTransformer):
    def __init__(self, filename: str) -> None:
        self.filename = filename

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        key = ast.Constant(f"{self.filename}:{first}")
        call = ast.Expr(ast.Call(ast.Name(_HIT, ast.Load()), [key], []))
        at = (
            1
            if node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            else 0
        )
        ast.copy_location(call, node.body[0])
        ast.fix_missing_locations(call)
        for child in ast.walk(call):  # the call stands on the first statement's line, like it
            child.lineno, child.end_lineno = node.body[0].lineno, node.body[0].lineno  # type: ignore[attr-defined]
            child.col_offset, child.end_col_offset = 0, 0  # type: ignore[attr-defined]
        node.body.insert(at, call)
        return node

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def


class _Loader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname: str) -> Any:
        # never a cached .pyc: it would be the uninstrumented code
        path = self.get_filename(fullname)
        tree = _Instrument(path).visit(ast.parse(self.get_data(path), path))
        return compile(tree, path, "exec", dont_inherit=True)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = getattr(spec, "origin", None) or ""
        if spec is None or not origin.endswith(".py") or not origin.startswith(_ROOTS):
            return spec
        spec.loader = _Loader(fullname, origin)
        return spec


if _TRACE:
    # at import of the plugin, before any conftest.py can import the project
    builtins.__dict__[_HIT] = _hit
    sys.meta_path.insert(0, _Finder())


class _Probe:
    def __init__(self) -> None:
        self.failures: dict[str, str] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        _Record.current = item.nodeid
        yield
        _Record.current = _COLLECT

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and report.nodeid not in self.failures:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = getattr(crash, "message", None) or str(report.longrepr)[-1000:]
            self.failures[report.nodeid] = message

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        out = {"calls": {k: sorted(v) for k, v in _Record.calls.items()}, "failures": self.failures}
        with open(os.environ["PRORL_PROBE_OUT"], "w") as f:
            json.dump(out, f)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Probe(), "prorl_probe")
