# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Program-written demonstrations: real sandboxes, the real IPython tool and the real math
evaluator; token ids from a backend's /tokenize through the `vllm` dialect's prompt code."""

from __future__ import annotations

import asyncio
import math
from fractions import Fraction
from pathlib import Path

import pytest
from support.fake_llm import IM_END, detokenize, render_chat, tokenize_text

from nemo_gym_prorl.agent.harness.process import bubblewrap_works
from nemo_gym_prorl.datasets.swe import swe_rows
from nemo_gym_prorl.llm.access import LLMAccess, LLMConfig
from nemo_gym_prorl.tasks.swe import ensure_built
from nemo_gym_prorl.training.demonstrations import (
    ORIGIN,
    Demonstration,
    DemonstrationConfig,
    DemonstrationDropped,
    DemonstrationError,
    Demonstrator,
    collect_demonstrations,
    demonstrate_rows,
    program_code,
    read_demonstrations,
    write_demonstrations,
)
from nemo_gym_prorl.training.heldout import SeedSplit

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(600)]


def config_for(url: str, **fields: object) -> DemonstrationConfig:
    return DemonstrationConfig(llm=LLMConfig(backends=[url]), **fields)


def spans(demo: Demonstration) -> list[tuple[int, str]]:
    """The completion as (mask, text) runs."""
    runs: list[tuple[int, list[int]]] = []
    for token, mask in zip(demo.completion_ids, demo.env_mask, strict=True):
        if runs and runs[-1][0] == mask:
            runs[-1][1].append(token)
        else:
            runs.append((mask, [token]))
    return [(mask, detokenize(ids)) for mask, ids in runs]


def computed(row: dict) -> str:
    """The value the task's inputs give, computed here independently of the sandbox."""
    family, meta = row["reasoning_gym"]["family"], row["reasoning_gym"]["metadata"]
    if family == "basic_arithmetic":
        return str(eval(meta["expression"]))  # a reasoning-gym expression of small integers
    if family in ("gcd", "lcm"):
        return str(getattr(math, family)(*meta["numbers"]))
    return str(Fraction(meta["numerator"], meta["denominator"]))


async def test_five_demonstrations_end_to_end_are_all_rewarded_and_token_exact(tokenizer_backend) -> None:
    demos, summary = await collect_demonstrations(5, config_for(tokenizer_backend.url))
    rows = SeedSplit().train_rows(5)

    # Two tasks run at once, so a sixth may be under way when the fifth is kept; it counts as tried.
    assert summary.kept == 5 and summary.tried in (5, 6) and summary.keep_rate == 1.0 and not summary.dropped
    assert set(summary.families) == {"basic_arithmetic", "gcd", "lcm", "fraction_simplification"}
    for demo, row in zip(demos, rows, strict=True):
        assert demo.origin == ORIGIN == "program-written demonstration"
        assert (demo.recipe.family, demo.recipe.seed, demo.recipe.split) == (
            row["reasoning_gym"]["family"],
            row["reasoning_gym"]["seed"],
            "train",
        )
        assert demo.reward == 1.0 and demo.reward_components == {"accuracy": 1.0}
        assert (demo.turns, demo.tool_calls) == (2, 1)

        system, user, call, tool, answer = demo.messages
        # The observation is the sandbox's real output of the call the program wrote.
        assert tool["role"] == "tool" and tool["content"] == computed(row)
        assert call["tool_calls"][0]["function"]["name"] == "ipython"
        assert answer["content"] == f"The answer is \\boxed{{{computed(row)}}}."

        # The first prompt is the backend's rendering of the row's first messages.
        assert demo.prompt_ids == tokenize_text(render_chat([system, user], add_generation_prompt=True))
        # env_mask is 1 exactly on what the assistant wrote (each turn ends with its end-of-turn
        # token) and 0 on the template's bridge and the tool's message.
        assert spans(demo) == [
            (1, call["content"] + "<|im_end|>"),
            (0, f"\n<|im_start|>tool\n{tool['content']}<|im_end|>\n<|im_start|>assistant\n"),
            (1, answer["content"] + "<|im_end|>"),
        ]
        assert demo.completion_ids[-1] == IM_END
    assert summary.prompt_tokens.min == min(len(d.prompt_ids) for d in demos)
    assert summary.model_tokens.max == max(sum(d.env_mask) for d in demos)


async def test_write_demonstrations_writes_jsonl_that_reads_back(tokenizer_backend, tmp_path: Path) -> None:
    path = tmp_path / "demonstrations.jsonl"
    config = config_for(tokenizer_backend.url, start=5, concurrency=1)
    # `write_demonstrations` runs its own event loop; the fake backend serves from this one.
    summary = await asyncio.to_thread(write_demonstrations, path, 2, config)

    demos = read_demonstrations(path)
    assert summary.path == str(path) and summary.kept == len(demos) == 2
    assert [(d.recipe.family, d.recipe.seed) for d in demos] == [
        (r["reasoning_gym"]["family"], r["reasoning_gym"]["seed"]) for r in SeedSplit().train_rows(2, start=5)
    ]


async def test_an_unrewarded_demonstration_is_dropped_with_the_evaluators_reason(tokenizer_backend) -> None:
    config = config_for(tokenizer_backend.url)
    llm = LLMAccess.from_config(config.llm)
    await llm.pool.start()
    demonstrator = Demonstrator(config, llm)
    try:
        row = SeedSplit().train_rows(1)[0] | {"expected_answer": "123456"}
        with pytest.raises(DemonstrationDropped) as dropped:
            await demonstrator.demonstrate(row)
        assert dropped.value.reason == "wrong_answer"
    finally:
        await demonstrator.close()
        await llm.pool.aclose()


async def test_a_heldout_task_is_never_demonstrated(tokenizer_backend) -> None:
    config = config_for(tokenizer_backend.url)
    demonstrator = Demonstrator(config, LLMAccess.from_config(config.llm))
    try:
        with pytest.raises(ValueError, match="held-out task"):
            await demonstrator.demonstrate(SeedSplit().heldout_rows()[0])
    finally:
        await demonstrator.close()


def test_a_program_reads_the_task_inputs_never_its_answer() -> None:
    row = SeedSplit().row("train", "gcd", 11)
    stripped = row | {"expected_answer": None}
    stripped["reasoning_gym"] = {
        **row["reasoning_gym"],
        "metadata": {k: v for k, v in row["reasoning_gym"]["metadata"].items() if k != "result"},
    }
    numbers = ", ".join(map(str, row["reasoning_gym"]["metadata"]["numbers"]))
    assert program_code(stripped) == program_code(row) == f"import math\nprint(math.gcd({numbers}))"
    with pytest.raises(ValueError, match="no family a program can demonstrate"):
        program_code({"task_id": "x", "reasoning_gym": {"family": "gsm_symbolic"}})


async def test_without_a_backend_or_with_a_format_it_cannot_write_it_says_so(tokenizer_backend) -> None:
    with pytest.raises(DemonstrationError, match=r"llm\.backends"):
        await collect_demonstrations(1, DemonstrationConfig())
    config = DemonstrationConfig(
        llm=LLMConfig(backends=[tokenizer_backend.url], tool_call_format="llama3_json")
    )
    with pytest.raises(DemonstrationError, match="hermes"):
        await collect_demonstrations(1, config)
    with pytest.raises(DemonstrationError, match="`vllm` dialect"):
        Demonstrator(
            config, LLMAccess.from_config(LLMConfig(backends=[tokenizer_backend.url], dialect="nemo_rl"))
        )


async def test_a_harness_demonstration_is_the_unchanged_harness_driven_by_the_program(
    tokenizer_backend,
) -> None:
    # mini-swe-agent, unchanged, with the project's config for the embedded model: the program
    # sits in the model's seat and writes bash blocks; the harness runs them in the sandbox and
    # submits as it always does. One token sequence, every call merged.
    harness = {"name": "mini_swe_agent", "config": "mini_swe_agent_math.yaml"}
    demos, summary = await collect_demonstrations(
        3, config_for(tokenizer_backend.url, harness=harness, concurrency=1)
    )
    assert summary.kept == 3 and summary.keep_rate == 1.0 and not summary.dropped
    for demo, row in zip(demos, SeedSplit().train_rows(3), strict=True):
        assert demo.reward == 1.0 and (demo.turns, demo.tool_calls) == (2, 2)  # compute, submit
        system, task, compute, observation, submit = demo.messages
        assert "```bash" in system["content"] and task["content"].startswith(
            row["responses_create_params"]["input"][-1]["content"]
        )
        assert compute["content"].startswith("```bash\npython3 -c ")
        assert f"<output>\n{computed(row)}\n</output>" in observation["content"]  # the sandbox's real output
        assert submit["content"] == (
            f"```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo '\\boxed{{{computed(row)}}}'\n```"
        )
        assert demo.prompt_ids == tokenize_text(render_chat([system, task], add_generation_prompt=True))
        assert [mask for mask, _ in spans(demo)] == [1, 0, 1]
        assert spans(demo)[2] == (1, submit["content"] + "<|im_end|>")


async def test_a_swe_demonstration_locates_reads_edits_and_submits_and_the_real_grader_resolves_it(
    tokenizer_backend,
) -> None:
    # mini-swe-agent with the project's SWE config, the program in the model's seat writing the
    # fix from the instance's gold patch (read on the host, never shown to a policy), the commands
    # run in the instance's sandbox, and the hidden tests grading the repository's diff.
    if not bubblewrap_works():
        pytest.skip("bubblewrap does not work here")
    instance = next(i for i in await ensure_built() if "ordinal" in i["instance_id"])
    row = swe_rows([instance], compact=True)[0]
    assert "patch" not in row  # the row a policy's rollout gets carries no gold patch
    harness = {"name": "mini_swe_agent", "config": "mini_swe_agent_swe.yaml"}
    kept, dropped = await demonstrate_rows([row], config_for(tokenizer_backend.url, harness=harness))
    assert not dropped
    demo = kept[row["task_id"]]
    assert demo.reward == 1.0 and (demo.recipe.family, demo.recipe.instance_id) == (
        "swe",
        instance["instance_id"],
    )
    assert (demo.turns, demo.tool_calls) == (4, 4)  # locate, read, edit, submit
    replies = [m["content"] for m in demo.messages if m["role"] == "assistant"]
    observations = [m["content"] for m in demo.messages if m["role"] == "user"][1:]
    assert replies[0].startswith("```bash\ngrep -rn 'def ordinal'")
    assert "inflection/__init__.py" in observations[0] and "def ordinal" in observations[0]
    assert "if number % 100 in (11, 12):" in observations[1]  # the buggy lines, as the sandbox holds them
    assert "<returncode>0</returncode>" in observations[2]  # the edit ran
    assert [mask for mask, _ in spans(demo)] == [
        1,
        0,
        1,
        0,
        1,
        0,
        1,
    ]  # one sequence, the program's turns trained


async def test_a_swe_row_without_a_harness_is_refused_not_demonstrated_with_tool_calls(
    tokenizer_backend,
) -> None:
    row = {"task_id": "swe-1", "data_source": "prorl_swe", "instance_id": "x"}
    with pytest.raises(DemonstrationError, match="through a harness"):
        await demonstrate_rows([row], config_for(tokenizer_backend.url))
