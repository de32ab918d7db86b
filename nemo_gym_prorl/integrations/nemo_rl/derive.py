# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Re-derive the recorded NeMo RL config schema from NeMo RL's own source, without importing it.

NeMo RL validates a recipe by building its `MasterConfig` (pydantic models and TypedDicts; its
`tests/unit/test_config_validation.py` checks its own examples the same way). NeMo RL cannot be
installed here, so this module reads those classes with `ast` from a checkout (a directory) or
from a git directory at a revision, follows imports across modules, and writes every reachable
class as data: its kind (TypedDict or model), totality, extra-key policy and, per field, whether
it is required and its type as a small JSON tree; also the NeMo Gym commit NeMo RL pins (its
Gym submodule) and the members of its `PromptGroupSampler` protocol. `schema.py` rebuilds pydantic types from that
record, so a recipe is validated the way NeMo RL validates it, on machines without NeMo RL.

    python -m nemo_gym_prorl.integrations.nemo_rl.derive --nemo-rl PATH            # compare
    python -m nemo_gym_prorl.integrations.nemo_rl.derive --git-dir DIR --rev REV --write

Comparing exits non-zero, naming what moved, when the source no longer matches the record; the
runner rules are kept in the record by hand and checked here by their source anchors.

Not captured: model validators (cross-field checks inside a model), which are code, not schema.
The runner rules in the record restate the ones a recipe can break.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_gym_prorl.integrations.nemo_rl.source import DirTree, GitTree, SourceTree

__all__ = ["DirTree", "GitTree", "SourceTree", "derive_schema", "diff_schema", "main", "missing_anchors"]

RECORD_PATH = Path(__file__).with_name("record.json")

ROOTS = {
    "grpo": "nemo_rl.algorithms.grpo.MasterConfig",
    "single_controller": "nemo_rl.algorithms.single_controller_utils.config.MasterConfig",
}

PRIMITIVES = {"int": "int", "float": "float", "str": "str", "bool": "bool", "bytes": "str"}
# pydantic's constrained aliases: (primitive, constraint)
CONSTRAINED = {
    "PositiveInt": ("int", {"gt": 0}),
    "NonNegativeInt": ("int", {"ge": 0}),
    "PositiveFloat": ("float", {"gt": 0}),
    "NonNegativeFloat": ("float", {"ge": 0}),
}
ANY_NAMES = {"Any", "object", "Callable", "TypeVar", "type"}
LIST_NAMES = {"list", "List", "Sequence", "tuple", "Tuple", "set", "Set", "Iterable"}
DICT_NAMES = {"dict", "Dict", "Mapping", "MutableMapping"}
WRAPPERS = {"NotRequired", "Required", "ReadOnly", "Final"}


class NemoRLMoved(Exception):
    """NeMo RL's source no longer has a class the record starts from."""


GYM_SUBMODULE = "3rdparty/Gym-workspace/Gym"
SAMPLER_PROTOCOL = "nemo_rl.algorithms.async_utils.staleness_sampler.PromptGroupSampler"


@dataclass
class Module:
    name: str
    path: str
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    aliases: dict[str, ast.expr] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "module.Name" or "module"


class Deriver:
    def __init__(self, source: SourceTree) -> None:
        self.source = source
        self.modules: dict[str, Module | None] = {}
        self.classes: dict[str, dict[str, Any]] = {}
        self.opaque: set[str] = set()

    # -- modules --------------------------------------------------------------------------------
    def module(self, name: str) -> Module | None:
        if name in self.modules:
            return self.modules[name]
        base = name.replace(".", "/")
        mod: Module | None = None
        for rel in (f"{base}.py", f"{base}/__init__.py"):
            text = self.source.read(rel)
            if text is not None:
                mod = self._parse(name, rel, text)
                break
        self.modules[name] = mod
        return mod

    def _parse(self, name: str, rel: str, text: str) -> Module:
        tree = ast.parse(text)
        mod = Module(name, rel, tree)
        package = name if rel.endswith("__init__.py") else name.rpartition(".")[0]
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                mod.classes[node.name] = node
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                mod.aliases[node.targets[0].id] = node.value
            elif (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.value is not None
            ):
                mod.aliases[node.target.id] = node.value
            elif isinstance(node, ast.ImportFrom):
                src = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parent = ".".join(parts[: len(parts) - node.level + 1])
                    src = f"{parent}.{src}" if src else parent
                for alias in node.names:
                    mod.imports[alias.asname or alias.name] = f"{src}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    mod.imports[alias.asname or alias.name.split(".")[0]] = alias.name
        return mod

    def lookup(self, mod: Module, name: str, depth: int = 0) -> tuple[str, Module, Any] | None:
        """Resolve a bare name in `mod` to ("class"|"alias", defining module, node)."""
        if depth > 8:
            return None
        if name in mod.classes:
            return ("class", mod, mod.classes[name])
        if name in mod.aliases:
            return ("alias", mod, mod.aliases[name])
        target = mod.imports.get(name)
        if target is None or not target.startswith("nemo_rl"):
            return None
        src, _, attr = target.rpartition(".")
        other = self.module(src)
        if other is not None:
            found = self.lookup(other, attr, depth + 1)
            if found is not None:
                return found
        return None  # `from pkg import submodule`: a module, not a type

    # -- classes --------------------------------------------------------------------------------
    def qualify(self, mod: Module, cls: ast.ClassDef) -> str:
        return f"{mod.name}.{cls.name}"

    def add_class(self, mod: Module, cls: ast.ClassDef) -> str:
        qname = self.qualify(mod, cls)
        if qname in self.classes:
            return qname
        self.classes[qname] = {}  # placeholder: breaks cycles
        kind, total, extra = "typeddict", True, "ignore"
        fields: dict[str, Any] = {}
        for base in cls.bases:
            base_name = ast.unparse(base)
            if base_name in ("TypedDict", "typing.TypedDict", "typing_extensions.TypedDict"):
                kind = "typeddict"
            elif base_name in ("BaseModel", "pydantic.BaseModel"):
                kind = "model"
            elif isinstance(base, ast.Name):
                found = self.lookup(mod, base.id)
                if found and found[0] == "class":
                    parent = self.classes[self.add_class(found[1], found[2])]
                    kind = parent["kind"]
                    extra = parent["extra"]
                    fields.update(parent["fields"])
        for kw in cls.keywords:
            if kw.arg == "total" and isinstance(kw.value, ast.Constant):
                total = bool(kw.value.value)
            if kw.arg == "extra" and isinstance(kw.value, ast.Constant):
                extra = str(kw.value.value)
        for node in cls.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "model_config" for t in node.targets
            ):
                for kw in getattr(node.value, "keywords", []):
                    if kw.arg == "extra" and isinstance(kw.value, ast.Constant):
                        extra = str(kw.value.value)
            if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
                continue
            name = node.target.id
            annotation = node.annotation
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                annotation = ast.parse(annotation.value, mode="eval").body
            if _head(annotation) == "ClassVar":
                continue
            if kind == "typeddict":
                head = _head(annotation)
                required = total if head not in ("NotRequired", "Required") else head == "Required"
            else:
                required = node.value is None or _field_without_default(node.value)
            fields[name] = {"required": required, "type": self.type_of(mod, annotation)}
        self.classes[qname] = {"kind": kind, "total": total, "extra": extra, "fields": fields}
        return qname

    # -- types ----------------------------------------------------------------------------------
    def type_of(self, mod: Module, node: ast.expr) -> dict[str, Any]:
        if isinstance(node, ast.Constant):
            if node.value is None:
                return {"k": "none"}
            if isinstance(node.value, str):
                return self.type_of(mod, ast.parse(node.value, mode="eval").body)
            return {"k": "any"}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _union([self.type_of(mod, node.left), self.type_of(mod, node.right)])
        if isinstance(node, ast.Attribute):
            self.opaque.add(ast.unparse(node))
            return {"k": "any"}
        if isinstance(node, ast.Name):
            return self.name_type(mod, node.id)
        if isinstance(node, ast.Subscript):
            head = _head(node)
            args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head in WRAPPERS:
                return self.type_of(mod, args[0])
            if head == "Optional":
                return _union([self.type_of(mod, args[0]), {"k": "none"}])
            if head == "Union":
                return _union([self.type_of(mod, a) for a in args])
            if head == "Literal":
                return {"k": "lit", "v": [a.value for a in args if isinstance(a, ast.Constant)]}
            if head in LIST_NAMES:
                item = self.type_of(mod, args[0]) if head not in ("tuple", "Tuple") else {"k": "any"}
                return {"k": "list", "of": item}
            if head in DICT_NAMES:
                key, val = (self.type_of(mod, a) for a in args[:2]) if len(args) >= 2 else ({"k": "any"},) * 2
                return {"k": "dict", "key": key, "val": val}
            if head == "Annotated":
                inner = self.type_of(mod, args[0])
                for meta in args[1:]:
                    if isinstance(meta, ast.Call) and _head(meta.func) == "Field":
                        for kw in meta.keywords:
                            if kw.arg in ("gt", "ge", "lt", "le") and isinstance(kw.value, ast.Constant):
                                inner = {**inner, kw.arg: kw.value.value}
                            if kw.arg == "discriminator" and isinstance(kw.value, ast.Constant):
                                inner = {**inner, "disc": kw.value.value}
                return inner
            self.opaque.add(ast.unparse(node))
            return {"k": "any"}
        return {"k": "any"}

    def name_type(self, mod: Module, name: str) -> dict[str, Any]:
        if name in PRIMITIVES:
            return {"k": PRIMITIVES[name]}
        if name in CONSTRAINED:
            prim, constraint = CONSTRAINED[name]
            return {"k": prim, **constraint}
        if name in ANY_NAMES:
            return {"k": "any"}
        found = self.lookup(mod, name)
        if found is None:
            self.opaque.add(name)
            return {"k": "any"}
        what, where, node = found
        if what == "class":
            return {"k": "ref", "name": self.add_class(where, node)}
        return self.type_of(where, node)


def _head(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _field_without_default(value: ast.expr) -> bool:
    if not (isinstance(value, ast.Call) and _head(value.func) == "Field"):
        return False
    if value.args and not (isinstance(value.args[0], ast.Constant) and value.args[0].value is Ellipsis):
        return False
    return not any(kw.arg in ("default", "default_factory") for kw in value.keywords)


def _union(members: list[dict[str, Any]]) -> dict[str, Any]:
    flat: list[dict[str, Any]] = []
    for m in members:
        for item in m["of"] if m["k"] == "union" and "disc" not in m else [m]:
            if item not in flat:
                flat.append(item)
    return flat[0] if len(flat) == 1 else {"k": "union", "of": flat}


def derive_schema(source: SourceTree) -> dict[str, Any]:
    """The pinned NeMo Gym commit, the runners' root classes and every class they reach, as data."""
    deriver = Deriver(source)
    roots: dict[str, str] = {}
    for runner, qname in ROOTS.items():
        module_name, _, class_name = qname.rpartition(".")
        mod = deriver.module(module_name)
        if mod is None or class_name not in mod.classes:
            raise NemoRLMoved(f"NeMo RL source has no {qname}")
        roots[runner] = deriver.add_class(mod, mod.classes[class_name])
    sampler_module = deriver.module(SAMPLER_PROTOCOL.rpartition(".")[0])
    protocol = sampler_module.classes.get("PromptGroupSampler") if sampler_module else None
    if protocol is None:
        raise NemoRLMoved(f"NeMo RL source has no {SAMPLER_PROTOCOL}")
    members = [n.name for n in protocol.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return {
        "nemo_gym_pinned_commit": source.gitlink(GYM_SUBMODULE),
        "prompt_group_sampler_members": members,
        "roots": roots,
        "classes": dict(sorted(deriver.classes.items())),
        "opaque": sorted(deriver.opaque),
    }


def missing_anchors(record: dict[str, Any], source: SourceTree) -> list[str]:
    """Runner rules whose anchor text no longer appears in the named NeMo RL file."""
    problems = []
    for rule in record.get("runner_rules", []):
        for anchor in rule.get("anchors", []):
            text = source.read(anchor["path"])
            if text is None:
                problems.append(f"rule {rule['id']}: {anchor['path']} is gone")
            elif anchor["text"] not in text:
                problems.append(f"rule {rule['id']}: {anchor['path']} no longer contains {anchor['text']!r}")
    return problems


def diff_schema(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if old.get("nemo_gym_pinned_commit") != new["nemo_gym_pinned_commit"]:
        out.append(
            f"pinned NeMo Gym moved: {old.get('nemo_gym_pinned_commit')} -> {new['nemo_gym_pinned_commit']}"
        )
    old_members = (old.get("prompt_group_sampler") or {}).get("members")
    if old_members != new["prompt_group_sampler_members"]:
        out.append(
            f"PromptGroupSampler members moved: {old_members} -> {new['prompt_group_sampler_members']}"
        )
    if old.get("roots") != new["roots"]:
        out.append(f"roots moved: {old.get('roots')} -> {new['roots']}")
    old_classes, new_classes = old.get("classes", {}), new["classes"]
    for name in sorted(set(old_classes) | set(new_classes)):
        a, b = old_classes.get(name), new_classes.get(name)
        if a is None or b is None:
            out.append(f"class {name} {'added' if a is None else 'removed'}")
            continue
        for key in ("kind", "total", "extra"):
            if a.get(key) != b.get(key):
                out.append(f"{name}.{key}: {a.get(key)} -> {b.get(key)}")
        for f in sorted(set(a["fields"]) | set(b["fields"])):
            if a["fields"].get(f) != b["fields"].get(f):
                out.append(f"{name}.{f}: {a['fields'].get(f)} -> {b['fields'].get(f)}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--nemo-rl", type=Path, help="a NeMo RL checkout (working tree)")
    src.add_argument("--git-dir", type=Path, help="a NeMo RL git directory (use with --rev)")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--write", action="store_true", help="rewrite the record's schema from this source")
    parser.add_argument("--record", type=Path, default=RECORD_PATH)
    args = parser.parse_args(argv)

    tree: DirTree | GitTree = (
        GitTree(args.git_dir, args.rev) if args.git_dir is not None else DirTree(args.nemo_rl)
    )
    commit = tree.commit()
    record = json.loads(args.record.read_text())
    try:
        schema = derive_schema(tree)
    except NemoRLMoved as exc:
        print(f"NeMo RL {commit} differs from the record (made at {record.get('nemo_rl_commit')}): {exc}")
        return 1
    anchors = missing_anchors(record, tree)
    if args.write:
        members = schema.pop("prompt_group_sampler_members")
        record.update(nemo_rl_commit=commit, **schema)
        record.setdefault("prompt_group_sampler", {})["members"] = members
        args.record.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
        print(f"wrote {args.record} from NeMo RL {commit}: {len(schema['classes'])} classes")
        for problem in anchors:
            print(f"runner rule: {problem}", file=sys.stderr)
        return 1 if anchors else 0
    moved = diff_schema(record, schema) + anchors
    if moved:
        print(f"NeMo RL {commit} differs from the record (made at {record.get('nemo_rl_commit')}):")
        for line in moved:
            print(f"  {line}")
        return 1
    print(f"NeMo RL {commit} matches the record ({len(schema['classes'])} classes, "
          f"{len(record.get('runner_rules', []))} runner rules)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
