# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""DAPO's zero-variance filter as a NeMo RL `PromptGroupSampler` (async single-controller path).

    async_rl:                       # configs/nemo_rl/dapo_prorl_math_single_controller.yaml
      sampler:
        name: custom
        target: nemo_gym_prorl.integrations.nemo_rl.sampler:ZeroVarianceSkippingSampler
        policy: windowed            # or ready_first (gated admission)
        max_staleness_versions: 1
        uniform_mode: all_equal     # NeMo RL's rule (std != 0 keeps a group); or `std` with uniform_eps
        uniform_eps: 0.0

NeMo RL builds it as `create_sampler` builds any custom sampler: import `module:Class`, then
`cls(buffer, **extra_keys)`. NeMo RL's trainer-side dynamic sampling re-rolls whole batches; its
legacy async runner refuses it and the single controller does not read it.
On the single-controller path the sampler decides which prompt groups train, so filtering there
gives DAPO with asynchronous replenishment: every group whose rewards are all equal is
dropped by `evict`, which the controller answers by releasing one buffer-capacity permit per
dropped group, so the rollout pump dispatches a replacement prompt at once. `select` never returns
such a group, also when it was committed after the last `evict` (it stays for the next one: a
group removed by `select` without being reported would leak its capacity permit).

Staleness policies (our own implementations of the two behaviours, not NeMo RL's classes):
- `windowed`: ungated admission (buffer capacity is the gate); selectable and kept while
  `train_weight - max_staleness_versions <= start_weight <= train_weight`; in-flight rollouts
  older than the window are aborted.
- `ready_first`: admission gated to `max_staleness_versions` dispatch batches ahead of the
  trainer, but every skipped group's worth of prompts is refunded to the gate (otherwise a step
  that loses 60% of its groups to the filter could never fill and the gate would deadlock);
  any ready group no newer than the trainer is selectable; nothing goes stale.

Rewards: from `meta.tags[i][reward_field]` when producers stamped them there (NeMo RL at
7ea279a stamps only `weight_version`), else fetched once per group from the data plane
(`get_samples` of `total_reward`, plus `sample_mask` when the group has it) through the buffer's
`_call_dp`, the only data-plane handle a sampler receives. Masking: at 7ea279a the single
controller commits `sample_mask` as all ones (a Gym `mask_sample` flag does not reach it), and
sync GRPO computes baselines over all samples, masked ones included; so in practice every
sample's reward counts here too. Only members of NeMo RL 7ea279a's `PromptGroupSampler`
protocol are implemented, and only `TQReplayBuffer` members it has are used (`meta_list`,
`start_weight_list`, `ready_list`, `remove`, `_call_dp`). At the end of the data `select`
returns `(None, 0)` and the controller ends the run when the buffer is drained.

What was and was not run: NeMo RL cannot be installed here (PyPI holds a 0.0.0 placeholder).
`tests/integrations/nemo_rl/test_sampler.py` runs this class against a stand-in buffer and
KV meta with the members of `TQReplayBuffer` / `KVBatchMeta` at NeMo RL 7ea279a, and the train
pump of `single_controller._train_pump` there, including a simulated rollout pump and train pump
with the controller's capacity accounting. It has NOT been run inside a real NeMo RL
single-controller job, against a real data plane, or on GPUs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Literal

from nemo_gym_prorl.pipeline.groups import UniformRule

_GATE_POLL_S = 0.005  # as NeMo RL's gated samplers poll the trainer version


def _group_key(meta: Any) -> str:
    # sample_ids are "{group_id}_g{i}": the first one names the group for as long as it lives.
    return str(meta.sample_ids[0]) if meta.sample_ids else f"id:{id(meta)}"


def _as_list(values: Any) -> list[float]:
    if hasattr(values, "tolist"):
        values = values.tolist()
    return [float(v[0] if isinstance(v, list | tuple) else v) for v in values]


class ZeroVarianceSkippingSampler:
    """A `PromptGroupSampler` that never trains on a zero-variance group (see module doc)."""

    def __init__(
        self,
        buffer: Any,
        *,
        policy: Literal["windowed", "ready_first"] = "windowed",
        max_staleness_versions: int = 1,
        sample_freshest_first: bool = False,
        uniform_mode: Literal["all_equal", "std"] = "all_equal",
        uniform_eps: float = 0.0,
        reward_field: str = "total_reward",
        mask_field: str = "sample_mask",
        **unknown: Any,
    ) -> None:
        if unknown:
            raise TypeError(f"ZeroVarianceSkippingSampler: unknown option(s) {sorted(unknown)}")
        if policy not in ("windowed", "ready_first"):
            raise ValueError(f"policy must be 'windowed' or 'ready_first', got {policy!r}")
        if max_staleness_versions < 0:
            raise ValueError(f"max_staleness_versions must be non-negative, got {max_staleness_versions}")
        self._buffer = buffer
        self.policy = policy
        self.max_staleness_versions = max_staleness_versions
        self.sample_freshest_first = sample_freshest_first
        self.rule = UniformRule(mode=uniform_mode, eps=uniform_eps)
        self.reward_field = reward_field
        self.mask_field = mask_field
        self._verdicts: dict[str, bool] = {}  # group key -> informative?
        self._dispatch_index = -1
        self._groups_per_step: int | None = None
        self.skipped_zero_variance_groups = 0
        self.evicted_stale_groups = 0

    # -- derived facts ------------------------------------------------------------------------
    @property
    def is_on_policy(self) -> bool:
        return self.max_staleness_versions == 0

    def required_buffer_capacity(self, groups_per_step: int) -> int | None:
        # The controller asks once at setup with num_prompts_per_step: the gate's refund unit.
        self._groups_per_step = groups_per_step
        if self.policy == "ready_first":
            return groups_per_step * (self.max_staleness_versions + 1)
        return None

    @property
    def dispatch_index(self) -> int:
        return self._dispatch_index

    def set_dispatch_index(self, resume_from_trainer_version: int) -> None:
        if resume_from_trainer_version < 0:
            raise ValueError(
                f"resume_from_trainer_version must be non-negative, got {resume_from_trainer_version}"
            )
        self._dispatch_index = resume_from_trainer_version - 1

    # -- rollout-pump side ----------------------------------------------------------------------
    def _refunded_batches(self) -> int:
        if not self._groups_per_step:
            return 0
        return self.skipped_zero_variance_groups // self._groups_per_step

    def _gate_closed(self, trainer_version: int) -> bool:
        ahead = self._dispatch_index - self._refunded_batches()
        return ahead >= trainer_version + self.max_staleness_versions

    async def _wait_admissible(self, trainer_version_fn: Callable[[], int]) -> None:
        if self.policy != "ready_first":
            return  # windowed: buffer capacity is the only gate
        # Polled, as the protocol documents: the trainer version is read through a callable.
        while self._gate_closed(trainer_version_fn()):  # noqa: ASYNC110
            await asyncio.sleep(_GATE_POLL_S)

    def _commit_admission(self) -> int | None:
        if self.policy == "ready_first":
            self._dispatch_index += 1
        return None  # never stamps target steps

    async def admit(self, *, trainer_version_fn: Callable[[], int]) -> int | None:
        await self._wait_admissible(trainer_version_fn)
        return self._commit_admission()

    def should_abort_inflight(self, *, start_weight_version: int, current_train_weight: int) -> bool:
        if self.policy != "windowed":
            return False
        return start_weight_version < max(0, current_train_weight - self.max_staleness_versions)

    # -- train-pump side ------------------------------------------------------------------------
    def _selectable_weight(self, weight: int, current: int) -> bool:
        if self.policy == "windowed":
            return max(0, current - self.max_staleness_versions) <= weight <= current
        return weight <= current

    async def evict(self, *, current_train_weight: int) -> int:
        """Drop ready groups that can never train: zero-variance ones (always) and, for
        `windowed`, those below the staleness window. Their data-plane rows are cleared; the
        return value counts both kinds, so the controller releases a capacity permit for each."""
        await self._judge_ready()
        buf = self._buffer
        floor = max(0, current_train_weight - self.max_staleness_versions)
        drop: list[int] = []
        zero = stale = 0
        # No await between computing indices and `remove`: they cannot shift underneath us.
        for i, (meta, weight, ready) in enumerate(
            zip(buf.meta_list, buf.start_weight_list, buf.ready_list, strict=True)
        ):
            if not ready or meta is None:
                continue  # reserved, not committed: a commit may be filling it right now
            if self._verdicts.get(_group_key(meta)) is False:
                drop.append(i)
                zero += 1
            elif self.policy == "windowed" and weight < floor:
                drop.append(i)
                stale += 1
        if not drop:
            return 0
        for i in drop:
            self._verdicts.pop(_group_key(buf.meta_list[i]), None)
        removed = int(await buf.remove(drop, remove_in_dp=True))
        self.skipped_zero_variance_groups += zero
        self.evicted_stale_groups += stale
        return removed

    async def select(
        self, *, current_train_weight: int, min_prompt_groups: int, max_prompt_groups: int
    ) -> tuple[Any | None, int]:
        """Greedy, never waiting: all selectable informative groups up to `max_prompt_groups`,
        or `(None, 0)` below `min_prompt_groups`; the chosen groups leave the buffer (their
        rows stay in the data plane for the trainer)."""
        if min_prompt_groups < 1:
            raise ValueError(f"min_prompt_groups must be >= 1, got {min_prompt_groups}")
        if max_prompt_groups < min_prompt_groups:
            raise ValueError(
                f"max_prompt_groups ({max_prompt_groups}) must be >= min_prompt_groups ({min_prompt_groups})"
            )
        await self._judge_ready()
        buf = self._buffer
        valid = [
            i
            for i, (meta, weight, ready) in enumerate(
                zip(buf.meta_list, buf.start_weight_list, buf.ready_list, strict=True)
            )
            if ready
            and meta is not None
            and self._selectable_weight(weight, current_train_weight)
            and self._verdicts.get(_group_key(meta)) is True
        ]
        if self.sample_freshest_first:
            valid.sort(key=lambda i: (current_train_weight - buf.start_weight_list[i], i))
        if len(valid) < min_prompt_groups:
            return None, 0
        chosen = valid[:max_prompt_groups]
        metas = [buf.meta_list[i] for i in chosen]
        merged = metas[0].concat(*metas[1:])
        for meta in metas:
            self._verdicts.pop(_group_key(meta), None)
        await buf.remove(chosen, remove_in_dp=False)
        return merged, len(chosen)

    # -- rewards ----------------------------------------------------------------------------------
    async def _judge_ready(self) -> None:
        buf = self._buffer
        alive: set[str] = set()
        todo = []
        for meta, ready in zip(buf.meta_list, buf.ready_list, strict=True):
            if meta is None:
                continue
            key = _group_key(meta)
            alive.add(key)
            if ready and key not in self._verdicts:
                todo.append((key, meta))
        for key in [k for k in self._verdicts if k not in alive]:
            del self._verdicts[key]  # removed by someone else (post-train cleanup, remove_group)
        if not todo:
            return
        rewards = await asyncio.gather(*(self._rewards(meta) for _, meta in todo))
        for (key, _), values in zip(todo, rewards, strict=True):
            self._verdicts[key] = not self.rule.is_uniform(values)

    async def _rewards(self, meta: Any) -> list[float]:
        """The group's valid (unmasked) rewards."""
        tags: Sequence[dict[str, Any]] | None = getattr(meta, "tags", None)
        if tags and all(self.reward_field in t for t in tags):
            rewards = [float(t[self.reward_field]) for t in tags]
            masks = [float(t.get(self.mask_field, 1.0)) for t in tags]
        else:
            call = getattr(self._buffer, "_call_dp", None)
            if call is None:
                raise RuntimeError(
                    f"cannot read rewards of group {_group_key(meta)}: no `{self.reward_field}` tags "
                    "and the buffer exposes no data-plane access (_call_dp)"
                )
            fields = [self.reward_field]
            has_mask = bool(meta.fields) and self.mask_field in meta.fields
            if has_mask:
                fields.append(self.mask_field)
            data = await call(
                "get_samples",
                sample_ids=list(meta.sample_ids),
                partition_id=meta.partition_id,
                select_fields=fields,
            )
            rewards = _as_list(data[self.reward_field])
            masks = _as_list(data[self.mask_field]) if has_mask else [1.0] * len(rewards)
        return [r for r, m in zip(rewards, masks, strict=True) if m != 0.0]
