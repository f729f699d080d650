"""Decode-first PrivSketch collectors over several dynamically scheduled chunks of users
(4096 per chunk): counts equal a numpy argmin reference for every thread count and
backend, and the first invalid ordering matrix is found exactly wherever it sits (chunk
edges included), with a later invalid one never winning."""

import numpy as np
import pytest

from ldpfast import _core

K, M = 3, 5
KM = K * M
N = 3 * 4096 + 77


def batch(seed, n_cand=30):
    gen = np.random.default_rng(seed)
    order = np.argsort(gen.random((N, KM)), axis=1).astype(np.uint16).reshape(N, K, M)
    cand_cells = (np.arange(K)[None, :] * M + gen.integers(0, M, (n_cand, K))).astype(np.uint16)
    return gen, order, cand_cells


def ranks_of_candidates(order, cand_cells):
    flat = order.reshape(N, KM)
    return flat[:, cand_cells]  # (N, n_cand, K)


def test_decode_cell_equals_reference_all_threads(backend):
    gen, order, cand_cells = batch(1)
    n_cand = len(cand_cells)
    cell = gen.integers(0, KM, N).astype(np.uint32)
    bits = gen.choice(np.array([-1, 1], np.int8), N)
    flat = cand_cells.reshape(-1)
    owner = np.repeat(np.arange(n_cand), K)
    by_cell = np.argsort(flat, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=KM))]).astype(np.int64)
    bucket_cand = owner[by_cell].astype(np.uint32)
    bucket_cells = np.ascontiguousarray(cand_cells[owner[by_cell]])
    ranks = ranks_of_candidates(order, cand_cells)
    kstar = ranks.argmin(axis=2)                                           # (N, n_cand)
    hit = cand_cells[np.arange(n_cand)[None, :], kstar] == cell[:, None]   # argmin cell is the sampled one
    pos_ref = (hit & (bits[:, None] > 0)).sum(axis=0)
    neg_ref = (hit & (bits[:, None] < 0)).sum(axis=0)
    assert pos_ref.sum() > 0 and neg_ref.sum() > 0
    for threads in (1, 2, 3, 7):
        pos, neg, bad = _core.privsketch_decode_cell(K, M, order, cell, bits, offsets, bucket_cand, bucket_cells,
                                                     n_cand, threads)
        assert bad == N
        np.testing.assert_array_equal(pos, pos_ref)
        np.testing.assert_array_equal(neg, neg_ref)


def test_decode_full_equals_reference_all_threads(backend):
    gen, order, cand_cells = batch(2)
    bits = gen.choice(np.array([-1, 1], np.int8), (N, KM))
    ranks = ranks_of_candidates(order, cand_cells)
    best = cand_cells[np.arange(len(cand_cells))[None, :], ranks.argmin(axis=2)]  # (N, n_cand) cells
    up = np.take_along_axis(bits, best.astype(np.int64), axis=1) > 0
    for threads in (1, 2, 3):
        pos, neg, bad = _core.privsketch_decode_full(K, M, order, bits, cand_cells, threads)
        assert bad == N
        np.testing.assert_array_equal(pos, up.sum(axis=0))
        np.testing.assert_array_equal(neg, (~up).sum(axis=0))


@pytest.mark.parametrize("position", [0, 4095, 4096, 8191, 2 * 4096 + 5, N - 1])
@pytest.mark.parametrize("flaw", ["duplicate", "too_large"])
def test_first_invalid_order_found_in_any_chunk(backend, position, flaw):
    _, order, cand_cells = batch(3)
    bits = np.ones((N, KM), np.int8)
    flat = order.reshape(N, KM)
    if flaw == "duplicate":
        flat[position, 7] = flat[position, 2]      # one rank twice, another missing
    else:
        flat[position, flat[position].argmax()] = KM  # out of range (the rest distinct)
    later = min(N - 1, position + 4096)
    if later != position:
        flat[later, 0] = flat[later, 1]
    for threads in (1, 2, 3):
        assert _core.privsketch_decode_full(K, M, order, bits, cand_cells, threads)[2] == position
