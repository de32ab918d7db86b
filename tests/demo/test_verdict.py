"""The demo's exit status: it fails, saying why, when the run did not really work."""

from __future__ import annotations

from nemo_gym_prorl.demo.report import Rollout
from nemo_gym_prorl.demo.verdict import judge
from nemo_gym_prorl.pipeline.job import JobResult, JobState, Trajectory

DOMAINS = ("math", "code")


def rollout(
    domain: str, *, state: JobState = JobState.DONE, reward: float | None = 1.0, **extra: object
) -> Rollout:
    result = JobResult(id="j", task=f"prorl_{domain}", state=state, submitted_at=0.0, reward=reward, **extra)
    return Rollout(domain=domain, informative_group=True, result=result, row={})


def test_a_healthy_run_passes() -> None:
    verdict = judge([rollout("math"), rollout("code", reward=0.0)], [], DOMAINS)
    assert verdict.ok and verdict.exit_code == 0 and verdict.failures == []


def test_no_completed_rollout_fails() -> None:
    failed = {"state": JobState.FAILED, "reward": None, "critical_error": "init"}
    verdict = judge([rollout("math", **failed), rollout("code", **failed)], [], DOMAINS)
    assert verdict.exit_code == 1
    assert any(f.startswith("no rollout completed") for f in verdict.failures)


def test_a_contract_violation_fails_and_is_quoted() -> None:
    verdict = judge([rollout("math"), rollout("code")], ["turn 2: prompt does not extend turn 1"], DOMAINS)
    assert verdict.exit_code == 1
    assert verdict.failures == ["1 NeMo RL contract violation(s): turn 2: prompt does not extend turn 1"]


def test_a_domain_whose_every_sample_hit_infrastructure_errors_fails() -> None:
    masked = {
        "report": {"reason": "infrastructure_error", "detail": "tests did not run", "mask_sample": True}
    }
    verdict = judge([rollout("math"), rollout("code", **masked), rollout("code", **masked)], [], DOMAINS)
    assert verdict.exit_code == 1
    assert len(verdict.failures) == 1
    assert verdict.failures[0].startswith("code: every one of 2 samples ended in an infrastructure error")
    assert "tests did not run" in verdict.failures[0]


def test_one_infrastructure_error_among_good_samples_is_not_a_failure() -> None:
    masked = {"report": {"reason": "infrastructure_error", "mask_sample": True}}
    assert judge([rollout("math"), rollout("code", **masked), rollout("code")], [], DOMAINS).ok


def test_a_domain_with_no_rollout_at_all_fails() -> None:
    verdict = judge([rollout("math")], [], DOMAINS)
    assert verdict.failures == ["code: no rollout came back"]


def test_a_run_whose_every_rollout_was_a_model_error_fails() -> None:
    # A harness answering every reply with a format error: the rollouts completed, reward 0,
    # and nothing was shown.
    error = {"reward": 0.0, "trajectory": Trajectory(stop_reason="model_error")}
    verdict = judge([rollout("math", **error), rollout("code", **error)], [], DOMAINS)
    assert verdict.exit_code == 1
    assert verdict.failures[0].startswith("every one of 2 completed rollouts ended in a model error")


def test_one_model_error_among_acting_rollouts_is_not_a_failure() -> None:
    error = {"reward": 0.0, "trajectory": Trajectory(stop_reason="model_error")}
    acted = {"reward": 1.0, "trajectory": Trajectory(stop_reason="submitted")}
    assert judge([rollout("math", **error), rollout("code", **acted)], [], DOMAINS).ok
