# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The GRPO phase of `prorl train`, as a program in the model venv:

    python -m nemo_gym_prorl.integrations.trl.grpo JOB.json      (a `GrpoJob`)

TRL's `GRPOTrainer` (no vLLM of its own) trains the LoRA on groups the rollout service runs
(`ServiceRollout`) and publishes the policy after every optimizer step (`PublishPolicyCallback`;
full weights by default, `publish_as`), so each step's rollouts come from the policy the trainer
holds. A group whose task has a program-written demonstration in the job's `guides` runs one
rollout fewer and gets the demonstration as its last member (off-policy guidance of rehearsal
groups; `ServiceRollout`). Every step prints a `step`
event once the trainer has logged it: the step's loss, the rollouts' reward, informative groups,
tool use, staleness, policy versions and why any was masked (`RolloutStats`), the
trainer-vs-rollout log-prob mismatch (`MeasuredGRPOTrainer`), and where the time went. A step
none of whose groups can teach (every trained sample of each group scored the same) trains and
publishes nothing and its event says `skipped`, why (`no_teach`). The
trainer computes its log-probs at the temperature the rollouts were sampled at (the job's
`sampling_params`, which `GrpoJob` holds to what the trainer can compute). With
`simulated_step_s` the optimizer step is replaced by a sleep (a GPU step's stand-in, for the
overlap benchmark): the rollouts are real, the training is SIMULATED.
"""

from __future__ import annotations

import json
import time
from typing import Any

from nemo_gym_prorl.integrations.trl.client import ServiceClient
from nemo_gym_prorl.integrations.trl.fields import EMPTY_SLOT, TrlSample, guide_sample
from nemo_gym_prorl.integrations.trl.jobs import GrpoJob, emit, load_job, use_cpu
from nemo_gym_prorl.integrations.trl.no_vllm import hide_vllm
from nemo_gym_prorl.integrations.trl.rollout import ServiceRollout, prompt_column, split_groups
from nemo_gym_prorl.rollouts.delivery import OFF_CHAIN, harness_delivery
from nemo_gym_prorl.rollouts.results import ServiceResult, scored_reward
from nemo_gym_prorl.rollouts.stats import RolloutStats


def read_rows(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def step_prompts(job: GrpoJob, prompts: list[str]) -> list[str]:
    """The prompts of every step in order (`steps * prompts_per_step`, cycling the rows)."""
    if not prompts:
        raise ValueError(f"{job.prompts} holds no task instance")
    needed = job.steps * job.prompts_per_step
    return [prompts[i % len(prompts)] for i in range(needed)]


def token_delivery(stats: RolloutStats, rollout: ServiceRollout) -> tuple[float | None, dict[str, float]]:
    """Of the tokens the policy generated in the step's scored rollouts, the share that reached
    the trainer in a sample, and the rest by why not: a rollout masked whole (its sample's mask
    reason, e.g. a harness that broke the token chain), or tokens of a delivered rollout that no
    sample holds (replies off Gym's delivered chain). The shares add up to 1."""
    if not stats.generated_tokens:
        return None, {}
    samples: dict[str, list[TrlSample]] = {}
    for sample in rollout.last_samples:
        if sample.origin is None:
            samples.setdefault(sample.rollout_id, []).append(sample)
    delivered = 0
    undelivered: dict[str, int] = {}
    for result in (ServiceResult.model_validate(r) for r in rollout.last_results):
        if scored_reward(result) is None or result.trajectory is None:
            continue  # not scored: not in the step's generated tokens either
        mine = samples.get(result.id, [])
        got = sum(s.model_tokens for s in mine if not s.mask_sample)
        delivered += got
        rest = result.trajectory.generated_tokens - got
        if rest > 0:
            masks = [s.mask_reason for s in mine if s.mask_sample and s.mask_reason not in (None, EMPTY_SLOT)]
            delivery = harness_delivery(result.trajectory.harness)
            why = (masks[0] if masks and not got else None) or (OFF_CHAIN if delivery else "in no sample")
            key = str(why).split(":")[0]
            undelivered[key] = undelivered.get(key, 0) + rest
    total = stats.generated_tokens
    return round(delivered / total, 4), {k: round(v / total, 4) for k, v in sorted(undelivered.items())}


def staleness_at_update(stats: RolloutStats, updated_version: int) -> int | None:
    """How many versions the policy a step updates is ahead of the oldest policy its rollouts
    used. The service judges a rollout's staleness when it finishes; a rollout collected ahead
    finishes before the previous step publishes, and is one version old when it is trained on."""
    return updated_version - min(stats.policy_versions) if stats.policy_versions else None


def rollout_fields(stats: RolloutStats, rollout: ServiceRollout, updated_version: int) -> dict[str, Any]:
    delivered, undelivered = token_delivery(stats, rollout)
    return {
        "rollouts": stats.rollouts,
        "masked": stats.masked,
        "reward": stats.mean_reward,
        "informative_groups": stats.informative_groups,
        "teaching_groups": rollout.last_teaching_groups,
        "groups": stats.groups,
        "tool_calls": stats.tool_calls_per_rollout,
        "turns": stats.turns_per_rollout,
        "generated_tokens": stats.generated_tokens,
        "policy_versions": stats.policy_versions,
        "staleness": stats.max_staleness,
        "staleness_at_update": staleness_at_update(stats, updated_version),
        "stale": stats.stale,
        "unversioned": stats.unversioned,
        "stop_reasons": stats.stop_reasons,
        "mask_reasons": stats.mask_reasons,
        "merged_share": stats.merged_share,
        "delivered_share": delivered,
        "undelivered_shares": undelivered,
        "guided_groups": rollout.last_guided,
        "rollout_s": round(rollout.last_seconds, 2),
        "rollout_tokens_per_s": round(stats.generated_tokens / max(rollout.last_seconds, 1e-9), 1),
    }


def simulate(job: GrpoJob, prompts: list[str], rollout: ServiceRollout) -> None:
    """Real rollouts, SIMULATED optimizer steps (a sleep of `simulated_step_s`; no update)."""
    started = time.monotonic()
    size = job.num_generations * job.segment_slots
    for step in range(job.steps):
        t0 = time.monotonic()
        heads = prompts[step * job.prompts_per_step : (step + 1) * job.prompts_per_step]
        results = rollout.collect(split_groups([p for p in heads for _ in range(size)], size), step=step)
        stats = RolloutStats.of(results)
        assert job.simulated_step_s is not None
        time.sleep(job.simulated_step_s)
        emit(
            "step",
            step=step + 1,
            simulated=True,
            train_s=job.simulated_step_s,
            step_s=round(time.monotonic() - t0, 2),
            **rollout_fields(stats, rollout, job.version_offset),  # a sleep publishes nothing
        )
    emit(
        "done",
        seconds=round(time.monotonic() - started, 2),
        ahead_hits=rollout.ahead_hits,
        ahead_misses=rollout.ahead_misses,
    )


def grpo_config(job: GrpoJob) -> Any:
    """TRL's `GRPOConfig` for the job: its optimizer and loss, the temperature its rollouts are
    sampled at (TRL divides the logits by it when it computes log-probs), and its device."""
    from trl import GRPOConfig

    samples_per_step = job.prompts_per_step * job.num_generations * job.segment_slots
    if samples_per_step % job.optimizer.batch_size:
        raise ValueError(
            f"{samples_per_step} samples per step do not split into batches of {job.optimizer.batch_size}"
        )
    return GRPOConfig(
        output_dir=job.output_dir,
        use_vllm=False,
        num_generations=job.num_generations * job.segment_slots,  # TRL's group: every rollout's slots
        per_device_train_batch_size=job.optimizer.batch_size,
        gradient_accumulation_steps=samples_per_step // job.optimizer.batch_size,
        max_steps=job.steps,
        learning_rate=job.optimizer.learning_rate,
        weight_decay=job.optimizer.weight_decay,
        max_grad_norm=job.optimizer.max_grad_norm,
        lr_scheduler_type="constant",
        loss_type=job.loss_type,
        beta=job.beta,
        epsilon=job.epsilon,
        epsilon_high=job.epsilon_high,
        temperature=float(job.sampling_params["temperature"]),
        top_p=float(job.sampling_params["top_p"]),
        bf16=False,
        gradient_checkpointing=False,
        use_cpu=use_cpu(job.device),
        report_to="none",
        save_strategy="no",
        logging_steps=1,  # every step's loss is logged, and its step event waits for it
        shuffle_dataset=False,
        seed=job.optimizer.seed,
        disable_tqdm=True,
    )


def service_rollout(job: GrpoJob, prompts: list[str], client: ServiceClient) -> ServiceRollout:
    """The `rollout_func`: every rollout sampled with the job's sampling settings."""
    return ServiceRollout(
        client,
        task=job.task,
        slots=job.segment_slots,
        sampling_params=job.sampling_params,
        timeout_s=job.rollout_timeout_s,
        ahead=prompts if job.collect_ahead else None,
        journal=job.journal,
        guides={str(row["task_id"]): guide_sample(row) for row in read_rows(job.guides)}
        if job.guides
        else None,
        skip_uninformative=True,  # the trainer below trains and publishes nothing for such a step
    )


def train(job: GrpoJob, prompts: list[str], rollout: ServiceRollout, client: ServiceClient) -> Any:
    """Trains the job's steps; returns the trainer."""
    import torch
    from datasets import Dataset
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from nemo_gym_prorl.integrations.trl.callback import PublishPolicyCallback
    from nemo_gym_prorl.integrations.trl.mismatch import MeasuredGRPOTrainer
    from nemo_gym_prorl.integrations.trl.no_teach import SkipsStepsThatTeachNothing
    from nemo_gym_prorl.integrations.trl.reward import service_reward

    class Trainer(SkipsStepsThatTeachNothing, MeasuredGRPOTrainer):
        """Measures each step's log-prob mismatch; a step with nothing to teach trains nothing."""

    torch.manual_seed(job.optimizer.seed)
    args = grpo_config(job)
    tokenizer = AutoTokenizer.from_pretrained(job.model_dir)
    model: Any = AutoModelForCausalLM.from_pretrained(job.model_dir, dtype=torch.float32)
    peft_config = None
    if job.init_adapter:
        model = PeftModel.from_pretrained(model, job.init_adapter, is_trainable=True)
    else:
        peft_config = job.lora.peft_config()
    publisher = PublishPolicyCallback(
        job.output_dir,
        client=client,
        version_offset=job.version_offset,
        form=job.publish_as,
        model_dir=job.model_dir,
        skip=lambda: rollout.last_skip is not None,
    )

    class StepEvents(TrainerCallback):
        """One `step` event per optimizer step, after the publish, carrying that step's loss.

        The Trainer calls `on_step_end` before it logs the step's loss, so the step's record is
        kept until `on_log` brings the loss; a step that is never logged is still reported (with
        no loss) when training ends, so no published version goes unannounced. A step with
        nothing to teach is reported `skipped`, with no version, loss or mismatch: it trained and
        published nothing."""

        pending: dict[str, Any] | None = None
        skipped: list[int] = []
        current = job.version_offset  # the policy the next step updates: the last one published

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.monotonic()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            step_s = time.monotonic() - self.started
            rollout.settle()  # the publisher (the callback before this one) has published this step
            stats = RolloutStats.of(rollout.last_results)
            mismatch = trainer.take_mismatch()
            step = int(state.global_step)
            if job.samples_path:
                write_samples(job.samples_path, step, rollout)
            train_s = step_s - rollout.last_seconds - publisher.last_seconds
            self.flush()
            timing = {"train_s": round(train_s, 2), "step_s": round(step_s, 2)}
            if rollout.last_skip is not None:
                self.skipped = [*self.skipped, step]
                self.pending = dict(
                    step=step,
                    skipped=rollout.last_skip,
                    **rollout_fields(stats, rollout, self.current),
                    loss=None,
                    publish_s=0.0,
                    **timing,
                )
                return
            published = publisher.published[-1] if publisher.published else None
            self.pending = dict(
                step=step,
                **{
                    "adapter_path": None,
                    **(published.fields() if published else {}),
                    "version": job.version_offset + step,
                },
                **rollout_fields(stats, rollout, self.current),
                mismatch=mismatch.model_dump(),
                loss=None,
                publish_s=round(publisher.last_seconds, 2),
                train_tokens_per_s=round(
                    sum(len(s.prompt_ids) + len(s.completion_ids) for s in rollout.last_samples)
                    / max(train_s, 1e-9),
                    1,
                ),
                **timing,
            )
            self.current = job.version_offset + step

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if self.pending and logs and "loss" in logs and self.pending["step"] == int(state.global_step):
                if "skipped" not in self.pending:  # a skipped step's logged 0.0 is no loss
                    self.pending["loss"] = float(logs["loss"])
                self.flush()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.flush()

        def flush(self) -> None:
            if self.pending is not None:
                emit("step", **self.pending)
                self.pending = None

    events = StepEvents()
    trainer = Trainer(
        model=model,
        reward_funcs=[service_reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
        peft_config=peft_config,
        rollout_func=rollout,
        callbacks=[publisher, events],
    )
    started = time.monotonic()
    trainer.train()
    emit(
        "done",
        seconds=round(time.monotonic() - started, 2),
        published=[p.fields() for p in publisher.published],
        skipped_steps=events.skipped,
        ahead_hits=rollout.ahead_hits,
        ahead_misses=rollout.ahead_misses,
        carried_over=rollout.carried_over,
    )
    return trainer


def write_samples(path: str, step: int, rollout: ServiceRollout) -> None:
    """Append a step's samples, each with the policy versions its rollout used."""
    versions = {r["id"]: r.get("policy_versions", []) for r in rollout.last_results}
    with open(path, "a", encoding="utf-8") as handle:
        for sample in rollout.last_samples:
            record = {
                "step": step,
                "policy_versions": versions.get(sample.rollout_id, []),
                **sample.model_dump(),
            }
            handle.write(json.dumps(record) + "\n")


def main() -> None:
    hide_vllm()  # before TRL is imported: this trainer generates through the service only
    job: GrpoJob = load_job(GrpoJob)
    if job.threads:
        import torch

        torch.set_num_threads(job.threads)
    prompts = step_prompts(job, prompt_column(read_rows(job.prompts)))
    client = ServiceClient(job.service_url, token=job.token, timeout_s=120)
    rollout = service_rollout(job, prompts, client)
    try:
        if job.simulated_step_s is not None:
            simulate(job, prompts, rollout)
        else:
            train(job, prompts, rollout, client)
    finally:
        rollout.close()
        client.close()


if __name__ == "__main__":
    main()
