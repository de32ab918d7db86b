# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A checker of NeMo RL's contract for NeMo Gym `/run` results.

It reads a result the way NeMo RL's Gym environment does (`nemo_rl/environments/nemo_gym.py`,
`_postprocess_nemo_gym_to_nemo_rl_result`): walk `response.output`, skip items without
generated ids, and require every trainable turn's `prompt_token_ids` to start with all prompt
and generated ids seen so far (else NeMo RL raises "Non-contiguous messages found!"). On top of
that it checks what the rest of the training loop relies on:

- every model-generated item (assistant message, function call, reasoning) carries all three
  token fields; log-probs are finite numbers aligned with the generated ids;
- `reward` is a finite float; `reward_components`, when present, sum to it;
- at least one output item carries non-empty generated ids, masked or not (else NeMo RL raises
  "no generation data");
- `instance_config.mask_sample`, when present, is a bool (NeMo RL reads it there);
- within a group (samples of one task), every first-turn prompt is identical (GRPO's baseline
  groups by it).

`check_result` and `check_group` return lists of problems (empty = conforms); `assert_conforms`
raises with all of them. Pure functions over JSON: usable on `ng_collect_rollouts` output files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nemo_gym_prorl.integrations.gym.response import TOKEN_FIELDS

GENERATED_TYPES = frozenset({"function_call", "reasoning"})


class ContractError(AssertionError):
    """A `/run` result breaks NeMo RL's contract; the message lists every problem."""


def _is_generated(item: Mapping[str, Any]) -> bool:
    if item.get("type") in GENERATED_TYPES:
        return True
    return item.get("type", "message") == "message" and item.get("role") == "assistant"


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def trainable_turns(result: Mapping[str, Any]) -> list[dict[str, list[Any]]]:
    """The (prompt, generation, log-prob) triples NeMo RL trains on, in order."""
    output = ((result.get("response") or {}).get("output")) or []
    return [
        {k: list(item[k]) for k in TOKEN_FIELDS}
        for item in output
        if isinstance(item, Mapping) and item.get("generation_token_ids")
    ]


def first_prompt(result: Mapping[str, Any]) -> list[int] | None:
    turns = trainable_turns(result)
    return turns[0]["prompt_token_ids"] if turns else None


def check_result(result: Mapping[str, Any], *, require_tokens: bool = True) -> list[str]:
    """Problems with one `/run` result (empty list: it conforms)."""
    problems: list[str] = []
    response = result.get("response")
    if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
        return ["result has no response.output list"]
    if not isinstance(result.get("responses_create_params"), Mapping):
        problems.append("result has no responses_create_params")

    seen: list[int] = []
    trainable = 0
    for index, item in enumerate(response["output"]):
        if not isinstance(item, Mapping):
            problems.append(f"output[{index}] is not an object")
            continue
        present = [k for k in TOKEN_FIELDS if k in item]
        if _is_generated(item) and len(present) != len(TOKEN_FIELDS):
            problems.append(
                f"output[{index}] ({item.get('type')}) lacks token fields {sorted(set(TOKEN_FIELDS) - set(present))}"
            )
            continue
        if present and len(present) != len(TOKEN_FIELDS):
            problems.append(f"output[{index}] carries only some token fields: {present}")
            continue
        if not present:
            continue
        prompt, ids, logprobs = (item[k] for k in TOKEN_FIELDS)
        if not (_ints(prompt) and _ints(ids)):
            problems.append(f"output[{index}]: token ids must be lists of integers")
            continue
        if not isinstance(logprobs, list) or len(logprobs) != len(ids):
            problems.append(
                f"output[{index}]: {len(ids)} generated ids but {len(logprobs) if isinstance(logprobs, list) else '?'} log-probs"
            )
            continue
        bad = [
            i
            for i, v in enumerate(logprobs)
            if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v)
        ]
        if bad:
            problems.append(f"output[{index}]: NaN/inf/non-numeric log-probs at {bad[:5]}")
        if not ids:  # NeMo RL skips items with empty ids
            continue
        trainable += 1
        if prompt[: len(seen)] != seen:
            problems.append(
                f"output[{index}]: Non-contiguous messages: the prompt ({len(prompt)} ids) does not start with "
                f"the {len(seen)} ids seen before"
            )
        seen = [*prompt, *ids]
    if require_tokens and trainable == 0:
        # NeMo RL raises "no generation data" here, masked or not.
        problems.append("no output item carries generated token ids: NeMo RL raises 'no generation data'")

    reward = result.get("reward")
    if not isinstance(reward, int | float) or isinstance(reward, bool) or not math.isfinite(float(reward)):
        problems.append(f"reward must be a finite number, got {reward!r}")
    components = result.get("reward_components")
    if components is not None:
        if not isinstance(components, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in components.values()
        ):
            problems.append(f"reward_components must map names to numbers, got {components!r}")
        elif isinstance(reward, int | float) and abs(sum(components.values()) - float(reward)) > 1e-6:
            problems.append(
                f"reward_components {dict(components)} sum to {sum(components.values())}, not reward {reward}"
            )
    instance_config = result.get("instance_config")
    if instance_config is not None:
        if not isinstance(instance_config, Mapping):
            problems.append("instance_config must be an object")
        elif "mask_sample" in instance_config and not isinstance(instance_config["mask_sample"], bool):
            problems.append("instance_config.mask_sample must be a bool")
    return problems


def _masked(result: Mapping[str, Any]) -> bool:
    config = result.get("instance_config")
    return bool(result.get("mask_sample")) or (
        isinstance(config, Mapping) and bool(config.get("mask_sample"))
    )


def check_group(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """Problems across the samples of one task: identical first-turn prompts (plus each result's own)."""
    problems = [f"sample {i}: {p}" for i, r in enumerate(results) for p in check_result(r)]
    firsts = [f for f in (first_prompt(r) for r in results if not _masked(r)) if f is not None]
    if any(f != firsts[0] for f in firsts[1:]):
        problems.append(
            f"first-turn prompts differ within the group ({len({tuple(f) for f in firsts})} distinct)"
        )
    return problems


def group_by_task(
    results: Iterable[Mapping[str, Any]], key: str = "task_id"
) -> dict[Any, list[Mapping[str, Any]]]:
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for r in results:
        groups.setdefault(r.get(key, r.get("_ng_task_index")), []).append(r)
    return groups


def assert_conforms(results: Sequence[Mapping[str, Any]] | Mapping[str, Any]) -> None:
    """Raise `ContractError` listing every problem of one result or one group."""
    problems = check_result(results) if isinstance(results, Mapping) else check_group(results)
    if problems:
        raise ContractError("NeMo RL contract violated:\n  " + "\n  ".join(problems))
