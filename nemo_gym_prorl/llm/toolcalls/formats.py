# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The tool-call formats models write in their generated text, one parser each.

    hermes       <tool_call>{"name": "f", "arguments": {...}}</tool_call>   (Hermes, Qwen2.5/3, SmolLM)
    llama3_json  {"name": "f", "parameters": {...}}; {...}                  (Llama 3.1/3.3, after <|python_tag|> or bare)
    mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}]            (Mistral v3 tokenizers)
                 [TOOL_CALLS]f[ARGS]{...}                                   (Mistral v11+: Magistral, Devstral)
    qwen3_coder  <tool_call><function=f><parameter=p>value</parameter></function></tool_call>
    pythonic     [f(a=1, b='x'), g()]                                       (Llama 3.2/4, ToolACE)

Each parser returns the prose outside the markup and, in order, every call it found: a
`ToolCall` when it is well-formed, a `ToolCallError` (sent back as the tool's observation)
when it is not. Nothing here raises on model output.

The parsers are registered in `PARSERS` by format name. A model that writes another format
needs no change here: `llm.tool_call_format=mypkg.mod:parse_mine` names a function with the
parsers' signature, `(text, *, turn=0, tool_specs=None) -> ParsedCalls`.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator

from nemo_gym_prorl.llm.records import ToolCallError
from nemo_gym_prorl.llm.toolcalls.common import ParsedCalls, call_id, from_payload, with_arguments
from nemo_gym_prorl.registry import Registry

Parser = Callable[..., ParsedCalls]
PARSERS: Registry[ParsedCalls] = Registry("tool-call format")
# A registered format name ("hermes", ...) or an import target `package.module:parse`.
ToolCallFormat = Annotated[str, AfterValidator(PARSERS.check)]

# -- hermes -------------------------------------------------------------------------------------

_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_HERMES_OPEN = "<tool_call>"


@PARSERS.register("hermes")
def parse_hermes(text: str, *, turn: int = 0, tool_specs: list[dict[str, Any]] | None = None) -> ParsedCalls:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks. An opening tag
    without a closing one (generation cut by max_tokens) is an error too."""
    parsed = ParsedCalls(content="")
    for index, match in enumerate(_HERMES_BLOCK.finditer(text)):
        raw = match.group(1).strip()
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            parsed.errors.append(
                ToolCallError(id=call_id(turn, index), raw=raw, error=f"not valid JSON: {exc}")
            )
            continue
        parsed.add(from_payload(payload, call_id=call_id(turn, index), raw=raw))
    content = _HERMES_BLOCK.sub("", text)
    dangling = content.find(_HERMES_OPEN)
    if dangling != -1:
        raw = content[dangling + len(_HERMES_OPEN) :].strip()
        index = len(parsed.calls) + len(parsed.errors)
        parsed.errors.append(
            ToolCallError(id=call_id(turn, index), raw=raw, error="unterminated <tool_call> block")
        )
        content = content[:dangling]
    parsed.content = content.strip()
    return parsed


# -- llama 3 JSON -------------------------------------------------------------------------------

_PYTHON_TAG = "<|python_tag|>"
_LLAMA_CALL_START = re.compile(r'\s*\{\s*"(name|type)"\s*:')


@PARSERS.register("llama3_json")
def parse_llama3_json(
    text: str, *, turn: int = 0, tool_specs: list[dict[str, Any]] | None = None
) -> ParsedCalls:
    """Llama 3.1's JSON calls: the message is `<|python_tag|>` or a JSON object naming a
    function, then one or more `{"name": ..., "parameters": {...}}` separated by `;`. Anything
    else is prose (vLLM's `llama3_json` parser decides the same way)."""
    body = text.strip()
    tagged = body.startswith(_PYTHON_TAG)
    if tagged:
        body = body[len(_PYTHON_TAG) :].strip()
    elif not _LLAMA_CALL_START.match(body):
        return ParsedCalls(content=body)
    parsed = ParsedCalls(content="")
    decoder = json.JSONDecoder()
    position, index = 0, 0
    while position < len(body):
        while position < len(body) and body[position] in " \t\r\n;":
            position += 1
        if position >= len(body):
            break
        try:
            payload, end = decoder.raw_decode(body, position)
        except ValueError as exc:
            raw = body[position:].strip()
            parsed.errors.append(
                ToolCallError(id=call_id(turn, index), raw=raw, error=f"not valid JSON: {exc}")
            )
            break
        raw = body[position:end]
        parsed.add(from_payload(payload, call_id=call_id(turn, index), raw=raw))
        index += 1
        position = end
    return parsed


# -- mistral ------------------------------------------------------------------------------------

_MISTRAL_TAG = "[TOOL_CALLS]"
_MISTRAL_ARGS = "[ARGS]"


@PARSERS.register("mistral")
def parse_mistral(text: str, *, turn: int = 0, tool_specs: list[dict[str, Any]] | None = None) -> ParsedCalls:
    """Everything after `[TOOL_CALLS]` is calls: a JSON array of `{"name", "arguments"}`
    (tokenizer v3..v7) or `name[ARGS]{...}` pieces, each after its own `[TOOL_CALLS]` (v11+)."""
    start = text.find(_MISTRAL_TAG)
    if start == -1:
        return ParsedCalls(content=text.strip())
    parsed = ParsedCalls(content=text[:start].strip())
    pieces = [p.strip() for p in text[start:].split(_MISTRAL_TAG) if p.strip()]
    if not pieces:
        parsed.errors.append(
            ToolCallError(id=call_id(turn, 0), raw="", error="[TOOL_CALLS] with no call after it")
        )
        return parsed
    index = 0
    decoder = json.JSONDecoder()
    for piece in pieces:
        if _MISTRAL_ARGS in piece:  # name[ARGS]{json}
            name, _, arguments = piece.partition(_MISTRAL_ARGS)
            this_id = call_id(turn, index)
            index += 1
            if not name.strip():
                parsed.errors.append(
                    ToolCallError(id=this_id, raw=piece, error="missing function name before [ARGS]")
                )
                continue
            try:
                payload, _ = decoder.raw_decode(arguments.strip())
            except ValueError as exc:
                parsed.errors.append(
                    ToolCallError(
                        id=this_id, raw=piece, name=name.strip(), error=f"arguments are not valid JSON: {exc}"
                    )
                )
                continue
            parsed.add(with_arguments(name.strip(), payload, call_id=this_id, raw=piece))
            continue
        try:
            payload, _ = decoder.raw_decode(piece)
        except ValueError as exc:
            parsed.errors.append(
                ToolCallError(id=call_id(turn, index), raw=piece, error=f"not valid JSON: {exc}")
            )
            index += 1
            continue
        for item in payload if isinstance(payload, list) else [payload]:
            raw = json.dumps(item, ensure_ascii=False)
            parsed.add(from_payload(item, call_id=call_id(turn, index), raw=raw))
            index += 1
    return parsed


# -- qwen3-coder XML ----------------------------------------------------------------------------

_QWEN_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)</function>", re.S)
_QWEN_PARAMETER = re.compile(r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S)
_QWEN_WRAPPER = re.compile(r"</?tool_call>")


def _parameter_types(tool_specs: list[dict[str, Any]] | None, name: str) -> dict[str, Any]:
    for spec in tool_specs or []:
        function = spec.get("function", spec)
        if function.get("name") == name:
            return dict((function.get("parameters") or {}).get("properties") or {})
    return {}


def _typed(value: str, schema: Any) -> Any:
    """XML parameters are text; the tool's JSON schema says what they mean (as vLLM's
    `qwen3_coder` parser does). Without a schema a value that reads as JSON is taken as such."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "string":
        return value
    try:
        return json.loads(value)
    except ValueError:
        if kind in ("object", "array"):
            try:
                return ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return value
        return value


@PARSERS.register("qwen3_coder")
def parse_qwen3_coder(
    text: str, *, turn: int = 0, tool_specs: list[dict[str, Any]] | None = None
) -> ParsedCalls:
    """`<function=NAME>` with `<parameter=KEY>value</parameter>` children, usually inside
    `<tool_call>`; one newline around each value belongs to the markup."""
    parsed = ParsedCalls(content="")
    index = 0
    for match in _QWEN_FUNCTION.finditer(text):
        raw = match.group(0)
        name = match.group(1).strip()
        this_id = call_id(turn, index)
        index += 1
        if not name:
            parsed.errors.append(
                ToolCallError(id=this_id, raw=raw, error="missing function name in <function=...>")
            )
            continue
        types = _parameter_types(tool_specs, name)
        arguments: dict[str, Any] = {}
        for parameter in _QWEN_PARAMETER.finditer(match.group(2)):
            key = parameter.group(1).strip()
            value = parameter.group(2).removeprefix("\n").removesuffix("\n")
            arguments[key] = _typed(value, types.get(key))
        parsed.add(with_arguments(name, arguments, call_id=this_id, raw=raw))
    rest = _QWEN_WRAPPER.sub("", _QWEN_FUNCTION.sub("", text))
    dangling = rest.find("<function=")
    if dangling != -1:
        parsed.errors.append(
            ToolCallError(
                id=call_id(turn, index),
                raw=rest[dangling:].strip(),
                error="unterminated <function=...> block",
            )
        )
        rest = rest[:dangling]
    parsed.content = rest.strip()
    return parsed


# -- pythonic -----------------------------------------------------------------------------------

_PYTHONIC_WRAP = ("<|python_start|>", "<|python_end|>")
_PYTHONIC_START = re.compile(r"\s*\[\s*[A-Za-z_][\w.]*\s*\(")


@PARSERS.register("pythonic")
def parse_pythonic(
    text: str, *, turn: int = 0, tool_specs: list[dict[str, Any]] | None = None
) -> ParsedCalls:
    """A Python list of calls with keyword arguments whose values are literals:
    `[get_weather(city='Paris', days=3), get_time()]`. Other text is prose."""
    body = text.strip()
    for marker in _PYTHONIC_WRAP:
        body = body.replace(marker, "")
    body = body.strip()
    if not _PYTHONIC_START.match(body):
        return ParsedCalls(content=text.strip())
    parsed = ParsedCalls(content="")
    try:
        tree = ast.parse(body, mode="eval")
    except SyntaxError as exc:
        parsed.errors.append(
            ToolCallError(id=call_id(turn, 0), raw=body, error=f"not a Python list of calls: {exc.msg}")
        )
        return parsed
    if not isinstance(tree.body, ast.List):
        parsed.errors.append(ToolCallError(id=call_id(turn, 0), raw=body, error="expected a list of calls"))
        return parsed
    for index, node in enumerate(tree.body.elts):
        raw = ast.get_source_segment(body, node) or ""
        this_id = call_id(turn, index)
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name | ast.Attribute):
            parsed.errors.append(ToolCallError(id=this_id, raw=raw, error="list item is not a function call"))
            continue
        name = ast.unparse(node.func)
        if node.args:
            parsed.errors.append(
                ToolCallError(id=this_id, raw=raw, name=name, error="positional arguments; use name=value")
            )
            continue
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
        except ValueError:
            parsed.errors.append(
                ToolCallError(id=this_id, raw=raw, name=name, error="argument values must be literals")
            )
            continue
        parsed.add(with_arguments(name, arguments, call_id=this_id, raw=raw))
    return parsed


def parse_tool_calls(
    text: str,
    tool_format: str = "hermes",
    *,
    turn: int = 0,
    tool_specs: list[dict[str, Any]] | None = None,
) -> ParsedCalls:
    """Parse a generation in the given format (a name in `PARSERS` or an import target)."""
    return PARSERS.factory(tool_format)(text, turn=turn, tool_specs=tool_specs)
