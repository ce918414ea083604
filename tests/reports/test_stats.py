"""reports._stats against independent references on hand-built data: scipy's exact binomial test
(McNemar is a binomial test on the discordant pairs) and its Wilson interval, and bootstraps
computed by brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binomtest

from reports import _stats


@pytest.mark.parametrize(
    "k,n", [(0, 10), (3, 10), (10, 10), (1, 1), (7, 14), (13, 14), (0, 1), (50, 164)]
)
def test_wilson_matches_scipy(k, n):
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = _stats.wilson(k, n)
    assert lo == pytest.approx(ref.low, abs=1e-12)
    assert hi == pytest.approx(ref.high, abs=1e-12)


def test_wilson_by_hand_and_empty():
    # 5 of 10: centre 0.5, half-width 1.96*sqrt(.025 + 1.96²/400)/(1 + 1.96²/10) = 0.2634
    lo, hi = _stats.wilson(5, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    assert _stats.wilson(0, 0) == (None, None)


@pytest.mark.parametrize(
    "worse,better", [(0, 0), (0, 5), (5, 0), (3, 7), (7, 3), (10, 10), (1, 12), (14, 0), (40, 25)]
)
def test_exact_mcnemar_is_the_binomial_test_on_discordant_pairs(worse, better):
    n = worse + better
    two = binomtest(worse, n, 0.5).pvalue if n else 1.0
    one = binomtest(worse, n, 0.5, alternative="greater").pvalue if n else 1.0
    assert _stats.mcnemar_exact(worse, better) == pytest.approx(two, rel=1e-12)
    assert _stats.mcnemar_exact(worse, better, "a-worse") == pytest.approx(one, rel=1e-12)


def test_mcnemar_by_hand():
    assert _stats.mcnemar_exact(14, 0) == pytest.approx(
        2 / 2**14
    )  # noop vs oracle on the bundled suite
    assert _stats.mcnemar_exact(14, 0, "a-worse") == pytest.approx(1 / 2**14)
    with pytest.raises(ValueError):
        _stats.mcnemar_exact(1, 1, "sideways")


def test_paired_bootstrap_equals_a_brute_force_loop_with_the_same_seed():
    a = np.array([1, 1, 0, 1, 0, 1, 1, 0, 1, 1], dtype=float)
    b = np.array([1, 0, 0, 0, 0, 1, 0, 0, 1, 0], dtype=float)
    got = _stats.paired_bootstrap(a, b, n_boot=2000, seed=7)
    rng = np.random.default_rng(7)
    picks = rng.integers(0, len(a), size=(2000, len(a)))
    means = []
    for row in picks:  # one replicate at a time, no vectorisation
        means.append(sum(a[i] - b[i] for i in row) / len(row))
    means.sort()
    assert got.diff == pytest.approx(0.4)
    assert (got.lo, got.hi) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    assert got.p_two_sided == pytest.approx(
        min(1.0, 2 * min(np.mean(np.array(means) <= 0), np.mean(np.array(means) >= 0)))
    )


def test_paired_bootstrap_approaches_the_exact_bootstrap_distribution():
    # Every one of the 6^6 resamples of six paired differences, enumerated: the exact bootstrap.
    d = np.array([1.0, 0.0, 0.0, -1.0, 1.0, 1.0])
    exact = np.sort([d[list(ix)].mean() for ix in itertools.product(range(6), repeat=6)])
    got = _stats.paired_bootstrap(d, np.zeros(6), n_boot=20_000)
    assert got.lo == pytest.approx(np.quantile(exact, 0.025), abs=1 / 6 + 1e-9)
    assert got.hi == pytest.approx(np.quantile(exact, 0.975), abs=1 / 6 + 1e-9)
    assert got.p_worse_than(0.5) == pytest.approx(np.mean(exact >= -0.5), abs=0.01)
    assert got.p_worse_than(0.0) == pytest.approx(np.mean(exact >= 0.0), abs=0.01)


def test_bootstrap_over_sessions_keeps_a_sessions_samples_together():
    groups = [np.array([1.0, 3.0]), np.array([10.0]), np.array([]), np.array([4.0, 4.0, 4.0])]
    lo, hi = _stats.bootstrap_ci(groups, np.mean, n_boot=500, seed=3)
    rng = np.random.default_rng(3)
    stats = []
    for row in rng.integers(0, 4, size=(500, 4)):
        values = [x for i in row for x in groups[i]]
        if values:
            stats.append(sum(values) / len(values))
    assert (lo, hi) == pytest.approx(tuple(np.quantile(stats, [0.025, 0.975])))
    assert _stats.bootstrap_ci([np.array([]), np.array([])]) == (None, None)


def test_identical_arms_have_no_difference():
    got = _stats.paired_bootstrap([1, 0, 1], [1, 0, 1])
    assert (got.diff, got.lo, got.hi, got.p_two_sided, got.p_worse_than(0)) == (0, 0, 0, 1.0, 1.0)


def test_clustered_se_by_hand():
    # Two projects of three sessions, one all green, one all red. Mean 0.5, residuals ±0.5, so the
    # cluster sums are +1.5 and -1.5: V = G/(G-1) * (1.5² + 1.5²) / N² = 2 * 4.5 / 36 = 0.25.
    y, projects = [1, 1, 1, 0, 0, 0], ["a", "a", "a", "b", "b", "b"]
    got = _stats.cluster_se(y, projects)
    assert (got.mean, got.se, got.n, got.clusters) == (0.5, pytest.approx(0.5), 6, 2)
    # Each session its own cluster: the usual s/sqrt(N), s² = 6 * 0.25 / 5 = 0.3, so sqrt(0.05).
    alone = _stats.cluster_se(y, range(6))
    assert alone.se == pytest.approx(0.05**0.5)
    assert alone.se == pytest.approx(np.std(y, ddof=1) / np.sqrt(6))
    # Three uneven clusters: sums +0.5 (a: .5 .5 -.5), 0 (b: .5 -.5), -0.5 (c): 3/2 * 0.5 / 36.
    mixed = _stats.cluster_se([1, 1, 0, 1, 0, 0], ["a", "a", "a", "b", "b", "c"])
    assert mixed.se == pytest.approx((1.5 * 0.5 / 36) ** 0.5)
    assert mixed.clusters == 3


def test_clustered_se_is_the_cr1_sandwich():
    """The same numbers as the general CR1 sandwich of an OLS fit on a constant, written out with
    matrices: (G/(G-1)) ((N-1)/(N-K)) (X'X)^-1 (sum_g X_g' e_g e_g' X_g) (X'X)^-1."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 40).astype(float)
    groups = rng.integers(0, 7, 40)
    x = np.ones((40, 1))
    e = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
    bread = np.linalg.inv(x.T @ x)
    meat = sum(
        np.outer(x[groups == g].T @ e[groups == g], x[groups == g].T @ e[groups == g])
        for g in np.unique(groups)
    )
    n_g = len(np.unique(groups))
    v = n_g / (n_g - 1) * (40 - 1) / (40 - 1) * bread @ meat @ bread
    assert _stats.cluster_se(y, groups).se == pytest.approx(float(np.sqrt(v[0, 0])), rel=1e-12)


def test_clustered_se_edge_cases():
    one = _stats.cluster_se([1, 0, 1, 1], ["p"] * 4)  # one project: no spread between projects
    assert (one.mean, one.se, one.clusters) == (0.75, None, 1)
    same = _stats.cluster_se([1, 1, 1, 1], ["a", "a", "b", "b"])  # every outcome equal
    assert same.se == 0.0
    equal = _stats.cluster_se([1, 0, 1, 0], ["a", "a", "b", "b"])  # clusters alike: no spread
    assert equal.se == 0.0
    with pytest.raises(ValueError, match="no values"):
        _stats.cluster_se([], [])
    with pytest.raises(ValueError, match="2 values but 3"):
        _stats.cluster_se([1, 0], ["a", "b", "c"])


def test_minimum_detectable_effect_by_hand():
    # one-sided 5% and 80% power: z = 1.6449 + 0.8416 = 2.4865 standard errors
    assert _stats.mde(0.1, 0.05) == pytest.approx(0.24865, abs=1e-4)
    assert _stats.mde(0.1, 0.01) == pytest.approx((2.3263 + 0.8416) * 0.1, abs=1e-4)
    assert _stats.mde(None, 0.05) is None and _stats.mde(0.0, 0.05) is None
    with pytest.raises(ValueError):
        _stats.mde(0.1, 1.5)
