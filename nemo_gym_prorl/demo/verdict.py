"""Whether a demo run succeeded, as an exit status and the reasons behind it.

A demo that prints a table but exits 0 after every rollout broke would let CI pass on a broken
system. The run fails when no rollout completed, when any trajectory breaks NeMo RL's contract,
when every sample of some domain ended in an infrastructure error (a sandbox, a server or an
evaluator failing, as opposed to the model answering wrongly), or when every completed rollout
ended in a model error (a harness's format errors: the policy never acted, so nothing was shown).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from nemo_gym_prorl.demo.report import Rollout
from nemo_gym_prorl.pipeline.groups import infrastructure_failure
from nemo_gym_prorl.pipeline.job import JobState


@dataclass
class Verdict:
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def judge(rollouts: Sequence[Rollout], contract_problems: Sequence[str], domains: Sequence[str]) -> Verdict:
    """The demo's verdict over every rollout it collected (informative or not)."""
    verdict = Verdict()
    if not any(r.result.state is JobState.DONE for r in rollouts):
        verdict.failures.append(f"no rollout completed ({len(rollouts)} collected)")
    if contract_problems:
        shown = "; ".join(contract_problems[:3])
        more = f" (and {len(contract_problems) - 3} more)" if len(contract_problems) > 3 else ""
        verdict.failures.append(f"{len(contract_problems)} NeMo RL contract violation(s): {shown}{more}")
    done = [r for r in rollouts if r.result.state is JobState.DONE]
    stops = [r.result.trajectory.stop_reason if r.result.trajectory else None for r in done]
    if done and all(stop == "model_error" for stop in stops):
        verdict.failures.append(
            f"every one of {len(done)} completed rollouts ended in a model error (the policy never wrote an "
            "action the agent could run; a harness needs a policy trained in its format: `--policy`)"
        )
    by_domain: dict[str, list[str | None]] = defaultdict(list)
    for rollout in rollouts:
        by_domain[rollout.domain].append(infrastructure_failure(rollout.result))
    for domain in domains:
        reasons = by_domain.get(domain, [])
        if not reasons:
            verdict.failures.append(f"{domain}: no rollout came back")
        elif all(reasons):
            verdict.failures.append(
                f"{domain}: every one of {len(reasons)} samples ended in an infrastructure error "
                f"(first: {reasons[0]})"
            )
    return verdict
