"""The ordering matrix breaks LDP (SPEC 5.4): the collector recovers single-item users'
items from O alone, ignoring the randomized-response bit entirely."""

import warnings

import numpy as np
from scipy import stats

from ldpfast.protocols.sets import privsketch as ps

from ldpfast.protocols.sets import privsketch_ldp


def test_ordering_matrix_reveals_single_items():
    d, n = 2000, 600
    params = ps.PrivSketchParams.create(epsilon=0.1, d=d, seed=21)     # small eps: the RR bit says almost nothing
    items = np.random.default_rng(22).integers(0, d, n)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reports = ps.PrivSketchClient(params, rng=23).perturb([[x] for x in items])
    assert any(issubclass(w.category, ps.PrivacyWarning) for w in caught)

    # Attack: score(x) = min_k O[k, H_k(x)]; members score >= g0, others (bar K-fold
    # collisions) score < g0. Guess the best-scoring item (ties: smallest id).
    cells = params.cells(np.arange(d)).astype(np.int64)                       # (d, K)
    flat = reports.order.reshape(n, -1).astype(np.int64)
    scores = flat[:, cells].min(axis=2)                                        # (n, d)
    guesses = scores.argmax(axis=1)
    correct = int((guesses == items).sum())

    # Under the null "the report carries no information about the item", each guess is
    # right with probability 1/d; this many hits has binomial tail probability < 1e-300.
    assert stats.binom.sf(correct - 1, n, 1.0 / d) < 1e-100
    # A false guess needs another item colliding with x in all K = 4 rows (about
    # d / M^K = 7e-6 such items per user), so recovery is essentially perfect.
    assert correct >= 0.99 * n


def test_ldp_safe_variant_sends_no_ordering_matrix():
    params = privsketch_ldp.SafeParams.create(epsilon=1.0, d=50, seed=1)
    reports = privsketch_ldp.SafeClient(params, rng=2).perturb([[3], [4]])
    assert set(reports.columns()) == {"k", "m", "bit"}
