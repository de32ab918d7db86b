"""Gym prepare script (`gym eval prepare`): this environment's validation rows, from the Hub or `source`."""

from pathlib import Path

from nemo_gym_prorl.datasets.prepare import prepare_split


def prepare(source: str | None = None, limit: int | None = None) -> Path:
    return prepare_split("r2e_gym", "validation", source, limit=limit)
