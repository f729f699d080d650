"""Moment checks shared by the statistical tests: each assertion fails with probability
ALPHA when the closed form is right (the sample mean by the normal approximation, the
sample variance by a chi-square whose degrees of freedom are corrected for the excess
kurtosis of the per-run estimate)."""

import math

from scipy import stats

ALPHA = 5e-9
Z = stats.norm.isf(ALPHA / 2)  # 5.84


def check_mean(samples, expected, variance):
    sd = math.sqrt(variance / samples.size)
    assert abs(samples.mean() - expected) < Z * sd, (samples.mean(), expected, sd)


def check_variance(samples, variance, excess_kurtosis):
    runs = samples.size
    nu = 2 / (2 / (runs - 1) + excess_kurtosis / runs)
    lo, hi = stats.chi2.ppf(ALPHA / 2, nu) / nu, stats.chi2.isf(ALPHA / 2, nu) / nu
    s2 = samples.var(ddof=1)
    assert lo * variance < s2 < hi * variance, (s2, variance, lo, hi)
