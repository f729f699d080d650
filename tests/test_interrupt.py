"""Long C++ calls stop on Ctrl-C: between chunks of work the calling thread briefly takes
the GIL to run Python's signal handlers, and a KeyboardInterrupt stops the workers.

Each latency test runs in a child process (a KeyboardInterrupt must never reach pytest),
sized by a calibration run so that the uninterrupted call would take >= 8 s on the machine
at hand; the child is interrupted ~0.3 s into the call and must raise KeyboardInterrupt
well before the call could have finished, then give correct results on the next call.
The work is split into pieces, so the tests below also check that the results do not
depend on the split (bit-exact against single-piece calls or numpy, every backend).
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ldpfast
from ldpfast import _core

POSIX = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
# A call must stop within this time of the SIGINT. The hook polls every 20 ms and pieces
# take a few ms to tens of ms; 2 s leaves room for a loaded CI machine.
LATENCY_LIMIT_S = 2.0
# The uninterrupted call is sized to take at least this long (calibrated in the child).
MIN_FULL_CALL_S = 8.0

PRELUDE = textwrap.dedent("""
    import ctypes, json, mmap, os, sys, time
    import numpy as np
    from ldpfast import _core

    def calibrated(make, run, size, small):
        # Times run(make(small)) and returns (make(size'), predicted seconds) with size' grown
        # until the prediction reaches MIN_FULL.
        args = make(small)
        t = time.perf_counter(); run(*args); per_unit = (time.perf_counter() - t) / small
        while per_unit * size < MIN_FULL:
            size *= 2
        return make(size), per_unit * size

    def repeated(pattern, count):
        # A read-only array of `count` copies of `pattern` (a multiple of 2 MiB) that maps the
        # same physical pages over and over: huge batches at no memory cost.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        raw = pattern.tobytes()
        fd = os.memfd_create("pattern")
        os.write(fd, raw)
        total = len(raw) * count
        base = libc.mmap(None, total, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, -1, 0)
        assert base not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        for k in range(count):
            got = libc.mmap(base + k * len(raw), len(raw), mmap.PROT_READ, mmap.MAP_SHARED | 0x10, fd, 0)
            assert got == base + k * len(raw), ctypes.get_errno()
        buf = (ctypes.c_char * total).from_address(base)
        return np.frombuffer(buf, dtype=pattern.dtype)
""")

# Each case: setup code defining make(size) -> args, run(*args), size, small, check()
# (a small call whose result is compared with a reference computed before the interrupt).
CASES = {
    "ocms_count_range": """
        field = _core.Field.prime((1 << 61) - 1)
        rng = np.random.default_rng(1)
        n, m = 1 << 16, 1024
        z = rng.integers(0, m, n, dtype=np.uint64)
        a0 = rng.integers(0, (1 << 61) - 1, n, dtype=np.uint64)
        a1 = rng.integers(0, (1 << 61) - 1, n, dtype=np.uint64)
        make = lambda k: (np.zeros(k, np.uint64),)
        run = lambda counts: _core.ocms_count_range(field, z, a0, a1, m, 0, counts)
        size, small = 1 << 16, 1 << 13
        def check():
            counts = np.zeros(4096, np.uint64)
            _core.ocms_count_range(field, z[:1000], a0[:1000], a1[:1000], m, 7, counts)
            return counts.tolist()
    """,
    "ocms_count_list": """
        field = _core.Field.binary(64, 27)
        rng = np.random.default_rng(2)
        n, m = 1 << 16, 1024
        z = rng.integers(0, m, n, dtype=np.uint64)
        a0 = rng.integers(0, 1 << 63, n, dtype=np.uint64)
        a1 = rng.integers(0, 1 << 63, n, dtype=np.uint64)
        make = lambda k: (rng.integers(0, 1 << 63, k, dtype=np.uint64), np.zeros(k, np.uint64))
        run = lambda xs, counts: _core.ocms_count_list(field, z, a0, a1, m, xs, counts)
        size, small = 1 << 14, 1 << 10
        def check():
            counts = np.zeros(100, np.uint64)
            _core.ocms_count_list(field, z[:1000], a0[:1000], a1[:1000], m, a0[:100].copy(), counts)
            return counts.tolist()
    """,
    "hadamard_update": """
        rng = np.random.default_rng(3)
        width = 1 << 12
        # 2^24 reports per pattern (64 + 16 MiB): an 8 s batch at ~3e9 reports/s (2 idle
        # cores) needs ~2^35 reports, i.e. a few thousand mappings, far below the kernel's
        # vm.max_map_count (65530 by default); 2 MiB patterns needed over 80,000 there.
        per_pattern = 1 << 24
        rows_pattern = rng.integers(0, width, per_pattern).astype(np.uint32)
        bits_pattern = rng.choice(np.array([-1, 1], np.int8), per_pattern)
        group_rows = np.array([width], np.uint64)
        base = np.zeros(1, np.uint64)
        def make(k):
            reps = -(-k // per_pattern)
            return (repeated(rows_pattern, reps), repeated(bits_pattern, reps), np.zeros(width, np.int64))
        run = lambda rows, bits, z: _core.hadamard_update(None, rows, bits, group_rows, base, z)
        size, small = 1 << 30, 1 << 25
        def check():
            z = np.zeros(width, np.int64)
            _core.hadamard_update(None, rows_pattern[:5000], bits_pattern[:5000], group_rows, base, z)
            return z.tolist()
    """,
    "grr_histogram_update": """
        rng = np.random.default_rng(5)
        width, per_pattern = 1 << 12, 1 << 21      # private tables; 16 MiB patterns
        pattern = rng.integers(0, width, per_pattern, dtype=np.uint64)
        make = lambda k: (repeated(pattern, -(-k // per_pattern)), np.zeros(width, np.uint64))
        run = lambda y, counts: _core.histogram_update(y, counts)
        size, small = 1 << 30, 1 << 24
        def check():
            counts = np.zeros(width, np.uint64)
            _core.histogram_update(pattern[:5000], counts)
            return counts.tolist()
    """,
    "privsketch_decode_full": """
        rng = np.random.default_rng(4)
        K, M = 4, 64
        perm = rng.permutation(K * M).astype(np.uint16)
        order_pattern = np.tile(perm, 4096)                                    # 2 MiB: 4096 users
        bits_pattern = rng.choice(np.array([-1, 1], np.int8), 8192 * K * M)   # 2 MiB: 8192 users
        cells = rng.integers(0, K * M, (1000, K)).astype(np.uint16)
        def make(k):
            k = -(-k // 8192) * 8192
            order = repeated(order_pattern, k // 4096).reshape(k, K, M)
            return order, repeated(bits_pattern, k // 8192).reshape(k, K * M)
        run = lambda order, bits: _core.privsketch_decode_full(K, M, order, bits, cells)
        size, small = 1 << 20, 1 << 15
        def check():
            order = np.tile(perm, (50, 1)).reshape(50, K, M)
            pos, neg, bad = _core.privsketch_decode_full(K, M, order, bits_pattern[:50 * K * M].reshape(50, -1), cells)
            return [pos.tolist(), neg.tolist(), bad]
    """,
}

CHILD = PRELUDE + textwrap.dedent("""
    MIN_FULL = float(sys.argv[1])
    {setup}
    expected = check()
    args, predicted = calibrated(make, run, size, small)
    print(json.dumps({{"predicted": predicted}}), flush=True)
    started = time.perf_counter()
    try:
        run(*args)
        print(json.dumps({{"finished": time.perf_counter() - started}}), flush=True)
    except KeyboardInterrupt:
        print(json.dumps({{"interrupted": time.perf_counter() - started}}), flush=True)
    print(json.dumps({{"next_call_ok": check() == expected}}), flush=True)
""")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(ldpfast.__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    return env


@POSIX
@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="needs memfd_create (Linux)")
@pytest.mark.parametrize("case", sorted(CASES))
def test_sigint_stops_a_long_call_quickly(case):
    code = CHILD.format(setup=textwrap.dedent(CASES[case]))
    proc = subprocess.Popen([sys.executable, "-c", code, str(MIN_FULL_CALL_S)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        predicted = json.loads(proc.stdout.readline())["predicted"]
        time.sleep(0.3)  # the call is running now
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        outcome = json.loads(proc.stdout.readline())
        latency = time.perf_counter() - sent
        after = json.loads(proc.stdout.readline())
    finally:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert predicted >= MIN_FULL_CALL_S  # the test is meaningful: the call would have run on
    assert "interrupted" in outcome, (outcome, err)
    print(f"{case}: stopped {latency * 1000:.0f} ms after SIGINT (full call ~{predicted:.0f} s)")
    assert latency < LATENCY_LIMIT_S
    assert after == {"next_call_ok": True}


@POSIX
def test_handlers_run_during_a_call_without_changing_its_result(backend):
    """A handler that does not raise (here SIGUSR1's) runs mid-call; the call completes
    with the same counts as when no signal arrives."""
    field = _core.Field.prime((1 << 61) - 1)
    rng = np.random.default_rng(5)
    n, m, k = 1 << 15, 64, 1 << 14
    z = rng.integers(0, m, n, dtype=np.uint64)
    a0 = rng.integers(0, (1 << 61) - 1, n, dtype=np.uint64)
    a1 = rng.integers(0, (1 << 61) - 1, n, dtype=np.uint64)
    while True:  # long enough to be signalled mid-way
        quiet = np.zeros(k, np.uint64)
        started = time.perf_counter()
        _core.ocms_count_range(field, z, a0, a1, m, 0, quiet, 1)
        duration = time.perf_counter() - started
        if duration >= 0.3:
            break
        k *= 2
    handled = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: handled.append(time.perf_counter()))
    timer = threading.Timer(duration / 4, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        counts = np.zeros(k, np.uint64)
        timer.start()
        _core.ocms_count_range(field, z, a0, a1, m, 0, counts, 1)
        returned = time.perf_counter()
    finally:
        timer.join()
        signal.signal(signal.SIGUSR1, previous)
    assert handled and handled[0] < returned - 0.05  # ran inside the call, not after it
    np.testing.assert_array_equal(counts, quiet)


def test_calls_from_other_threads_are_not_interrupted_and_agree(backend):
    field = _core.Field.prime((1 << 61) - 1)
    rng = np.random.default_rng(6)
    n, m, k = 5000, 64, 5000
    z = rng.integers(0, m, n, dtype=np.uint64)
    a0 = rng.integers(0, (1 << 61) - 1, n, dtype=np.uint64)
    a1 = rng.integers(0, (1 << 61) - 1, n, dtype=np.uint64)
    expected = np.zeros(k, np.uint64)
    _core.ocms_count_range(field, z, a0, a1, m, 3, expected)
    got = np.zeros(k, np.uint64)
    worker = threading.Thread(target=_core.ocms_count_range, args=(field, z, a0, a1, m, 3, got, 2))
    worker.start()
    worker.join()
    np.testing.assert_array_equal(got, expected)


# --- the split into pieces is exact -------------------------------------------------------

@pytest.mark.parametrize("threads", [1, 2])
def test_count_range_and_list_pieces_match_single_piece_calls(backend, threads):
    """More than 2^16 candidates and more than 256 reports per task: split both ways.
    Reference: calls small enough to be one piece each (<= 256 reports, 4096 candidates)."""
    field = _core.Field.prime((1 << 61) - 1)
    rng = np.random.default_rng(7)
    n, m, k, x_begin = 700, 32, 70_000, 12_345
    z = rng.integers(0, m, n, dtype=np.uint64)
    a0 = rng.integers(0, (1 << 61) - 1, n, dtype=np.uint64)
    a1 = rng.integers(0, (1 << 61) - 1, n, dtype=np.uint64)
    reference = np.zeros(k, np.uint64)
    for r in range(0, n, 256):
        for c in range(0, k, 4096):
            out = reference[c:c + 4096]
            part = np.zeros(len(out), np.uint64)
            _core.ocms_count_range(field, z[r:r + 256], a0[r:r + 256], a1[r:r + 256], m, x_begin + c, part, 1)
            out += part
    counts = np.zeros(k, np.uint64)
    _core.ocms_count_range(field, z, a0, a1, m, x_begin, counts, threads)
    np.testing.assert_array_equal(counts, reference)
    listed = np.zeros(k, np.uint64)
    xs = np.arange(x_begin, x_begin + k, dtype=np.uint64)
    _core.ocms_count_list(field, z, a0, a1, m, xs, listed, threads)
    np.testing.assert_array_equal(listed, reference)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("width", [512, 1 << 21])  # int32 partial tables / direct int64 adds
def test_hadamard_update_in_blocks_matches_numpy(backend, threads, width):
    """More than 2^20 reports per worker: accumulation runs in several blocks."""
    rng = np.random.default_rng(8)
    n, groups = (1 << 21) + 12_345, 3
    rows = rng.integers(0, width, n).astype(np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), n)
    g = rng.integers(0, groups, n).astype(np.uint32)
    group_rows = np.full(groups, width, np.uint64)
    base = np.arange(groups, dtype=np.uint64) * np.uint64(width)
    reference = np.zeros(groups * width, np.int64)
    np.add.at(reference, g.astype(np.int64) * width + rows, bits)
    z = np.zeros(groups * width, np.int64)
    assert _core.hadamard_update(g, rows, bits, group_rows, base, z, threads) == n
    np.testing.assert_array_equal(z, reference)
    bits[n - 3] = 0  # the first invalid report is found in the last block; z is unchanged
    z[:] = 0
    assert _core.hadamard_update(g, rows, bits, group_rows, base, z, threads) == n - 3
    assert not z.any()


def test_int16_tables_spill_across_blocks(backend):
    """Wide tables (int16 partials) with one hot cell that spills in several blocks."""
    n, width = (1 << 21) + 777, 1 << 21
    rows = np.zeros(n, np.uint32)
    rows[::7] = 5
    bits = np.ones(n, np.int8)
    bits[1::2] = -1
    bits[::3] = 1
    reference = np.zeros(width, np.int64)
    np.add.at(reference, rows.astype(np.int64), bits)
    for threads in (1, 2):
        z = np.zeros(width, np.int64)
        _core.hadamard_accumulate(None, rows, bits, np.zeros(1, np.uint64), z, threads)
        np.testing.assert_array_equal(z, reference)


def test_privsketch_decode_pieces_match_one_user_at_a_time(backend):
    rng = np.random.default_rng(9)
    K, M, n, n_cand = 4, 16, 3000, 20_000  # ~80 users per piece
    order = np.stack([rng.permutation(K * M) for _ in range(n)]).astype(np.uint16).reshape(n, K, M)
    bits = rng.choice(np.array([-1, 1], np.int8), (n, K * M))
    cells = (np.arange(K)[None, :] * M + rng.integers(0, M, (n_cand, K))).astype(np.uint16)
    pos, neg, bad = _core.privsketch_decode_full(K, M, order, bits, cells, 1)
    assert bad == n
    ref_pos, ref_neg = np.zeros(n_cand, np.int64), np.zeros(n_cand, np.int64)
    for i in range(0, n, 50):
        p, q, _ = _core.privsketch_decode_full(K, M, order[i:i + 50], bits[i:i + 50], cells, 1)
        ref_pos += p
        ref_neg += q
    np.testing.assert_array_equal(pos, ref_pos)
    np.testing.assert_array_equal(neg, ref_neg)
    order[n - 2, 0, 0] = order[n - 2, 0, 1]  # not a permutation: reported, in the last piece
    assert _core.privsketch_decode_full(K, M, order, bits, cells, 2)[2] == n - 2


def test_long_fwht_rows_are_identical_for_every_schedule(backend):
    """2^26-element rows take the blocked schedule on any thread count (8 blocks on one
    thread, 16 on four); the butterflies and their order are the same, so float32 results,
    which round, are bit-identical."""
    n = 1 << 26
    data = np.random.default_rng(10).standard_normal(n).astype(np.float32)
    one = data.copy()
    _core.fwht(one, 1)
    many = data
    _core.fwht(many, 4)
    np.testing.assert_array_equal(one, many)


ALARMS = PRELUDE + textwrap.dedent("""
    import signal
    # A SIGALRM every millisecond is always pending when the kernel polls for signals (at
    # most every 20 ms); the handler raises KeyboardInterrupt at the k-th poll, k = 1, 2, ...
    # until a call completes: every interruption point of the call is hit once.
    MIN_CALL_S = 0.3   # about 15 polls
    polls = [0, 0]
    def handler(signum, frame):
        polls[0] += 1
        if polls[0] == polls[1]:
            raise KeyboardInterrupt
    signal.signal(signal.SIGALRM, handler)  # polls[1] = 0 disarms it (polls[0] >= 1 when compared)

    # run() interrupted at its k-th poll, k = 1, 2, ... until a call completes; after each,
    # outcome() names the state: "unchanged", "complete" or a partial one (which stops).
    def interrupted_at_every_poll(run, outcome):
        unchanged = complete = 0
        for k in range(1, 1000):
            polls[:] = [0, k]
            signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
            try:
                run()
                polls[1] = 0  # disarmed: an alarm after the try could not be caught
                finished = True
            except KeyboardInterrupt:  # inside the call, or just after it returned
                finished = False
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            state = outcome()
            if state == "unchanged":
                unchanged += 1
            elif state == "complete":
                complete += 1
            else:
                break  # a partial state
            if finished:
                break
        return {"runs": k, "unchanged": unchanged, "complete": complete, "finished": finished}
""")

ROLLBACK_CHILD = ALARMS + textwrap.dedent("""
    width, n, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(12)
    row_pattern = rng.integers(0, width, 1 << 20).astype(np.uint32)
    bit_pattern = rng.choice(np.array([-1, 1], np.int8), 1 << 21)
    group_rows, base = np.array([width], np.uint64), np.zeros(1, np.uint64)
    start = rng.integers(-3, 3, width).astype(np.int64)

    def batch(n):
        return repeated(row_pattern, n >> 20), repeated(bit_pattern, n >> 21)

    # The batch grows (doubling) until one uninterrupted call takes MIN_CALL_S, so that it
    # spans many polls however fast the machine is.
    while True:
        rows, bits = batch(n)
        t = time.perf_counter()
        _core.hadamard_update(None, rows, bits, group_rows, base, start.copy(), threads, np.zeros(1, np.int64),
                              np.zeros(1, np.int64))
        if time.perf_counter() - t >= MIN_CALL_S:
            break
        n *= 2
    # rows repeat every 2^20 reports and bits every 2^21: the batch is n / 2^21 periods
    period = np.bincount(np.tile(row_pattern, 2), weights=bit_pattern, minlength=width).astype(np.int64)
    reference = start + (n >> 21) * period
    z, sizes, count = start, np.zeros(1, np.int64), np.zeros(1, np.int64)

    def run():
        global z, sizes, count
        z, sizes, count = start.copy(), np.zeros(1, np.int64), np.zeros(1, np.int64)
        _core.hadamard_update(None, rows, bits, group_rows, base, z, threads, sizes, count)

    def outcome():
        if np.array_equal(z, start) and not sizes.any() and not count.any():
            return "unchanged"
        return "complete" if np.array_equal(z, reference) and int(count[0]) == n == int(sizes[0]) else "partial"

    print(json.dumps({**interrupted_at_every_poll(run, outcome), "n": n}))
""")


@POSIX
@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="needs memfd_create (Linux)")
@pytest.mark.parametrize("width, n, threads", [(1 << 12, 1 << 26, 2), ((1 << 23) + (1 << 20), 1 << 23, 1),
                                               ((1 << 23) + (1 << 20), 1 << 23, 2)],
                         ids=["private-tables", "staged-direct", "staged-owner-ranges"])
def test_an_update_interrupted_at_any_poll_changes_nothing(width, n, threads):
    """hadamard_update adds into z in place: interrupted at any of its interruption points
    (while filling private tables, staging, or adding staged cells, which it then takes
    back out), z and the counts are exactly as before; uninterrupted, the whole batch."""
    proc = subprocess.run([sys.executable, "-c", ROLLBACK_CHILD, str(width), str(n), str(threads)], env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["finished"] and result["unchanged"] + result["complete"] == result["runs"], result  # no partial
    assert result["unchanged"] >= 2, result  # the call was long enough to be interrupted more than once


HISTOGRAM_ROLLBACK_CHILD = ALARMS + textwrap.dedent("""
    width, n, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(13)
    pattern = rng.integers(0, width, 1 << 18, dtype=np.uint64)  # 2 MiB
    start = rng.integers(0, 1 << 40, width, dtype=np.uint64)
    while True:  # the batch grows until one uninterrupted call takes MIN_CALL_S
        y = repeated(pattern, n >> 18)
        t = time.perf_counter()
        _core.histogram_update(y, start.copy(), threads)
        if time.perf_counter() - t >= MIN_CALL_S:
            break
        n *= 2
    reference = start + np.uint64(n >> 18) * np.bincount(pattern.astype(np.int64), minlength=width).astype(np.uint64)
    counts = start

    def run():
        global counts
        counts = start.copy()
        _core.histogram_update(y, counts, threads)

    def outcome():
        if np.array_equal(counts, start):
            return "unchanged"
        return "complete" if np.array_equal(counts, reference) else "partial"

    print(json.dumps({**interrupted_at_every_poll(run, outcome), "n": n}))
""")


@POSIX
@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="needs memfd_create (Linux)")
@pytest.mark.parametrize("width, n, threads", [(1 << 12, 1 << 24, 1), (1 << 12, 1 << 24, 2),
                                               ((1 << 22) + (1 << 20), 1 << 22, 1)],
                         ids=["grr-table", "grr-two-tables", "grr-staged"])
def test_a_histogram_update_interrupted_at_any_poll_changes_nothing(width, n, threads):
    """histogram_update (the GRR server) counts private tables, or counts in place and
    stages the values: interrupted at any interruption point, the counts are exactly as
    before (tables dropped, staged values taken back out); uninterrupted, the whole batch."""
    proc = subprocess.run([sys.executable, "-c", HISTOGRAM_ROLLBACK_CHILD, str(width), str(n), str(threads)],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["finished"] and result["unchanged"] + result["complete"] == result["runs"], result  # no partial
    assert result["unchanged"] >= 2, result  # the call was long enough to be interrupted more than once
