# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The NeMo RL sampler against the documented behaviour of NeMo RL's single-controller path.

NeMo RL is not installable here, so `FakeBuffer` / `FakeMeta` reproduce what the sampler relies
on, as documented in NVIDIA-NeMo/RL (`TQReplayBuffer`: parallel `meta_list`/`start_weight_list`/
`ready_list`, reserve-then-commit, `remove(idxs, remove_in_dp)`, `_call_dp("get_samples", ...)`
returning fields by name; `KVBatchMeta`: `sample_ids` `{group}_g{i}`, `tags`, `concat`), and
`simulate` reproduces `_rollout_pump` / `_train_pump`'s capacity accounting: one permit per
group, released per group `evict` reports and per group `select` returns.
"""

from __future__ import annotations

import asyncio
import importlib
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from nemo_gym_prorl.integrations.nemo_rl.sampler import ZeroVarianceSkippingSampler
from nemo_gym_prorl.integrations.nemo_rl.schema import load_record

TARGET = "nemo_gym_prorl.integrations.nemo_rl.sampler:ZeroVarianceSkippingSampler"
# Every member of NeMo RL's PromptGroupSampler protocol at the recorded commit (staleness_sampler.py).
PROTOCOL = tuple(load_record()["prompt_group_sampler"]["members"])
# The TQReplayBuffer members the sampler may touch (all exist on the recorded commit's class).
BUFFER_MEMBERS = set(load_record()["prompt_group_sampler"]["buffer_members"])


class Tensorish(list[float]):
    def tolist(self) -> list[float]:
        return list(self)


@dataclass
class FakeMeta:
    partition_id: str
    task_name: str | None
    sample_ids: list[str]
    fields: list[str] | None = None
    sequence_lengths: list[int] | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)
    tags: list[dict[str, Any]] | None = None

    def concat(self, *others: FakeMeta) -> FakeMeta:
        metas = [self, *others]
        return FakeMeta(
            self.partition_id,
            self.task_name,
            [s for m in metas for s in m.sample_ids],
            self.fields,
            tags=[t for m in metas for t in (m.tags or [])],
        )


class FakeBuffer:
    def __init__(self, *, with_claim: bool = False, reward_tags: bool = False) -> None:
        self.meta_list: list[FakeMeta | None] = []
        self.start_weight_list: list[int] = []
        self.end_weight_list: list[int] = []
        self.target_step_list: list[int | None] = []
        self.ready_list: list[bool] = []
        self._group_ids: list[str] = []
        self.rows: dict[str, dict[str, float]] = {}  # the "data plane"
        self.cleared: list[str] = []
        self.fetches = 0
        self.reward_tags = reward_tags
        if with_claim:
            self.claimed: list[str] = []
            self.claim_for_training = self._claim

    def reserve(self, *, weight_version: int, group_id: str) -> str:
        self.meta_list.append(None)
        self.start_weight_list.append(weight_version)
        self.end_weight_list.append(-1)
        self.target_step_list.append(None)
        self.ready_list.append(False)
        self._group_ids.append(group_id)
        return group_id

    async def commit(self, group_id: str, rewards: list[float], masks: list[float] | None = None) -> FakeMeta:
        ids = [f"{group_id}_g{i}" for i in range(len(rewards))]
        masks = masks or [1.0] * len(rewards)
        for sid, r, m in zip(ids, rewards, masks, strict=True):
            self.rows[sid] = {"total_reward": r, "sample_mask": m}
        tags = [{"weight_version": 0, **({"total_reward": r} if self.reward_tags else {})} for r in rewards]
        meta = FakeMeta("train", "train", ids, ["input_ids", "total_reward", "sample_mask"], tags=tags)
        idx = self._group_ids.index(group_id)
        self.meta_list[idx], self.ready_list[idx] = meta, True
        return meta

    async def remove(self, idxs: list[int], remove_in_dp: bool) -> int:
        for i in sorted(idxs, reverse=True):
            meta = self.meta_list[i]
            if remove_in_dp and meta is not None:
                self.cleared.extend(meta.sample_ids)
            for lst in (self.meta_list, self.start_weight_list, self.end_weight_list, self.target_step_list,
                        self.ready_list, self._group_ids):  # fmt: skip
                del lst[i]
        await asyncio.sleep(0)  # the real one awaits the data plane after deleting
        return len(idxs)

    async def _claim(self, idxs: list[int]) -> None:
        self.claimed.extend(self._group_ids[i] for i in idxs)
        await self.remove(idxs, remove_in_dp=False)

    async def _call_dp(self, method: str, **kw: Any) -> Any:
        assert method == "get_samples" and kw["partition_id"] == "train"
        self.fetches += 1
        await asyncio.sleep(0)
        return {f: Tensorish(self.rows[s][f] for s in kw["sample_ids"]) for f in kw["select_fields"]}

    def __len__(self) -> int:
        return len(self.meta_list)


async def add(
    buffer: FakeBuffer, name: str, rewards: list[float], weight: int = 0, masks: list[float] | None = None
) -> None:
    buffer.reserve(weight_version=weight, group_id=name)
    await buffer.commit(name, rewards, masks)


def make_sampler(buffer: FakeBuffer, **options: Any) -> ZeroVarianceSkippingSampler:
    """As NeMo RL's create_sampler builds a custom one: import the target, `cls(buffer, **extra)`."""
    module, _, name = TARGET.partition(":")
    cls = getattr(importlib.import_module(module), name)
    return cls(buffer, **options)  # type: ignore[no-any-return]


def test_implements_the_protocol() -> None:
    sampler = make_sampler(FakeBuffer())
    for member in PROTOCOL:
        assert hasattr(sampler, member), member
    assert asyncio.iscoroutinefunction(sampler.admit) and asyncio.iscoroutinefunction(sampler.select)
    assert asyncio.iscoroutinefunction(sampler.evict) and not sampler.is_on_policy
    assert make_sampler(FakeBuffer(), max_staleness_versions=0).is_on_policy
    with pytest.raises(TypeError, match="unknown option"):
        make_sampler(FakeBuffer(), max_staleness=3)
    sampler.set_dispatch_index(5)
    assert sampler.dispatch_index == 4
    with pytest.raises(ValueError):
        sampler.set_dispatch_index(-1)
    for member in (
        "commit_admission",
        "wait_until_admissible",
        "supports_buffer_checkpoint",
        "restore_dispatch_index",
    ):
        assert not hasattr(sampler, member), f"{member} is not part of NeMo RL's protocol"


def test_uses_only_buffer_members_nemo_rl_has() -> None:
    import ast
    import inspect

    import nemo_gym_prorl.integrations.nemo_rl.sampler as module

    tree = ast.parse(inspect.getsource(module))
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name | ast.Attribute)
        and ast.unparse(node.value) in ("buf", "self._buffer")
    }
    assert used and used <= BUFFER_MEMBERS, used - BUFFER_MEMBERS


async def test_zero_variance_groups_are_evicted_never_selected() -> None:
    buffer = FakeBuffer()
    sampler = make_sampler(buffer)
    await add(buffer, "all1", [1.0, 1.0, 1.0, 1.0])
    await add(buffer, "mixed", [1.0, 0.0, 1.0, 1.0])
    await add(buffer, "all0", [0.0, 0.0, 0.0, 0.0])
    meta, n = await sampler.select(current_train_weight=0, min_prompt_groups=1, max_prompt_groups=3)
    assert n == 1 and meta is not None and meta.sample_ids[0] == "mixed_g0"
    assert len(buffer) == 2  # select does not drop the uniform ones (their permits would leak)
    assert await sampler.evict(current_train_weight=0) == 2  # both reported: 2 permits released
    assert len(buffer) == 0 and sampler.skipped_zero_variance_groups == 2
    assert sorted(buffer.cleared) == sorted(
        [f"all1_g{i}" for i in range(4)] + [f"all0_g{i}" for i in range(4)]
    )
    assert "mixed_g0" not in buffer.cleared  # selected rows stay for the trainer


async def test_select_is_greedy_and_respects_min() -> None:
    buffer = FakeBuffer(with_claim=True)
    sampler = make_sampler(buffer)
    for i in range(3):
        await add(buffer, f"g{i}", [0.0, 1.0])
    assert await sampler.select(current_train_weight=0, min_prompt_groups=4, max_prompt_groups=8) == (None, 0)
    assert len(buffer) == 3
    meta, n = await sampler.select(current_train_weight=0, min_prompt_groups=1, max_prompt_groups=2)
    assert n == 2 and meta is not None and len(meta.sample_ids) == 4
    assert len(buffer) == 1  # the chosen groups left the buffer; their rows stay in the data plane
    with pytest.raises(ValueError):
        await sampler.select(current_train_weight=0, min_prompt_groups=0, max_prompt_groups=1)


async def test_unready_slots_are_left_alone() -> None:
    buffer = FakeBuffer()
    sampler = make_sampler(buffer)
    buffer.reserve(weight_version=0, group_id="inflight")
    assert await sampler.evict(current_train_weight=5) == 0 and len(buffer) == 1
    assert await sampler.select(current_train_weight=0, min_prompt_groups=1, max_prompt_groups=1) == (None, 0)


async def test_windowed_staleness() -> None:
    buffer = FakeBuffer()
    sampler = make_sampler(buffer, max_staleness_versions=1)
    await add(buffer, "old", [0.0, 1.0], weight=0)
    await add(buffer, "new", [0.0, 1.0], weight=2)
    assert await sampler.evict(current_train_weight=2) == 1 and sampler.evicted_stale_groups == 1
    assert sampler.should_abort_inflight(start_weight_version=0, current_train_weight=2)
    assert not sampler.should_abort_inflight(start_weight_version=1, current_train_weight=2)
    meta, n = await sampler.select(current_train_weight=2, min_prompt_groups=1, max_prompt_groups=4)
    assert n == 1 and meta is not None and meta.sample_ids[0] == "new_g0"


async def test_masked_samples_are_ignored_and_std_mode() -> None:
    buffer = FakeBuffer()
    # NeMo RL 7ea279a commits sample_mask as all ones; zeros, where a producer writes them, are honoured.
    await add(buffer, "masked", [1.0, 0.0, 1.0], masks=[1.0, 0.0, 1.0])
    await add(buffer, "noisy", [1.0, 1.0, 0.999])
    exact = make_sampler(buffer)
    assert await exact.evict(current_train_weight=0) == 1 and len(buffer) == 1  # only "masked"
    loose = make_sampler(buffer, uniform_mode="std", uniform_eps=0.01)
    assert await loose.evict(current_train_weight=0) == 1 and len(buffer) == 0


async def test_end_of_data_drains_the_buffer_so_the_controller_can_stop() -> None:
    """NeMo RL's train pump ends the run when the rollout is exhausted, `select` answers (None, 0)
    and the buffer is empty; a buffer still holding uniform groups would instead raise there."""
    buffer = FakeBuffer()
    sampler = make_sampler(buffer)
    await add(buffer, "last_informative", [0.0, 1.0])
    await add(buffer, "last_uniform_a", [1.0, 1.0])
    await add(buffer, "last_uniform_b", [0.0, 0.0])
    await sampler.evict(current_train_weight=0)
    meta, n = await sampler.select(current_train_weight=0, min_prompt_groups=1, max_prompt_groups=4)
    assert n == 1 and meta is not None
    assert await sampler.evict(current_train_weight=0) == 0
    assert await sampler.select(current_train_weight=0, min_prompt_groups=1, max_prompt_groups=4) == (None, 0)
    assert len(buffer) == 0


async def test_rewards_from_tags_need_no_fetch() -> None:
    buffer = FakeBuffer(reward_tags=True)
    sampler = make_sampler(buffer)
    await add(buffer, "u", [1.0, 1.0])
    await add(buffer, "i", [0.0, 1.0])
    assert await sampler.evict(current_train_weight=0) == 1
    assert buffer.fetches == 0
    plain = FakeBuffer()
    sampler = make_sampler(plain)
    await add(plain, "i", [0.0, 1.0])
    await sampler.evict(current_train_weight=0)
    await sampler.evict(current_train_weight=0)
    assert plain.fetches == 1  # judged once per group, then cached


async def simulate(
    policy: str, *, steps: int = 6, groups_per_step: int = 4, capacity: int = 8, seed: int = 1
) -> dict[str, Any]:
    """The single controller's two pumps, reduced to what touches the sampler."""
    rng = random.Random(seed)
    buffer = FakeBuffer()
    sampler = make_sampler(buffer, policy=policy, max_staleness_versions=1)
    assert sampler.required_buffer_capacity(groups_per_step) in (None, groups_per_step * 2)
    permits = asyncio.Semaphore(capacity)
    trainer_version = 0
    trained: list[str] = []
    counter = 0

    async def rollout_pump() -> None:
        nonlocal counter
        while True:
            await sampler.admit(trainer_version_fn=lambda: trainer_version)
            for _ in range(groups_per_step):  # one dispatch batch = one step's prompts
                await permits.acquire()
                counter += 1
                name, start = f"p{counter}", trainer_version
                buffer.reserve(weight_version=start, group_id=name)
                kind = rng.random()  # ~60% uniform
                rewards = [1.0] * 4 if kind < 0.3 else [0.0] * 4 if kind < 0.6 else [0.0, 1.0, 1.0, 0.0]

                async def finish(name: str = name, rewards: list[float] = rewards) -> None:
                    await asyncio.sleep(rng.random() * 0.003)
                    await buffer.commit(name, rewards)

                asyncio.get_running_loop().create_task(finish())

    async def train_pump() -> None:
        nonlocal trainer_version
        for _ in range(steps):
            got = 0
            while got < groups_per_step:
                for _ in range(await sampler.evict(current_train_weight=trainer_version)):
                    permits.release()
                meta, n = await sampler.select(
                    current_train_weight=trainer_version,
                    min_prompt_groups=1,
                    max_prompt_groups=groups_per_step - got,
                )
                if meta is None:
                    await asyncio.sleep(0.001)
                    continue
                for sid in meta.sample_ids[::4]:
                    trained.append(sid.rsplit("_g", 1)[0])
                    rewards = [
                        buffer.rows[sid.rsplit("_g", 1)[0] + f"_g{i}"]["total_reward"] for i in range(4)
                    ]
                    assert len(set(rewards)) > 1, "a zero-variance group reached the trainer"
                for _ in range(n):
                    permits.release()
                got += n
            trainer_version += 1

    producer = asyncio.create_task(rollout_pump())
    try:
        await asyncio.wait_for(train_pump(), timeout=10)
    finally:
        producer.cancel()
        await asyncio.gather(producer, return_exceptions=True)
    return {
        "trained": trained,
        "skipped": sampler.skipped_zero_variance_groups,
        "stale": sampler.evicted_stale_groups,
    }


@pytest.mark.parametrize("policy", ["windowed", "ready_first"])
async def test_pumps_replenish_around_skipped_groups(policy: str) -> None:
    """Every step fills with informative groups although ~60% are uniform: each skipped group
    frees its permit (and, gated, its share of admission), so a replacement is dispatched."""
    out = await simulate(policy)
    assert len(out["trained"]) == 6 * 4 and len(set(out["trained"])) == 24
    assert out["skipped"] >= 12


async def test_ready_first_without_refund_would_deadlock() -> None:
    """Why the gate refunds skipped groups: with the refund switched off the same run stalls."""
    original = ZeroVarianceSkippingSampler._refunded_batches
    ZeroVarianceSkippingSampler._refunded_batches = lambda self: 0  # type: ignore[method-assign]
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(simulate("ready_first", steps=3), timeout=1.0)
    finally:
        ZeroVarianceSkippingSampler._refunded_batches = original  # type: ignore[method-assign]


def test_the_single_controller_recipe_builds_it_as_create_sampler_does() -> None:
    from pathlib import Path

    from nemo_gym_prorl.integrations.nemo_rl.recipe import load_recipe

    recipe = (
        Path(__file__).resolve().parents[3] / "configs" / "nemo_rl" / "dapo_prorl_math_single_controller.yaml"
    )
    cfg = load_recipe(recipe)["async_rl"]["sampler"]
    assert cfg["name"] == "custom" and cfg["target"] == TARGET
    # create_sampler: import "module:ClassName", then cls(buffer, **model_extra) (keys beyond name/target).
    extra = {k: v for k, v in cfg.items() if k not in ("name", "target")}
    module, _, name = cfg["target"].partition(":")
    sampler = getattr(importlib.import_module(module), name)(FakeBuffer(), **extra)
    assert all(hasattr(sampler, member) for member in PROTOCOL)
