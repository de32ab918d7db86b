# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""95% intervals for rewards: one policy's mean reward, and the paired gain of one policy over
another on the same tasks.

Rewards here are mostly 0/1 and often all 0 (a base model) or nearly all 1 (a trained family), so
a normal-approximation (Wald) interval would read [0.00, 0.00] at 0/64 and claim certainty it
does not have. Both intervals stay valid at 0 and 1:

- a mean reward in [0, 1]: Wilson's score interval. For 0/1 rewards it is the textbook interval;
  for rewards anywhere in [0, 1] it is conservative, since such a variable's variance is at most
  p(1 - p), the Bernoulli variance Wilson assumes.
- a paired gain (after - before, task by task) of 0/1 rewards: Newcombe's hybrid score interval
  for paired proportions (Newcombe 1998, method 10), which combines the two Wilson intervals with
  the pairs' correlation. Rewards that are not all 0/1 get a paired bootstrap of the mean
  difference (percentile, fixed seed: the same data give the same interval).

Pure Python and pydantic: the project venv and the trainers' model venv both import it.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

from pydantic import BaseModel

# Two-sided 95% normal quantile.
Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 4000


class Interval(BaseModel):
    """A mean (or a mean difference) with its 95% interval and how that was computed."""

    mean: float
    low: float
    high: float
    n: int
    method: str = "wilson"

    @classmethod
    def of(cls, values: Sequence[float]) -> Interval:
        """The mean of `values` with its 95% interval: Wilson's for values in [0, 1] (rewards),
        the normal approximation otherwise."""
        if not values:
            return cls(mean=math.nan, low=math.nan, high=math.nan, n=0, method="none")
        n = len(values)
        mean = statistics.fmean(values)
        if all(0.0 <= v <= 1.0 for v in values):
            low, high = wilson(mean, n)
            return cls._rounded(mean, low, high, n, "wilson")
        half = Z95 * statistics.stdev(values) / math.sqrt(n) if n > 1 else math.inf
        return cls._rounded(mean, mean - half, mean + half, n, "normal")

    @classmethod
    def _rounded(cls, mean: float, low: float, high: float, n: int, method: str) -> Interval:
        return cls(mean=round(mean, 4), low=round(low, 4), high=round(high, 4), n=n, method=method)

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def text(self, signed: bool = False) -> str:
        fmt = "+.2f" if signed else ".2f"
        return f"{self.mean:{fmt}} [{self.low:{fmt}}, {self.high:{fmt}}]"


def wilson(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion `p` observed over `n` trials."""
    if n <= 0:
        return (0.0, 1.0)
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_gain(before: Sequence[float], after: Sequence[float]) -> Interval:
    """The mean of `after[i] - before[i]` with its 95% interval (the pairs are the same tasks)."""
    if len(before) != len(after):
        raise ValueError(f"paired samples differ in length: {len(before)} and {len(after)}")
    n = len(before)
    if n == 0:
        return Interval(mean=math.nan, low=math.nan, high=math.nan, n=0, method="none")
    if all(v in (0.0, 1.0) for v in (*before, *after)):
        return _newcombe_paired(before, after)
    return _bootstrap_paired(before, after)


def _newcombe_paired(before: Sequence[float], after: Sequence[float]) -> Interval:
    n = len(before)
    both = sum(1 for b, a in zip(before, after, strict=True) if b == 1 and a == 1)
    lost = sum(1 for b, a in zip(before, after, strict=True) if b == 1 and a == 0)
    gained = sum(1 for b, a in zip(before, after, strict=True) if b == 0 and a == 1)
    neither = n - both - lost - gained
    p_after, p_before = (both + gained) / n, (both + lost) / n
    low_a, high_a = wilson(p_after, n)
    low_b, high_b = wilson(p_before, n)
    margins = (both + lost) * (gained + neither) * (both + gained) * (lost + neither)
    phi = (both * neither - lost * gained) / math.sqrt(margins) if margins > 0 else 0.0
    d_a_low, d_a_high = p_after - low_a, high_a - p_after
    d_b_low, d_b_high = p_before - low_b, high_b - p_before
    below = math.sqrt(max(0.0, d_a_low**2 - 2 * phi * d_a_low * d_b_high + d_b_high**2))
    above = math.sqrt(max(0.0, d_a_high**2 - 2 * phi * d_a_high * d_b_low + d_b_low**2))
    gain = p_after - p_before
    return Interval._rounded(gain, max(-1.0, gain - below), min(1.0, gain + above), n, "newcombe_paired")


def _bootstrap_paired(before: Sequence[float], after: Sequence[float]) -> Interval:
    diffs = [a - b for b, a in zip(before, after, strict=True)]
    n = len(diffs)
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(BOOTSTRAP_RESAMPLES))
    low = means[int(0.025 * BOOTSTRAP_RESAMPLES)]
    high = means[int(0.975 * BOOTSTRAP_RESAMPLES) - 1]
    return Interval._rounded(statistics.fmean(diffs), low, high, n, "paired_bootstrap")
