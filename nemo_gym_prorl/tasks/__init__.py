"""Task domains (math, STEM, code, SWE): workspace setup, tools offered, evaluators. See `base.py`
for the contract the pipeline and the agent use."""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.tasks.base import (
    EvalOutcome,
    TaskDomain,
    final_text_from_messages,
    final_text_from_response,
)

DOMAIN_CLASSES = {
    "math": "nemo_gym_prorl.tasks.math:MathTask",
    "stem": "nemo_gym_prorl.tasks.stem:StemTask",
    "code": "nemo_gym_prorl.tasks.code:CodeTask",
    "swe": "nemo_gym_prorl.tasks.swe:SweTask",
}


def make_task(name: str, **kwargs: Any) -> TaskDomain:
    """A domain by name (`math`, `stem`, `code`, `swe`); kwargs go to its constructor (config=...)."""
    import importlib

    module, _, cls = DOMAIN_CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)


__all__ = ["DOMAIN_CLASSES", "EvalOutcome", "TaskDomain", "final_text_from_messages", "final_text_from_response",
           "make_task"]  # fmt: skip
