"""No damaged or foreign Parquet file is ever counted: a file written under one label
vocabulary is refused by a server with another vocabulary (same size) or with none, in
process, by ``ldpfast aggregate`` and by the Dask and Spark files routes; every read is
checked against the footer's counts; a flip of any byte of a small file is refused with an
error naming the file or aggregates to exactly the original state."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")

import ldpfast  # noqa: E402
from ldpfast import arrow  # noqa: E402
from ldpfast.errors import FormatError, IncompatibleError, LdpfastError  # noqa: E402
from ldpfast.protocols.frequency import grr, hadamard, unary  # noqa: E402

FRUIT = ldpfast.Domain(["apple", "banana", "cherry", "durian"])
TIURF = ldpfast.Domain(["durian", "cherry", "banana", "apple"])  # same size, other order
PLAIN = grr.GRRParams(epsilon=2.0, d=4)


def test_params_equality_includes_the_label_domain():
    with_fruit, with_tiurf = PLAIN.with_domain(FRUIT), PLAIN.with_domain(TIURF)
    assert with_fruit != with_tiurf and with_fruit != PLAIN and PLAIN != with_fruit
    assert with_fruit.fingerprint != with_tiurf.fingerprint
    read_back = grr.GRRParams.from_json(with_fruit.to_json())  # knows the vocabulary by its fingerprint
    assert read_back == with_fruit and hash(read_back) == hash(with_fruit)
    assert read_back.with_domain(FRUIT) == with_fruit and read_back != with_tiurf
    assert grr.GRRParams(epsilon=2.0, d=4) == PLAIN and hash(grr.GRRParams(epsilon=2.0, d=4)) == hash(PLAIN)


@pytest.fixture(scope="module")
def apple_file(tmp_path_factory):
    """10,000 users who all said "apple", written with the default write_parquet (no
    fingerprint column) under the vocabulary FRUIT."""
    params = PLAIN.with_domain(FRUIT)
    reports = grr.GRRClient(params, rng=np.random.default_rng(5)).perturb(["apple"] * 10_000)
    path = tmp_path_factory.mktemp("apple") / "apples.parquet"
    arrow.write_parquet(reports, path, params)
    return path, params, reports


def _refusal_names_file_and_fingerprints(exc, path, stored, expected):
    message = str(exc)
    assert str(path) in message, message
    assert stored.fingerprint[:16] in message and expected.fingerprint[:16] in message, message


@pytest.mark.parametrize("server_domain", [TIURF, None], ids=["other-vocabulary", "no-vocabulary"])
def test_another_vocabulary_is_refused_in_process(apple_file, server_domain):
    path, stored, _ = apple_file
    expected = PLAIN.with_domain(server_domain)
    for read in (lambda: arrow.read_parquet(path, expected), lambda: list(arrow.iter_parquet(path, expected)),
                 lambda: arrow.read_parquet_params(path, expected)):
        with pytest.raises(IncompatibleError) as refused:
            read()
        _refusal_names_file_and_fingerprints(refused.value, path, stored, expected)
    read_params, reports = arrow.read_parquet(path, stored)  # the right vocabulary still reads
    assert read_params == stored and len(reports) == 10_000


def test_reports_without_a_vocabulary_are_refused_by_a_server_with_one(tmp_path):
    reports = grr.GRRClient(PLAIN, rng=np.random.default_rng(6)).perturb(np.zeros(100, dtype=np.int64))
    arrow.write_parquet(reports, tmp_path / "ids.parquet", PLAIN)
    with pytest.raises(IncompatibleError, match="ids.parquet"):
        arrow.read_parquet(tmp_path / "ids.parquet", PLAIN.with_domain(FRUIT))


def _cli(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(ldpfast.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "ldpfast", "aggregate", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_refuses_another_vocabulary_and_names_every_file(apple_file, tmp_path):
    path, stored, _ = apple_file
    expected = PLAIN.with_domain(TIURF)
    (tmp_path / "tiurf.json").write_text(expected.to_json())
    run = _cli("--params", tmp_path / "tiurf.json", "--reports", path.parent, "--state", tmp_path / "state")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    _refusal_names_file_and_fingerprints(run.stderr, path, stored, expected)
    assert not (tmp_path / "state").exists()
    (tmp_path / "bad.json").write_text('{"protocol": "grr", "params": {"epsilon": -1, "d": 4}}')
    (tmp_path / "bad.init").write_bytes(b"not an aggregator")
    for args, named in ((["--params", tmp_path / "bad.json"], "bad.json"),
                        (["--init", tmp_path / "bad.init"], "bad.init")):
        run = _cli(*args, "--reports", path.parent, "--state", tmp_path / "state")
        assert run.returncode == 2 and named in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_dask_and_spark_files_routes_refuse_another_vocabulary(apple_file):
    path, stored, _ = apple_file
    expected = PLAIN.with_domain(TIURF)
    pytest.importorskip("dask")
    import ldpfast.dask

    with pytest.raises(IncompatibleError) as refused:
        ldpfast.dask.aggregate_parquet([path], expected, scheduler="sync")
    _refusal_names_file_and_fingerprints(refused.value, path, stored, expected)
    pytest.importorskip("pyspark")
    from ldpfast.spark._tasks import _fold_file  # the task body of the files route, without a session

    with pytest.raises(IncompatibleError) as refused:
        _fold_file(grr.GRRServer(expected), grr.GRRServer(expected), str(path), 1 << 20, hash_file=False)
    _refusal_names_file_and_fingerprints(refused.value, path, stored, expected)


# -- damaged files ------------------------------------------------------------------------------
def _small_file(workload, compression, folder):
    """(params, empty-server factory, file bytes, bytes of the undamaged aggregate) of 200
    seeded reports: HRR (scalar columns) or OUE (a fixed-size list column)."""
    if workload == "hrr":
        params, client, server = hadamard.HRRParams(epsilon=1.0, d=64), hadamard.HRRClient, hadamard.HRRServer
    else:
        params, client, server = unary.OUEParams(epsilon=1.0, d=8), unary.OUEClient, unary.OUEServer
    reports = client(params, rng=np.random.default_rng(7)).perturb(np.arange(200) % params.d)
    arrow.write_parquet(reports, folder / "small.parquet", params, compression=compression)
    return params, server, (folder / "small.parquet").read_bytes(), server(params).update(reports).to_bytes()


@pytest.mark.parametrize("workload", ["hrr", "oue"])
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_no_byte_flip_is_silently_counted(workload, compression, tmp_path):
    """Every byte of a small file XOR 0xFF and XOR one bit (bit i mod 8 of byte i), and for
    the list column uncompressed every bit of the footer (a damaged level histogram there
    once aborted the process): each damaged copy is refused with an ldpfast error naming
    the file, or aggregates to exactly the bytes of the original aggregate (a flip in, e.g.,
    statistics that no reader uses). Another exception type (or a crash) fails too. All 8
    bits of every byte of every case: bench/parquet_damage.py."""
    params, server, original, expected = _small_file(workload, compression, tmp_path)
    footer = len(original) - 8 - int.from_bytes(original[-8:-4], "little")
    every_footer_bit = (workload, compression) == ("oue", "none")
    outcomes = {"refused": 0, "identical": 0, "silent": []}
    for offset in range(len(original)):
        masks = [1 << bit for bit in range(8)] if every_footer_bit and offset >= footer else [1 << offset % 8]
        for mask in [0xFF] + masks:
            damaged = bytearray(original)
            damaged[offset] ^= mask
            aggregator = server(params)
            try:
                for _, batch in arrow.iter_parquet(bytes(damaged), params, name="small.parquet"):
                    aggregator.update(batch)
            except LdpfastError as exc:
                assert str(exc).startswith("small.parquet"), (offset, mask, str(exc))
                outcomes["refused"] += 1
                continue
            if aggregator.to_bytes() == expected:
                outcomes["identical"] += 1
            else:
                outcomes["silent"].append((offset, mask))
    assert outcomes["silent"] == []
    assert outcomes["refused"] > len(original) and outcomes["identical"] > 0  # both outcomes occur


def test_counts_that_disagree_with_the_footer_are_refused(tmp_path):
    """A page header whose value count is damaged (outside the page checksum) made the
    reader return no rows; the row group's footer count refuses it."""
    params = hadamard.HRRParams(epsilon=1.0, d=64)
    reports = hadamard.HRRClient(params, rng=np.random.default_rng(8)).perturb(np.arange(300) % 64)
    arrow.write_parquet(reports, tmp_path / "f.parquet", params, compression="none")
    original = (tmp_path / "f.parquet").read_bytes()
    short = []
    for offset in range(4, 40):  # the first page header follows the 4-byte magic
        damaged = bytearray(original)
        damaged[offset] ^= 0x02
        try:
            list(arrow.iter_parquet(bytes(damaged), params, name="f.parquet"))
        except FormatError as exc:
            short += ["yielded" in str(exc)]
    assert any(short), "no flip of the first page header was refused by the row count"
