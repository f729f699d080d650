"""Each report value is read from the caller's memory once: a column that changes while
``update`` runs gives each report its old or its new value, checked, so the update raises
ReportError or adds a batch some valid input would give; never an unchecked value (an
out-of-bounds index in a C++ kernel, a count that was never validated).

The writer flips a few entries of a column between their valid value and an invalid one
(the dtype's largest value) as fast as it can; every update that succeeds must then have
added exactly the original batch. Writers: a Python thread (it runs while the C++ kernels
have released the GIL), and another process rewriting a memory-mapped file under the
columns (numpy views of it, or an Arrow IPC file opened with ``pyarrow.memory_map``), which
races with the numpy paths too. Then a matrix of column layouts (aligned, misaligned,
strided, byte-swapped, read-only): each is added as the plain batch would be, or refused
with an error naming the column; none reaches a kernel misaligned. .ci/sanitize.sh runs
this file under ASan and UBSan.
"""

import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

from _examples import case_params, example
from ldpfast import _core, arrow
from ldpfast.testing._case import tiled
from ldpfast.errors import DTypeError, ReportError

CASES = case_params()
# Updates per race (each a batch of tens of thousands of reports): enough for the writer to
# hit every phase of the update many times, a few seconds at most per case under ASan.
ROUNDS = 8


def _batch(case_id, times=100):
    """A batch of ``times`` copies of the case's example, fewer when one update would
    take over ~20 ms (the slow numpy paths) or the batch would exceed 100,000 reports."""
    proto, params, reports, make = example(case_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        make(params).update(reports)
        once = time.perf_counter() - start
    times = max(1, min(times, int(0.02 / max(once, 1e-9)), 100_000 // len(reports)))
    return params, tiled(reports, times), make


def _flip_positions(column):
    flat = column.reshape(-1)
    return np.array(sorted({0, flat.size // 2, flat.size - 1}), dtype=np.intp)


def _bad_value(column):
    return np.iinfo(column.dtype).max


def _invalid_flips(params, batch, make):
    """Column name -> the entries of ``_flip_positions`` whose flip alone makes the batch
    invalid (update raises); the writer flips only those, so that every batch it can
    produce but the original is refused (in a bit row, a flip of a byte whose bits are all
    within k is another valid report). Columns with no such entry are left out."""
    out = {}
    for name, column in batch.columns().items():
        invalid = []
        for where in _flip_positions(column):
            changed = type(batch).from_columns({**batch.columns(), name: column.copy()})
            getattr(changed, name).reshape(-1)[where] = _bad_value(column)
            try:
                make(params).update(changed)
            except ReportError:
                invalid.append(where)
        if invalid:
            out[name] = np.array(invalid, dtype=np.intp)
    return out


def _expected(params, make, batch, times):
    server = make(params)
    for _ in range(times):
        server.update(batch)
    return server.to_bytes()


def _race(params, make, batch, flip, restore):
    """ROUNDS updates of ``batch`` while ``flip`` runs; returns (server, successes)."""
    server, added = make(params), 0
    switch = sys.getswitchinterval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.setswitchinterval(1e-5)  # a writer thread and the update take turns at the GIL often
        flip()
        try:
            for _ in range(ROUNDS):
                try:
                    server.update(batch)
                    added += 1
                except ReportError:
                    pass
        finally:
            restore()
            sys.setswitchinterval(switch)
    return server, added


def _thread_race(params, make, batch, name, where):
    """ROUNDS updates while a thread flips the entries ``where`` of column ``name``;
    restores them."""
    flat = getattr(batch, name).reshape(-1)
    good, bad = flat[where].copy(), _bad_value(flat)
    stop = threading.Event()

    def writer():  # yields the GIL in both states: the update may run with either
        while not stop.is_set():
            flat[where] = bad
            time.sleep(0)
            flat[where] = good
            time.sleep(0)

    thread = threading.Thread(target=writer)

    def restore():
        stop.set()
        thread.join()
        flat[where] = good

    return _race(params, make, batch, thread.start, restore)


@pytest.mark.parametrize("case_id", CASES)
def test_a_column_changed_by_another_thread_during_update(case_id):
    params, batch, make = _batch(case_id)
    for name, where in _invalid_flips(params, batch, make).items():
        server, added = _thread_race(params, make, batch, name, where)
        assert server.to_bytes() == _expected(params, make, batch, added), name


_WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    path, dtype, size, offsets, bad, seconds = sys.argv[1:7]
    data = np.memmap(path, dtype=dtype, mode="r+", shape=(int(size),))
    where = np.array([int(v) for v in offsets.split(",")])
    good = data[where].copy()
    bad = np.array(int(bad)).astype(dtype)
    print("ready", flush=True)
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        data[where] = bad
        data[where] = good
""")

_FILE_WRITER = textwrap.dedent("""
    import sys, time
    path, good, bad, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    a, b = open(good, "rb").read(), open(bad, "rb").read()
    print("ready", flush=True)
    end = time.monotonic() + seconds
    with open(path, "r+b") as f:
        while time.monotonic() < end:
            for content in (b, a):
                f.seek(0)
                f.write(content)
                f.flush()
""")


def _start(script, *args):
    proc = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


# One case per kernel family: the Hadamard update (one group, several groups, RHR's
# blocks), numpy counting (GRR, dBitFlip), OCMS candidate counting, the PrivSketch decode,
# SVIM, the bit-row column counts (OUE; RAPPOR's cohorts), PGR's point counts.
FAMILIES = ["hrr", "hadaoracle", "rhr", "grr", "dbitflip", "ocms-candidates", "privsketch", "svim-items", "oue",
            "rappor", "pgr"]


@pytest.mark.parametrize("case_id", FAMILIES)
def test_a_memory_mapped_file_rewritten_under_the_columns(case_id, tmp_path):
    params, batch, make = _batch(case_id)
    name, flips = next(iter(_invalid_flips(params, batch, make).items()))
    column = getattr(batch, name)
    path = tmp_path / "column.bin"
    column.tofile(path)
    mapped = np.memmap(path, dtype=column.dtype, mode="r", shape=column.shape)
    on_disk = type(batch).from_columns({**batch.columns(), name: mapped})
    assert not getattr(on_disk, name).flags.owndata  # the batch reads the mapping itself
    proc = []

    def start():
        where = ",".join(str(v) for v in flips)
        proc.append(_start(_WRITER, path, column.dtype.str, column.size, where, _bad_value(column), 60))

    def restore():
        proc[0].kill()
        proc[0].wait()

    server, added = _race(params, make, on_disk, start, restore)
    assert server.to_bytes() == _expected(params, make, batch, added)


@pytest.mark.parametrize("case_id", ["hadaoracle", "grr", "ocms-candidates"])
def test_an_arrow_file_rewritten_under_a_memory_mapped_table(case_id, tmp_path):
    pa = pytest.importorskip("pyarrow")
    params, batch, make = _batch(case_id)
    name, flips = next(iter(_invalid_flips(params, batch, make).items()))
    changed = type(batch).from_columns({**batch.columns(), name: getattr(batch, name).copy()})
    getattr(changed, name).reshape(-1)[flips] = _bad_value(getattr(batch, name))
    files = {}
    for label, reports in (("good", batch), ("bad", changed)):
        table = arrow.to_arrow(reports, params)
        files[label] = tmp_path / f"{label}.arrow"
        with pa.OSFile(str(files[label]), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    assert files["good"].stat().st_size == files["bad"].stat().st_size
    live = tmp_path / "live.arrow"
    live.write_bytes(files["good"].read_bytes())
    source = pa.memory_map(str(live), "r")
    on_disk = arrow.from_arrow(pa.ipc.open_file(source).read_all(), params, reports_type=type(batch))
    proc = []

    def restore():
        proc[0].kill()
        proc[0].wait()
        source.close()

    server, added = _race(params, make, on_disk,
                          lambda: proc.append(_start(_FILE_WRITER, live, files["good"], files["bad"], 60)), restore)
    assert server.to_bytes() == _expected(params, make, batch, added)


def _layouts(column):
    """The column in other memory layouts, each with the same values."""
    out = {"read-only": column.copy()}
    out["read-only"].flags.writeable = False
    strided = np.empty((2 * column.shape[0],) + column.shape[1:], dtype=column.dtype)
    strided[::2] = column
    out["strided"] = strided[::2]
    if column.dtype.itemsize > 1:
        raw = np.empty(column.nbytes + 1, dtype=np.uint8)[1:]
        misaligned = raw.view(column.dtype).reshape(column.shape)
        misaligned[...] = column
        assert not misaligned.flags.aligned
        out["misaligned"] = misaligned
        out["byte-swapped"] = column.astype(column.dtype.newbyteorder())
    return out


@pytest.mark.parametrize("case_id", CASES)
def test_column_layouts_are_added_as_the_plain_batch_or_refused(case_id):
    params, batch, make = _batch(case_id, times=2)
    expected = make(params).update(batch).to_bytes()
    for name, column in batch.columns().items():
        for layout, variant in _layouts(column).items():
            other = type(batch).from_columns(batch.columns())
            setattr(other, name, variant)  # reassigned after construction: update checks again
            server = make(params)
            if layout == "byte-swapped":
                with pytest.raises((ReportError, DTypeError), match=name):
                    server.update(other)
                assert server.to_bytes() == make(params).to_bytes()
            else:
                assert server.update(other).to_bytes() == expected, (name, layout)


def test_kernels_refuse_misaligned_strided_and_byte_swapped_columns():
    rows = np.arange(64, dtype=np.uint32) % 16
    bits = np.ones(64, np.int8)
    args = (np.array([16], np.uint64), np.zeros(1, np.uint64), np.zeros(16, np.int64))
    raw = np.empty(rows.nbytes + 1, np.uint8)[1:]
    misaligned = raw.view(np.uint32)
    misaligned[:] = rows
    with pytest.raises(ValueError, match="rows must be aligned"):
        _core.hadamard_update(None, misaligned, bits, *args)
    with pytest.raises(ValueError, match="rows must be C-contiguous"):
        _core.hadamard_update(None, np.repeat(rows, 2)[::2], bits, *args)
    with pytest.raises(TypeError, match="rows must have dtype uint32"):
        _core.hadamard_update(None, rows.astype(">u4"), bits, *args)
    assert _core.hadamard_update(None, rows, bits, *args) == 64


@pytest.mark.skipif(os.cpu_count() == 1, reason="needs two cores for the writer to overlap the kernel")
def test_the_issue_reproducer_hadaoracle_groups_flipped_while_updating():
    """The reported crash: ``groups[-1]`` flipped out of range by a thread while
    ``HadaOracle.update`` runs (SIGSEGV or a write outside z before)."""
    params, batch, make = _batch("hadaoracle", times=200)
    groups = batch.groups
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            groups[-1] = 0xFFFFFFF0
            groups[-1] = 0

    server, added = make(params), 0
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            try:
                server.update(batch)
                added += 1
            except ReportError:
                pass
    finally:
        stop.set()
        thread.join()
    groups[-1] = 0
    assert server.n == added * len(batch)
    assert server.to_bytes() == _expected(params, make, batch, added)


def _hrr_case(log2d, n, groups=False):
    from ldpfast.protocols.frequency import hadaoracle, hadamard

    rng = np.random.default_rng(log2d)
    if groups:
        params = hadaoracle.HadaOracleParams.create(epsilon=1.0, d=2**log2d, n=10**6, hash_seed=1)
        server, client = hadaoracle.HadaOracleServer, hadaoracle.HadaOracleClient
    else:
        params = hadamard.HRRParams(epsilon=1.0, d=2**log2d)
        server, client = hadamard.HRRServer, hadamard.HRRClient
    return params, client(params, rng=1).perturb(rng.integers(0, 2**log2d, n)), server


# Every path of the Hadamard update: a small batch into a large table (cells staged, then
# added), a table beyond private copies (threads owning cell ranges), int32 private tables
# filled from copied blocks (fit L1) or straight from the columns (fit L2), int16 private
# tables, several groups. One report is flipped (as in the issue: the last one), so the
# batch is valid whenever the flip is undone.
@pytest.mark.parametrize("log2d, n, groups", [(20, 200_000, False), (24, 200_000, False), (12, 400_000, False),
                                              (15, 100_000, False), (21, 3_000_000, False), (16, 400_000, True)],
                         ids=["staged", "owner-ranges", "int32-tables", "int32-direct", "int16-tables", "groups"])
def test_columns_changed_while_each_hadamard_path_runs(log2d, n, groups):
    params, batch, make = _hrr_case(log2d, n, groups)
    for name in batch.columns():
        server, added = _thread_race(params, make, batch, name, np.array([getattr(batch, name).size - 1]))
        assert server.to_bytes() == _expected(params, make, batch, added), name


@pytest.mark.parametrize("case_id", ["pem", "ps-olh", "svim-items", "ocms-candidates", "grr"])
def test_every_owned_column_is_copied_value_by_value(case_id, monkeypatch):
    """The mechanism of the torn a0/a1 entries (PEM, PS-OLH, SVIM under ASan): update copied
    the caller's columns with numpy, whose memmove AddressSanitizer replaces by a byte-by-byte
    loop, so a uint64 changed by a writer during the copy could be read half old, half new:
    a valid field element that was never the caller's. Every column update owns must now be
    read by ``_core.copy_once`` (one load per value)."""
    params, batch, make = _batch(case_id, times=2)
    copied = []
    real = _core.copy_once

    def recording(src, dst):
        copied.append(src)
        real(src, dst)

    monkeypatch.setattr(_core, "copy_once", recording)
    server = make(params)
    server.update(batch)
    reads_once = type(server)._reads_once
    for name, column in batch.columns().items():
        through = any(np.shares_memory(src, column) for src in copied)
        assert through or (reads_once and column.flags.aligned), name
    assert server.to_bytes() == _expected(params, make, batch, 1)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "uint32", "uint64", "int64", "float64"])
def test_copy_once_copies_every_width_and_layout(dtype):
    values = np.arange(1000).astype(dtype)
    for src in (values, _layouts(values).get("misaligned", values)):
        dst = np.empty_like(values)
        _core.copy_once(src, dst)
        np.testing.assert_array_equal(dst, values)


def test_copy_once_refuses_what_it_cannot_copy_whole():
    column = np.arange(8, dtype=np.uint64)
    for src, dst, message in ((column, np.empty(7, np.uint64), "length"),
                              (column, np.empty(8, np.int64), "dtype"),
                              (np.empty(8, object), np.empty(8, object), "not object"),
                              (column[::2], np.empty(4, np.uint64), "C-contiguous")):
        with pytest.raises(ValueError, match=message):
            _core.copy_once(src, dst)
    frozen = np.empty(8, np.uint64)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        _core.copy_once(column, frozen)


def test_copy_once_reads_values_flipped_by_a_thread_whole():
    """Each value copied while a thread flips it between two words is one of the two words,
    never a mix of their bytes. memcpy promises no such thing: under AddressSanitizer
    (.ci/sanitize.sh) np.copyto tore 31 values in 500 copies of this column, 12 expected in
    the 200 below (none by chance with probability e^-12); copy_once tore none."""
    n = 100_000
    column = np.random.default_rng(5).integers(0, 2**63, n, dtype=np.uint64)
    where = np.arange(0, n, 97)
    good, bad = column[where].copy(), np.uint64(2**64 - 1)
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            column[where] = bad
            column[where] = good

    copy = np.empty_like(column)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(200):
            _core.copy_once(column, copy)
            got = copy[where]
            assert np.all((got == good) | (got == bad))
            assert np.array_equal(np.delete(copy, where), np.delete(column, where))
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
