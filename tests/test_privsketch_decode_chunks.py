"""Decode-first PrivSketch collectors over several dynamically scheduled chunks of users
(4096 per chunk): counts equal a numpy argmin reference for every thread count and
backend, and the first invalid ordering matrix is found exactly wherever it sits (chunk
edges included), with a later invalid one never winning.

Shapes: K = 3, M = 5 takes the scalar loops on every backend; K = 4 with K*M in {64, 512}
(the paper's K = 4, M = 128 among them) takes the AVX-512 loops (bit-mask permutation
check, 8 candidates per step) on that backend, with enough candidates per cell that
buckets fill several steps and end in partial ones; K = 4, M = 5 (K*M = 20, not a
multiple of 64) must fall back to the scalar loops there."""

import numpy as np
import pytest

from ldpfast import _core

N = 3 * 4096 + 77
SHAPES = [(3, 5, 30), (4, 5, 30), (4, 16, 600), (4, 128, 600)]  # K, M, candidates


@pytest.fixture(params=SHAPES, ids=lambda s: f"K{s[0]}M{s[1]}")
def shape(request):
    return request.param


def batch(seed, K, M, n_cand):
    gen = np.random.default_rng(seed)
    order = np.argsort(gen.random((N, K * M)), axis=1).astype(np.uint16).reshape(N, K, M)
    cand_cells = (np.arange(K)[None, :] * M + gen.integers(0, M, (n_cand, K))).astype(np.uint16)
    return gen, order, cand_cells


def buckets(cand_cells, KM):
    K = cand_cells.shape[1]
    flat = cand_cells.reshape(-1)
    owner = np.repeat(np.arange(len(cand_cells)), K)
    by_cell = np.argsort(flat, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=KM))]).astype(np.int64)
    return offsets, owner[by_cell].astype(np.uint32), np.ascontiguousarray(cand_cells[owner[by_cell]])


def argmin_cells(order, cand_cells):
    """(N, n_cand): the cell of each candidate with the lowest rank, 2048 users at a time."""
    flat = order.reshape(N, -1)
    cols = np.arange(len(cand_cells))[None, :]
    return np.concatenate([cand_cells[cols, flat[b:b + 2048][:, cand_cells].argmin(axis=2)]
                           for b in range(0, N, 2048)])


def test_decode_cell_equals_reference_all_threads(backend, shape):
    K, M, n_cand = shape
    gen, order, cand_cells = batch(1, K, M, n_cand)
    cell = gen.integers(0, K * M, N).astype(np.uint32)
    bits = gen.choice(np.array([-1, 1], np.int8), N)
    offsets, bucket_cand, bucket_cells = buckets(cand_cells, K * M)
    hit = argmin_cells(order, cand_cells) == cell[:, None]  # argmin cell is the sampled one
    pos_ref = (hit & (bits[:, None] > 0)).sum(axis=0)
    neg_ref = (hit & (bits[:, None] < 0)).sum(axis=0)
    assert pos_ref.sum() > 0 and neg_ref.sum() > 0
    for threads in (1, 2, 3, 7):
        pos, neg, bad = _core.privsketch_decode_cell(K, M, order, cell, bits, offsets, bucket_cand, bucket_cells,
                                                     n_cand, threads)
        assert bad == N
        np.testing.assert_array_equal(pos, pos_ref)
        np.testing.assert_array_equal(neg, neg_ref)


def test_decode_full_equals_reference_all_threads(backend, shape):
    K, M, n_cand = shape
    gen, order, cand_cells = batch(2, K, M, n_cand)
    bits = gen.choice(np.array([-1, 1], np.int8), (N, K * M))
    up = np.take_along_axis(bits, argmin_cells(order, cand_cells).astype(np.int64), axis=1) > 0
    for threads in (1, 2, 3):
        pos, neg, bad = _core.privsketch_decode_full(K, M, order, bits, cand_cells, threads)
        assert bad == N
        np.testing.assert_array_equal(pos, up.sum(axis=0))
        np.testing.assert_array_equal(neg, (~up).sum(axis=0))


@pytest.mark.parametrize("position", [0, 4095, 4096, 8191, 2 * 4096 + 5, N - 1])
@pytest.mark.parametrize("flaw", ["duplicate", "too_large", "last_word_missing"])
def test_first_invalid_order_found_in_any_chunk(backend, shape, position, flaw):
    """A duplicate (one rank twice, another missing), a rank = K*M (the rest distinct), or
    the largest rank replaced by a copy of rank 0 (only the top bit of the rank set is
    missing) is found by both collectors."""
    K, M, n_cand = shape
    KM = K * M
    gen, order, cand_cells = batch(3, K, M, n_cand)
    flat = order.reshape(N, KM)
    if flaw == "duplicate":
        flat[position, 7] = flat[position, 2]
    elif flaw == "too_large":
        flat[position, flat[position].argmax()] = KM
    else:
        flat[position, flat[position].argmax()] = 0
    later = min(N - 1, position + 4096)
    if later != position:
        flat[later, 0] = flat[later, 1]
    bits = np.ones((N, KM), np.int8)
    cell = gen.integers(0, KM, N).astype(np.uint32)
    offsets, bucket_cand, bucket_cells = buckets(cand_cells, KM)
    for threads in (1, 2, 3):
        assert _core.privsketch_decode_full(K, M, order, bits, cand_cells, threads)[2] == position
        assert _core.privsketch_decode_cell(K, M, order, cell, bits[:, 0].copy(), offsets, bucket_cand, bucket_cells,
                                            n_cand, threads)[2] == position
