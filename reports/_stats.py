"""Interval estimates and paired tests: pure functions over plain numbers and arrays, no I/O.

Each is tested against an independent reference on hand-built data (tests/reports/test_stats.py):
scipy's binomial test and Wilson interval, a brute-force bootstrap, and clustered standard errors
computed by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

N_BOOT = 10_000
SEED = 20_240_101  # fixed: a report or a gate run twice on the same rows says the same thing


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Wilson score interval for a proportion; (None, None) when nothing was counted.

    Wilson rather than the normal approximation because suites are small and rates sit near 0 or 1,
    where p ± z·se leaves [0, 1] or collapses to a point."""
    if n <= 0:
        return None, None
    z = _z(confidence)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _binom_tail(x: int, n: int) -> float:
    """P(X >= x) for X ~ Binomial(n, 1/2), exactly (integers until the last division)."""
    return sum(math.comb(n, i) for i in range(max(x, 0), n + 1)) / 2**n


def mcnemar_exact(worse: int, better: int, alternative: str = "two-sided") -> float:
    """Exact McNemar test on the discordant pairs: ``worse`` sessions where A failed and B passed,
    ``better`` where A passed and B failed. Under H0 each discordant session goes either way with
    probability 1/2. ``alternative="a-worse"`` is the one-sided p of A being worse than B."""
    n = worse + better
    if n == 0:
        return 1.0
    if alternative == "a-worse":
        return _binom_tail(worse, n)
    if alternative != "two-sided":
        raise ValueError(f"unknown alternative {alternative!r}")
    return min(1.0, 2 * _binom_tail(max(worse, better), n))


def bootstrap_ci(
    groups: Sequence[np.ndarray],
    stat: Callable[[np.ndarray], float] = np.mean,
    *,
    n_boot: int = 2_000,
    confidence: float = 0.95,
    seed: int = SEED,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap over sessions: ``groups`` holds one array of values per session (a session
    with several samples, or none, is resampled whole, so its rows stay together). Replicates whose
    resampled sessions hold no value are left out."""
    groups = [np.asarray(g, dtype=float) for g in groups]
    if not any(len(g) for g in groups):
        return None, None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(groups), size=(n_boot, len(groups)))
    stats = []
    for row in picks:
        values = np.concatenate([groups[i] for i in row])
        if len(values):
            stats.append(stat(values))
    lo, hi = np.quantile(stats, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


@dataclass(frozen=True)
class PairedDiff:
    """Mean per-session difference A − B, its percentile interval, and bootstrap p-values."""

    n: int
    diff: float
    lo: float
    hi: float
    p_two_sided: float
    replicates: np.ndarray  # the bootstrap means, for one-sided questions (non-inferiority)

    def p_worse_than(self, margin: float) -> float:
        """One-sided p of "A is worse than B by more than ``margin``" (higher is better): the share
        of replicates in which A is not that much worse."""
        return float(np.mean(self.replicates >= -margin))


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_boot: int = N_BOOT,
    confidence: float = 0.95,
    seed: int = SEED,
) -> PairedDiff:
    """Paired bootstrap over sessions: ``a[i]`` and ``b[i]`` are one session's values under two
    arms; sessions are resampled with replacement and the mean difference recomputed each time."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if len(d) == 0:
        raise ValueError("no paired sessions")
    rng = np.random.default_rng(seed)
    reps = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    lo, hi = np.quantile(reps, [(1 - confidence) / 2, (1 + confidence) / 2])
    p = min(1.0, 2 * min(float(np.mean(reps <= 0)), float(np.mean(reps >= 0))))
    return PairedDiff(len(d), float(d.mean()), float(lo), float(hi), p, reps)


@dataclass(frozen=True)
class ClusteredSE:
    """The standard error of a mean of outcomes, with observations grouped into clusters."""

    mean: float
    se: float | None  # None: fewer than two clusters, where no between-cluster spread is seen
    n: int  # observations
    clusters: int


def cluster_se(values: Sequence[float], clusters: Sequence[object]) -> ClusteredSE:
    """The mean of ``values`` and its cluster-robust standard error (CR1, Liang-Zeger with the
    small-sample factor G/(G-1) that Stata's ``vce(cluster)`` and statsmodels' ``cov_type="cluster"``
    apply), observations with equal ``clusters`` keys forming one cluster.

    For a mean (a regression on a constant) the sandwich reduces to
    ``V = G/(G-1) * sum_g (sum_{i in g} (y_i - mean))^2 / N^2``: the residual sums of whole
    clusters, so correlated outcomes within a cluster widen it. Every observation its own cluster
    gives the usual ``s/sqrt(N)`` (sample variance). Written here rather than taken from statsmodels,
    which is not a dependency of the gate and would fit a whole OLS model for these few lines.

    One cluster: the residuals of the only cluster sum to zero, so the formula gives 0, which would
    claim certainty; ``se`` is None instead. ValueError for no values or unequal lengths."""
    y = np.asarray(values, dtype=float)
    if len(y) != len(clusters):
        raise ValueError(f"{len(y)} values but {len(clusters)} cluster keys")
    if len(y) == 0:
        raise ValueError("no values")
    mean = float(y.mean())
    sums: dict[object, float] = {}
    for key, r in zip(clusters, y - mean):
        sums[key] = sums.get(key, 0.0) + float(r)
    g = len(sums)
    if g < 2:
        return ClusteredSE(mean, None, len(y), g)
    v = g / (g - 1) * sum(s * s for s in sums.values()) / len(y) ** 2
    return ClusteredSE(mean, math.sqrt(v), len(y), g)


def mde(se: float | None, alpha: float, power: float = 0.8) -> float | None:
    """Minimum detectable effect of a one-sided z-test at level ``alpha`` with ``power``: the true
    difference that such a test, with standard error ``se``, detects with that probability,
    ``(z_{1-alpha} + z_{power}) * se``. None where ``se`` is None or 0 (nothing varied: no size
    can be read from it)."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be between 0 and 1 (got {alpha}, {power})")
    if not se:
        return None
    nd = NormalDist()
    return (nd.inv_cdf(1 - alpha) + nd.inv_cdf(power)) * se
