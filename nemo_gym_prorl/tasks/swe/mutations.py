# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Bug injection by AST rewrites, SWE-smith style, with minimal diffs.

`find_sites` lists every place in a module's function bodies where one mutation kind applies;
`apply_site` rewrites exactly that place. Only the mutated node's own source text (or, for an
operator, the text between its operands; for a removed statement, its lines) is replaced, so the
rest of the file keeps its formatting and the gold patch is a one- or few-line diff. A site is
addressed by its node's position, so a recorded site replays on the same source without an RNG.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict

MutationKind = Literal[
    "flip_comparison",
    "swap_boolean_operator",
    "negate_condition",
    "off_by_one_constant",
    "off_by_one_slice",
    "off_by_one_range",
    "remove_branch",
    "remove_early_return",
    "swap_call_arguments",
    "change_constant",
    "swap_arithmetic",
]
MUTATION_KINDS: tuple[MutationKind, ...] = MutationKind.__args__  # type: ignore[attr-defined]

_COMPARE_FLIP: dict[type[ast.cmpop], str] = {
    ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.Eq: "!=", ast.NotEq: "==",
    ast.Is: "is not", ast.IsNot: "is", ast.In: "not in", ast.NotIn: "in",
}  # fmt: skip
_COMPARE_TEXT: dict[type[ast.cmpop], str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}  # fmt: skip
_ARITH_SWAP: dict[type[ast.operator], tuple[str, str]] = {
    ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"), ast.FloorDiv: ("//", "*"),
    ast.LShift: ("<<", ">>"), ast.RShift: (">>", "<<"), ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"),
}  # fmt: skip
# atoms need no parentheses when `+ 1` is appended; anything else is wrapped
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)


class MutationError(ValueError):
    """The site does not exist in this source, or its rewrite is not a valid, different program."""


class Site(BaseModel):
    """One mutation: a kind applied to the node at a position, inside a named function."""

    model_config = ConfigDict(frozen=True)

    kind: MutationKind
    function: str  # qualified name, e.g. "Version.bump_minor" or "outer.<locals>.inner"
    function_line: int  # the function's first line as its code object reports it (decorators included)
    lineno: int
    col_offset: int
    end_lineno: int
    end_col_offset: int
    variant: int = 0  # which of the kind's alternatives (+1 or -1; which operator of a chain)


class _Source:
    """Character offsets from the AST's (line, UTF-8 byte column) positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        # only the line ends Python's tokenizer knows (str.splitlines also splits at form feeds)
        self.lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode()[:col].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]  # fmt: skip

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]


def _code_first_line(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """What `code.co_firstlineno` is for this def: its first decorator's line, else the def's."""
    return min([fn.lineno, *(d.lineno for d in fn.decorator_list)])


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every def with its qualified name, nested ones included."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield name, child
                yield from walk(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _own_nodes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of the function's body, without nested defs and classes (each is its own
    function: a test that ran the mutated line ran that function) and without the docstring."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _gap(src: _Source, left: ast.AST, right: ast.AST) -> tuple[int, int]:
    return src.offset(left.end_lineno, left.end_col_offset), src.offset(right.lineno, right.col_offset)  # type: ignore[attr-defined]


def _replace_operator(src: _Source, start: int, end: int, old: str, new: str) -> tuple[int, int, str] | None:
    """The text between two operands is the operator, parentheses and whitespace only; replace
    the operator in it (None if the gap holds anything else, e.g. a comment)."""
    gap = src.text[start:end]
    if "#" in gap:
        return None
    stripped = re.sub(r"[\s()\\]+", " ", gap).strip()
    if " ".join(stripped.split()) != old:
        return None
    pattern = r"\s+".join(re.escape(part) for part in old.split())
    match = re.search(pattern, gap)
    if match is None:
        return None
    return start + match.start(), start + match.end(), new


def _is_simple_statement_line(src: _Source, stmt: ast.stmt) -> bool:
    """The statement owns its lines: nothing before it on its first line, only a comment after it."""
    first = src.lines[stmt.lineno - 1]
    before = first.encode()[: stmt.col_offset].decode(errors="replace")
    last = src.lines[stmt.end_lineno - 1]  # type: ignore[index]
    after = last.encode()[stmt.end_col_offset :].decode(errors="replace").strip()  # type: ignore[misc]
    return before.strip() == "" and (after == "" or after.startswith("#"))


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _block_of(parent: ast.AST, stmt: ast.stmt) -> list[ast.stmt] | None:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    for handler in getattr(parent, "handlers", []) or []:
        if any(s is stmt for s in handler.body):
            return handler.body
    return None


def _remove_statement(
    src: _Source, stmt: ast.stmt, parents: dict[int, ast.AST]
) -> tuple[int, int, str] | None:
    """Delete the statement's lines; `pass` in its place when it is alone in its block."""
    if not _is_simple_statement_line(src, stmt):
        return None
    parent = parents.get(id(stmt))
    block = _block_of(parent, stmt) if parent is not None else None
    if block is None:
        return None
    start, end = src.starts[stmt.lineno - 1], src.starts[stmt.end_lineno]  # type: ignore[index]
    if len(block) == 1:
        line = src.lines[stmt.lineno - 1]
        return start, end, f"{line[: len(line) - len(line.lstrip())]}pass\n"
    return start, end, ""


def _off_by_one_expr(src: _Source, node: ast.expr, variant: int) -> tuple[int, int, str]:
    start, end = src.span(node)
    text = src.text[start:end]
    text = text if isinstance(node, _ATOMS) else f"({text})"
    return start, end, f"{text} {'+' if variant == 0 else '-'} 1"


def _is_int_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _rewrite(src: _Source, node: ast.AST, kind: MutationKind, variant: int,
             parents: dict[int, ast.AST]) -> tuple[int, int, str] | None:  # fmt: skip
    """(start, end, new text) for this kind at this node, or None when it does not apply."""
    if kind == "flip_comparison" and isinstance(node, ast.Compare) and variant < len(node.ops):
        operands = [node.left, *node.comparators]
        start, end = _gap(src, operands[variant], operands[variant + 1])
        op = type(node.ops[variant])
        return _replace_operator(src, start, end, _COMPARE_TEXT[op], _COMPARE_FLIP[op])
    if kind == "swap_boolean_operator" and isinstance(node, ast.BoolOp) and variant < len(node.values) - 1:
        start, end = _gap(src, node.values[variant], node.values[variant + 1])
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        return _replace_operator(src, start, end, old, new)
    if kind == "negate_condition" and isinstance(node, ast.If | ast.IfExp) and variant == 0:
        test = node.test
        start, end = src.span(test)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return start, end, src.segment(test.operand)
        return start, end, f"not ({src.text[start:end]})"
    if kind == "off_by_one_constant" and _is_int_constant(node) and variant in (0, 1):
        value = node.value + (1 if variant == 0 else -1)  # type: ignore[attr-defined]
        parent = parents.get(id(node))
        negated = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)
        if value < 0 or (negated and value == 0):
            return None  # `-0` and `--1` are not the off-by-one bugs people write
        start, end = src.span(node)
        return start, end, str(value)
    if kind == "off_by_one_slice" and isinstance(node, ast.expr) and variant in (0, 1):
        parent = parents.get(id(node))
        if (
            isinstance(parent, ast.Slice)
            and node in (parent.lower, parent.upper)
            and not _is_int_constant(node)
        ):
            return _off_by_one_expr(src, node, variant)
        return None
    if kind == "off_by_one_range" and isinstance(node, ast.expr) and variant in (0, 1):
        parent = parents.get(id(node))
        if (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "range"
                and any(a is node for a in parent.args) and not isinstance(node, ast.Starred)
                and not _is_int_constant(node)):  # fmt: skip
            return _off_by_one_expr(src, node, variant)
        return None
    if kind == "remove_branch" and isinstance(node, ast.If) and not node.orelse and variant == 0:
        if not src.lines[node.lineno - 1].lstrip().startswith("if"):
            return None  # an `elif`: removing it would need the chain rewritten
        return _remove_statement(src, node, parents)
    if (
        kind == "remove_early_return"
        and isinstance(node, ast.Return | ast.Continue | ast.Break)
        and variant == 0
    ):
        parent = parents.get(id(node))
        if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
            return None  # a return at the function's top level is not an early one
        return _remove_statement(src, node, parents)
    if kind == "swap_call_arguments" and isinstance(node, ast.Call) and variant < len(node.args) - 1:
        left, right = node.args[variant], node.args[variant + 1]
        if isinstance(left, ast.Starred) or isinstance(right, ast.Starred):
            return None
        a, b = src.segment(left), src.segment(right)
        if a == b:
            return None
        (start, _), (gap_start, gap_end), (_, end) = src.span(left), _gap(src, left, right), src.span(right)
        return start, end, b + src.text[gap_start:gap_end] + a
    if (
        kind == "change_constant"
        and isinstance(node, ast.Constant)
        and type(node.value) is bool
        and variant == 0
    ):
        start, end = src.span(node)
        return start, end, str(not node.value)
    if (
        kind == "swap_arithmetic"
        and isinstance(node, ast.BinOp)
        and type(node.op) in _ARITH_SWAP
        and variant == 0
    ):
        old, new = _ARITH_SWAP[type(node.op)]
        start, end = _gap(src, node.left, node.right)
        return _replace_operator(src, start, end, old, new)
    return None


def _variants(kind: MutationKind, node: ast.AST) -> range:
    if kind == "flip_comparison" and isinstance(node, ast.Compare):
        return range(len(node.ops))
    if kind == "swap_boolean_operator" and isinstance(node, ast.BoolOp):
        return range(len(node.values) - 1)
    if kind == "swap_call_arguments" and isinstance(node, ast.Call):
        return range(max(0, len(node.args) - 1))
    if kind in ("off_by_one_constant", "off_by_one_slice", "off_by_one_range"):
        return range(2)
    return range(1)


def find_sites(source: str) -> list[Site]:
    """Every mutation this module's function bodies admit, in source order. Each one rewrites
    only its own text; `apply_site` still checks the result parses and differs."""
    tree = ast.parse(source)
    src = _Source(source)
    parents = _parents(tree)
    sites = []
    for qualname, fn in _functions(tree):
        for node in _own_nodes(fn):
            if not hasattr(node, "lineno"):
                continue
            for kind in MUTATION_KINDS:
                for variant in _variants(kind, node):
                    if _rewrite(src, node, kind, variant, parents) is None:
                        continue
                    sites.append(Site(kind=kind, function=qualname, function_line=_code_first_line(fn),
                                      lineno=node.lineno, col_offset=node.col_offset,  # type: ignore[attr-defined]
                                      end_lineno=node.end_lineno, end_col_offset=node.end_col_offset,  # type: ignore[attr-defined]
                                      variant=variant))  # fmt: skip
    return sites


_Position = tuple[int, int, int, int]


class _Analysed(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    tree: ast.Module
    src: _Source
    parents: dict[int, ast.AST]
    at: dict[_Position, list[ast.AST]]  # nodes by (lineno, col, end_lineno, end_col)
    top_level: list[tuple[int, int]]  # each module-level statement's first and last line


def _position(node: ast.AST) -> _Position | None:
    pos = tuple(getattr(node, f, None) for f in ("lineno", "col_offset", "end_lineno", "end_col_offset"))
    return None if None in pos else pos  # type: ignore[return-value]


@functools.lru_cache(maxsize=4)
def _analysed(source: str) -> _Analysed:
    """Parse and index once per source: a generator applies dozens of sites to one file in a row."""
    tree = ast.parse(source)
    at: dict[_Position, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if (pos := _position(node)) is not None:
            at.setdefault(pos, []).append(node)
    top_level = [
        (
            min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))]),
            stmt.end_lineno or stmt.lineno,
        )
        for stmt in tree.body
    ]
    return _Analysed(tree=tree, src=_Source(source), parents=_parents(tree), at=at, top_level=top_level)


def _changed_statement(index: _Analysed, site: Site, mutated: str) -> tuple[str, str]:
    """The module-level statement (def or class) holding the site, before and after, as text.
    A change inside it parses, or fails to, the same alone as in the file, and parsing a def is
    much cheaper than parsing a long module again for every candidate."""
    first, last = next((a, b) for a, b in index.top_level if a <= site.lineno <= b)
    before = index.src.lines[first - 1 : last]
    after_lines = _Source(mutated).lines
    delta = len(after_lines) - len(index.src.lines)
    return "".join(before), "".join(after_lines[first - 1 : last + delta])


def apply_site(source: str, site: Site) -> str:
    """The source with this one mutation; raises MutationError when it does not apply or when
    the result does not parse or is the same program."""
    index = _analysed(source)
    for node in index.at.get((site.lineno, site.col_offset, site.end_lineno, site.end_col_offset), []):
        edit = _rewrite(index.src, node, site.kind, site.variant, index.parents)
        if edit is None:
            continue
        start, end, new = edit
        mutated = source[:start] + new + source[end:]
        before, after = _changed_statement(index, site, mutated)
        try:
            changed = ast.dump(ast.parse(after))
        except SyntaxError as exc:
            raise MutationError(f"{site.kind} at line {site.lineno} does not parse: {exc}") from exc
        if changed == ast.dump(ast.parse(before)):
            raise MutationError(f"{site.kind} at line {site.lineno} leaves the program unchanged")
        return mutated
    raise MutationError(f"no {site.kind} site at {site.lineno}:{site.col_offset} in this source")
