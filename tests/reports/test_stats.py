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
