"""Fast Walsh-Hadamard transform: every backend against independent references.

Float tolerances. Every output of the length-n transform is a sum of n terms +-x_c,
computed through a tree of L = log2(n) roundings, so with unit roundoff u
    |computed - exact| <= gamma_L(u) * sum|x|,   gamma_k(u) = k u / (1 - k u)
(Higham, Accuracy and Stability of Numerical Algorithms, Lemma 3.1 / eq. 4.3). A
reference computed in precision u_ref by a tree of depth L (or a recursive sum of n
terms) adds gamma_L(u_ref) (or gamma_{n-1}(u_ref)) times sum|x|. These are worst-case
bounds: the tests cannot fail by chance, while any wrong sign or index is off by O(|x|).
"""

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ldpfast
from ldpfast import _core
from ldpfast.errors import DTypeError, ParameterError
from ldpfast.kernels import fwht

DTYPES = (np.float32, np.float64, np.int64)
MATRIX_LOG_SIZES = range(1, 13)     # naive O(n^2) reference
FAST_LOG_SIZES = range(13, 21)      # O(n log n) reference
ALL_LOG_SIZES = range(1, 21)
# np.longdouble is the x87 80-bit format on x86-64 Linux (u = 2^-64); where it is plain
# double the bounds below still hold, with u = 2^-53.
UNIT_ROUNDOFF = {np.float32: 2.0**-24, np.float64: 2.0**-53,
                 np.longdouble: float(np.finfo(np.longdouble).epsneg)}


def gamma(k, u):
    return k * u / (1 - k * u)


@functools.lru_cache(maxsize=1)
def hadamard_int8(n_max=2**12):
    """H[r, c] = (-1)^popcount(r & c) (SPEC 3.1); H_n is the top-left n x n block."""
    idx = np.arange(n_max, dtype=np.uint16)
    parity = idx[:, None] & idx[None, :]
    for shift in (8, 4, 2, 1):
        parity ^= parity >> shift
    return (1 - 2 * (parity & 1)).astype(np.int8)


def matrix_reference(x, out_dtype):
    """Naive product H x, computed in out_dtype, 512 rows of H at a time."""
    n = x.shape[-1]
    h = hadamard_int8()[:n, :n]
    xs = x.astype(out_dtype)
    return np.concatenate([h[r:r + 512].astype(out_dtype) @ xs for r in range(0, n, 512)])


def butterfly_reference(x, dtype):
    """Textbook FWHT with numpy reshapes (stages h = 1, 2, 4, ...), computed in dtype."""
    y = x.astype(dtype, copy=True)
    n = y.shape[-1]
    h = 1
    while h < n:
        v = y.reshape(-1, n // (2 * h), 2, h)
        a, b = v[:, :, 0, :].copy(), v[:, :, 1, :]
        v[:, :, 0, :] += b
        b[...] = a - b
        h *= 2
    return y


def sample(dtype, n, seed, rows=None, bound=1000):
    rng = np.random.default_rng([seed, n])
    shape = (n,) if rows is None else (rows, n)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-bound, bound + 1, size=shape, dtype=np.int64)
    return (rng.standard_normal(shape) * rng.uniform(0.5, 2.0)).astype(dtype)


@functools.lru_cache(maxsize=None)
def fast_case(dtype, log_n):
    """Input and an independent higher-precision (exact for int64) reference, shared by
    all backends. float32 -> float64 reference, float64 -> long double reference."""
    x = sample(dtype, 2**log_n, seed=log_n)
    ref_dtype = {np.float32: np.float64, np.float64: np.longdouble, np.int64: np.int64}[dtype]
    return x, butterfly_reference(x, ref_dtype), ref_dtype


def assert_within_bound(got, ref, x, dtype, ref_error):
    """|got - ref| <= (gamma_L(u) + ref_error) * sum|x| elementwise, in long double."""
    n = x.shape[-1]
    scale = np.abs(x.astype(np.longdouble)).sum(axis=-1, keepdims=True)
    tol = (gamma(math.log2(n), UNIT_ROUNDOFF[dtype]) + ref_error) * scale
    err = np.abs(got.astype(np.longdouble) - ref.astype(np.longdouble))
    worst = float(np.max(err / tol))
    assert worst <= 1.0, f"n={n} {np.dtype(dtype).name}: error reaches {worst:.3g} x the bound"


# ---------------------------------------------------------------------------------------
# Correctness against references


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_matches_naive_matrix_product(backend, dtype):
    for log_n in MATRIX_LOG_SIZES:
        n = 2**log_n
        x = sample(dtype, n, seed=100 + log_n)
        got = fwht(x.copy())
        if dtype == np.int64:
            np.testing.assert_array_equal(got, matrix_reference(x, np.int64), err_msg=f"n={n}")
            continue
        # Reference in float64: recursive summation of n terms, error <= gamma_{n-1}(2^-53).
        assert_within_bound(got, matrix_reference(x, np.float64), x, dtype,
                            gamma(n - 1, UNIT_ROUNDOFF[np.float64]))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_matches_higher_precision_butterfly(backend, dtype):
    for log_n in FAST_LOG_SIZES if dtype == np.int64 else ALL_LOG_SIZES:
        x, ref, ref_dtype = fast_case(dtype, log_n)
        got = fwht(x.copy())
        if dtype == np.int64:
            np.testing.assert_array_equal(got, ref, err_msg=f"n={2**log_n}")
        else:
            assert_within_bound(got, ref, x, dtype, gamma(log_n, UNIT_ROUNDOFF[ref_dtype]))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_bit_identical_to_scalar_and_textbook_order(backend, dtype):
    """All backends apply the same butterflies in the same order: results equal the
    scalar backend and the same-precision textbook butterfly bit for bit (floats too)."""
    for log_n in list(ALL_LOG_SIZES) + [22]:
        x = sample(dtype, 2**log_n, seed=200 + log_n)
        got = fwht(x.copy())
        ldpfast.set_backend("scalar")
        try:
            scalar = fwht(x.copy())
        finally:
            ldpfast.set_backend(backend)
        assert got.tobytes() == scalar.tobytes(), f"n=2^{log_n} differs from scalar"
        if log_n <= 20:
            assert got.tobytes() == butterfly_reference(x, dtype).tobytes(), f"n=2^{log_n}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_special_values_same_as_scalar(backend, dtype):
    """inf, -inf, NaN and -0.0 inputs: the same outputs as the scalar backend; only the
    sign/payload bits of NaN outputs may differ (the fused a - b may pick another NaN)."""
    int_view = np.uint32 if dtype == np.float32 else np.uint64
    for log_n in (3, 5, 10, 14):
        x = sample(dtype, 2**log_n, seed=900 + log_n)
        x[[1, 5]] = [np.inf, -0.0]
        x[-1] = -np.inf
        x[2**log_n // 2] = np.nan if log_n > 3 else x[2**log_n // 2]
        got = fwht(x.copy())
        ldpfast.set_backend("scalar")
        try:
            scalar = fwht(x.copy())
        finally:
            ldpfast.set_backend(backend)
        nan = np.isnan(scalar)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(int_view), scalar[~nan].view(int_view))


def test_int64_exact_at_range_limit_and_wraps_beyond(backend):
    """Exact while max|x| * n < 2^63; beyond, arithmetic is modulo 2^64 on every backend."""
    for log_n in (1, 5, 9, 13, 17, 20):
        n = 2**log_n
        limit = (2**63 - 1) // n
        x = sample(np.int64, n, seed=300 + log_n, bound=limit)
        x[0] = limit
        got = fwht(x.copy())
        assert int(got[0]) == sum(int(v) for v in x)
        np.testing.assert_array_equal(got, butterfly_reference(x, np.int64))
        big = sample(np.int64, n, seed=400 + log_n, bound=2**62)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(fwht(big.copy()), butterfly_reference(big, np.int64))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_involution_h_h_equals_n(backend, dtype):
    """H(Hx) = n x. Floats: the first pass errs by e <= gamma_L sum|x| per output, H e by
    <= n gamma_L sum|x|, the second pass by gamma_L (n sum|x| + n gamma_L sum|x|): in
    total (2 gamma_L + gamma_L^2) n sum|x|."""
    for log_n in range(1, 19, 3):
        n = 2**log_n
        x = sample(dtype, n, seed=500 + log_n)
        twice = fwht(fwht(x.copy()))
        if dtype == np.int64:
            np.testing.assert_array_equal(twice, n * x)
            continue
        g = gamma(log_n, UNIT_ROUNDOFF[dtype])
        tol = (2 * g + g * g) * n * np.abs(x.astype(np.float64)).sum()
        assert np.max(np.abs(twice.astype(np.float64) - n * x.astype(np.float64))) <= tol


# Integer inputs whose partial sums (at most 128 * max|x|) are all exactly representable:
# float64 2^47 < 2^53, float32 2^17 < 2^24, int64 2^47 < 2^63.
EXACT_INPUT_BOUND = {"int64": 2**40, "float64": 2**40, "float32": 2**10}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(EXACT_INPUT_BOUND)).flatmap(lambda dtype: st.tuples(
    st.just(dtype), st.integers(1, 7).flatmap(lambda k: st.lists(
        st.lists(st.integers(-EXACT_INPUT_BOUND[dtype], EXACT_INPUT_BOUND[dtype]),
                 min_size=2**k, max_size=2**k), min_size=1, max_size=3)))))
def test_property_exact_python_reference(case):
    """Rows of integers (as int64, or as floats where every partial sum is exact) against
    the definition H[r, c] = (-1)^popcount(r & c), summed with Python integers."""
    dtype, rows = case
    x = np.array(rows, dtype=dtype)
    n = x.shape[1]
    expected = [[sum(v if bin(r & c).count("1") % 2 == 0 else -v for c, v in enumerate(row))
                 for r in range(n)] for row in rows]
    np.testing.assert_array_equal(fwht(x), np.array(expected, dtype=dtype))


# ---------------------------------------------------------------------------------------
# Batches, threads, in place


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_batched_rows_equal_single_rows(backend, dtype):
    for log_n in (1, 3, 4, 7, 10, 13, 16):
        x = sample(dtype, 2**log_n, seed=600 + log_n, rows=5)
        batch = fwht(x.copy())
        for r in range(x.shape[0]):
            assert batch[r].tobytes() == fwht(x[r].copy()).tobytes(), f"n=2^{log_n} row {r}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 2**18), (1, 2**21), (2, 2**19), (3, 2**18), (3, 2**12),
                                   (40, 2**12), (9, 2**16), (1, 8)], ids=str)
def test_thread_counts_bit_identical(backend, dtype, shape):
    """Long rows are split into blocks and column ranges, many rows across threads; every
    thread count (0 = default) gives the same bytes."""
    x = sample(dtype, shape[1], seed=700 + shape[0], rows=shape[0])
    results = {t: fwht(x.copy(), threads=t).tobytes() for t in (1, 2, 3, 16, 0, np.int64(2))}
    assert len(set(results.values())) == 1
    assert results[1] == fwht(x[0].copy(), threads=1).tobytes() + b"".join(
        fwht(x[r].copy(), threads=1).tobytes() for r in range(1, shape[0]))


def test_in_place_no_copy_and_neighbours_untouched():
    base = sample(np.float64, 64, seed=800, rows=6)
    view = base[2:4]                      # C-contiguous view into base
    before = base.copy()
    out = fwht(view)
    assert out is view
    assert np.shares_memory(out, base)
    np.testing.assert_array_equal(base[:2], before[:2])
    np.testing.assert_array_equal(base[4:], before[4:])
    np.testing.assert_array_equal(base[2:4], butterfly_reference(before[2:4], np.float64))
    empty = np.zeros((0, 16), dtype=np.float32)
    assert fwht(empty) is empty


def test_releases_the_gil():
    """Another Python thread runs while a single long transform is in C++ (without the
    release it could run at most once or twice, at the call boundary)."""
    import threading
    import time

    x = np.zeros((2, 2**22), dtype=np.float64)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)

    previous = _core.active_backend()
    ldpfast.set_backend("scalar")  # the slowest path: a long call
    t = threading.Thread(target=ticker)
    t.start()
    try:
        time.sleep(0.01)
        start = time.perf_counter()
        _core.fwht(x, 1)
        end = time.perf_counter()
    finally:
        stop.set()
        t.join()
        _core.set_backend(previous)
    assert sum(start < tick < end for tick in ticks) >= 5


# ---------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("length", [0, 1, 3, 6, 12, 1000, 2**10 + 2**9])
def test_rejects_lengths_that_are_not_powers_of_two(length):
    with pytest.raises(ParameterError, match=rf"power of two in \[2, 2\^30\], got {length}"):
        fwht(np.zeros(length, dtype=np.float64))
    with pytest.raises(ValueError, match="power of two"):
        _core.fwht(np.zeros(length, dtype=np.float64))


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.uint64, np.complex128, np.bool_,
                                   np.dtype(">f8"), np.dtype(">i8")], ids=str)
def test_rejects_other_dtypes(dtype):
    with pytest.raises(DTypeError, match="data must have dtype float32, float64 or int64"):
        fwht(np.zeros(8, dtype=dtype))
    with pytest.raises(TypeError, match="dtype"):
        _core.fwht(np.zeros(8, dtype=dtype))


def test_rejects_non_arrays_and_wrong_ndim():
    with pytest.raises(DTypeError, match="numpy array, got list"):
        fwht([1.0, 2.0])
    for shape in [(2, 2, 4), ()]:
        with pytest.raises(ParameterError, match=f"1-D or 2-D .*ndim={len(shape)}"):
            fwht(np.zeros(shape, dtype=np.float64))
        with pytest.raises(ValueError, match="1-D or 2-D"):
            _core.fwht(np.zeros(shape, dtype=np.float64))


def test_rejects_non_contiguous_views_instead_of_copying():
    x = np.arange(32, dtype=np.float64)
    for view in (x[::2], x.reshape(4, 8)[:, ::2].copy().T, np.zeros((8, 4)).T):
        with pytest.raises(ParameterError, match="C-contiguous"):
            fwht(view)
        with pytest.raises(ValueError, match="C-contiguous"):
            _core.fwht(view)
    np.testing.assert_array_equal(x, np.arange(32, dtype=np.float64))


def test_rejects_read_only_and_unaligned():
    x = np.ones(8, dtype=np.float64)
    x.setflags(write=False)
    with pytest.raises(ParameterError, match="writable"):
        fwht(x)
    with pytest.raises(ValueError, match="writable"):
        _core.fwht(x)
    raw = np.zeros(8 * 8 + 1, dtype=np.uint8)
    unaligned = raw[1:].view(np.float64)
    assert not unaligned.flags.aligned
    with pytest.raises(ParameterError, match="aligned"):
        fwht(unaligned)


@pytest.mark.parametrize("threads", [-1, 1.5, "2", True, None, 2**16 + 1, 2**70])
def test_rejects_bad_thread_counts(threads):
    with pytest.raises(ParameterError, match=rf"threads must be an integer in \[0, 65536\].*{threads!r}"):
        fwht(np.ones(8, dtype=np.float64), threads=threads)


def test_unpickled_arrays_are_accepted():
    """Arrays that crossed a process boundary (pickle) carry an equal but not identical
    dtype object; kernels must accept them without copying."""
    import pickle

    data = pickle.loads(pickle.dumps(np.arange(8, dtype=np.int64)))
    expected = data.copy()
    fwht(data)
    fwht(data)
    assert np.array_equal(data, expected * 8)
