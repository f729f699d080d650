"""ldpfast.spark on a real Spark (local[2], retries on; one test on a local-cluster master).

Skipped without PySpark (the ``spark`` extra; .ci/run installs it), or where Spark cannot
start (no Java), except under CI=true, where a Spark that cannot start fails the run. One
SparkSession serves the module; the data are small, so the cost is Spark's fixed cost per
job (about 0.3-1 s).
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

import ldpfast
from ldpfast import arrow
from ldpfast._base import protocols

_IN_CI = os.environ.get("CI") == "true"
pytest.importorskip("pyspark", reason="PySpark is not installed (pip install 'ldpfast[spark]')")

import _toy_protocol  # noqa: E402,F401  (registers "toy-count": a protocol from outside ldpfast)
import ldpfast.spark as lspark  # noqa: E402
from ldpfast.dask import aggregate_files as single_process  # noqa: E402
from ldpfast.errors import (DTypeError, FormatError, IncompatibleError, ParameterError, ReportError,  # noqa: E402
                            StorageError)
from ldpfast.spark._tasks import _keys, _spark_hash_long  # noqa: E402
from ldpfast.testing._case import Case, Options  # noqa: E402
from test_conformance import SUBJECTS  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

TESTS = Path(__file__).resolve().parent
MASTER = "local[2,3]"  # two cores, three attempts per task (as clusters retry)


def _session(master, **conf):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName("ldpfast-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.hadoop.parquet.page.verify-checksum.enabled", "true"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@pytest.fixture(scope="module")
def spark():
    try:
        session = _session(MASTER)
    except Exception as exc:  # no Java, no free port, ...
        if _IN_CI:
            raise
        pytest.skip(f"Spark cannot start here: {exc}")
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.addPyFile(str(TESTS / "_toy_protocol.py"))
    yield session
    session.stop()


@pytest.fixture
def job_group(spark):
    """A job group for the test's Spark jobs, to count their failed tasks afterwards."""
    sc = spark.sparkContext
    group = f"test-{os.urandom(4).hex()}"
    sc.setJobGroup(group, "ldpfast test")
    yield group
    sc.setLocalProperty("spark.jobGroup.id", None)


def _failed_tasks(spark, group):
    tracker = spark.sparkContext.statusTracker()
    total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job_id)
        for stage_id in (info.stageIds if info else []):
            stage = tracker.getStageInfo(stage_id)
            total += stage.numFailedTasks if stage else 0
    return total


def _perturb(proto, params, values, seed):
    with warnings.catch_warnings():  # PrivSketch clients warn that they are not eps-LDP
        warnings.simplefilter("ignore")
        return proto.client(params, rng=seed).perturb(values)


def _write(folder, batches, params, **kwargs):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, batch in enumerate(batches):
        path = folder / f"part-{i:04d}.parquet"
        arrow.write_parquet(batch, path, params, fingerprint_column=True, **kwargs)
        paths.append(str(path))
    return paths


def _hrr(d=4096, epsilon=1.0):
    proto = protocols()["hrr"]
    return proto, proto.params(epsilon=epsilon, d=d)


def _hrr_files(folder, n_files=3, n=20_000, epsilon=1.0, d=4096, seed=0):
    proto, params = _hrr(d, epsilon)
    rng = np.random.default_rng(seed)
    batches = [_perturb(proto, params, rng.integers(0, d, n), seed + i) for i in range(n_files)]
    return proto, params, _write(folder, batches, params)


# -- every protocol, both routes, byte-identical ------------------------------------------------
@pytest.mark.filterwarnings("ignore::ldpfast.errors.PrivacyWarning")  # PrivSketch's parameters: not eps-LDP
@pytest.mark.parametrize("case_id", sorted(SUBJECTS))
def test_every_protocol_is_byte_identical_through_both_routes(spark, tmp_path, case_id):
    """Every registered protocol's example (and the server options of test_conformance),
    through the files route (partials spilled to a directory, the default on a local
    master) and the DataFrame route over the same files (list columns come back from Spark
    as arrays, uint32 as bigint, uint64 as decimal(20,0); partials in pieces through Spark's
    shuffles): both equal one process (ldpfast.dask.aggregate_files), byte for byte."""
    pid, make_server, _ = SUBJECTS[case_id]
    proto = protocols()[pid]
    case = Case(proto, proto.example, make_server, Options())
    params = case.params
    paths = _write(tmp_path / "reports", case.parts, params)
    empty = case.server()
    expected = single_process(type(empty), empty.to_bytes(), paths)
    start = params if make_server is None else empty
    assert lspark.aggregate_files(paths, start, spark=spark).to_bytes() == expected
    df = spark.read.parquet(str(tmp_path / "reports"))
    assert lspark.aggregate_dataframe(df, start, spill=None).to_bytes() == expected


def test_merge_stages_and_pieces_keep_the_bytes(spark, tmp_path):
    """OLH keeps its reports (a state that grows with them): 5 partials of about 3 pieces
    each go through two merge stages (fan-in 2: 5 -> 3 -> 2) and a fetch of several jobs,
    or through a spill directory; reversing the files changes the tree, not the bytes."""
    olh = protocols()["olh"]
    params = olh.params(epsilon=2.0, d=1 << 16)
    rng = np.random.default_rng(8)
    batches = [_perturb(olh, params, rng.integers(0, params.d, 2_000), i) for i in range(5)]
    paths = _write(tmp_path / "reports", batches, params)
    expected = single_process(olh.aggregator, olh.aggregator(params).to_bytes(), paths)
    spill = tmp_path / "spill"
    spill.mkdir()
    for order, where in ((paths, None), (paths[::-1], spill)):
        got = lspark.aggregate_files(order, params, spark=spark, tasks=5, fan_in=2, piece_bytes=20_000, spill=where)
        assert got.to_bytes() == expected
    assert list(spill.iterdir()) == []  # the spilled partials are removed
    df = spark.read.parquet(str(tmp_path / "reports")).repartition(5)
    assert lspark.aggregate_dataframe(df, params, fan_in=2, piece_bytes=20_000, spill=None).to_bytes() == expected


def test_spark_places_rows_where_spark_hash_partitioning_does(spark):
    from pyspark.sql import functions as F

    rows = spark.range(-50, 200).select("id", F.hash("id").alias("h")).collect()
    assert all(_spark_hash_long(r.id) == r.h for r in rows)
    keys = _keys(7)
    placed = spark.createDataFrame([(k,) for k in keys], "dest long").repartition(7, "dest") \
        .select("dest", F.spark_partition_id().alias("p")).collect()
    assert sorted((keys.index(r.dest), r.p) for r in placed) == [(p, p) for p in range(7)]


# -- reports made with other parameters ---------------------------------------------------------
@pytest.mark.parametrize("other", [{"epsilon": 2.0}, {"d": 4000}], ids=["epsilon", "d"])
def test_a_file_of_other_parameters_is_refused_naming_it(spark, tmp_path, job_group, other):
    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=4, n=5_000)
    kwargs = {"epsilon": 1.0, "d": 4096, **other}
    odd = proto.params(**kwargs)
    arrow.write_parquet(_perturb(proto, odd, np.arange(5_000) % odd.d, 9), paths[2], odd, fingerprint_column=True)
    with pytest.raises(IncompatibleError, match=re.escape(paths[2])):
        lspark.aggregate_files(tmp_path / "reports", params, spark=spark)
    assert _failed_tasks(spark, job_group) == 0  # refused once, not retried
    df = spark.read.parquet(str(tmp_path / "reports"))
    with pytest.raises(IncompatibleError, match=re.escape(paths[2]) + ": reports were made with different parameters"):
        lspark.aggregate_dataframe(df, params)  # from its metadata, before any job


def test_labelled_reports_keep_their_vocabulary_and_another_one_is_refused(spark, tmp_path):
    """Issue 22's domains are part of the fingerprint: files written with one vocabulary
    aggregate (both routes) to one process's bytes, the result decodes labels with the
    caller's vocabulary (bytes know it by its fingerprint only), and parameters with another
    vocabulary of the same size are refused."""
    from ldpfast import Domain

    labels = [f"word-{i}" for i in range(64)]
    proto = protocols()["grr"]
    params = proto.params(epsilon=1.0, d=64).with_domain(Domain(labels))
    batches = [_perturb(proto, params, [labels[(7 * i + j) % 64] for j in range(2_000)], i) for i in range(3)]
    paths = _write(tmp_path / "reports", batches, params)
    expected = single_process(proto.aggregator, proto.aggregator(params).to_bytes(), paths)
    reference = proto.aggregator.from_bytes(expected, domain=params.label_domain).estimate(labels[:2])
    df = spark.read.parquet(str(tmp_path / "reports"))
    for got in (lspark.aggregate_files(paths, params, spark=spark), lspark.aggregate_dataframe(df, params)):
        assert got.to_bytes() == expected
        assert np.array_equal(got.estimate(labels[:2]), reference)  # labels decoded: the vocabulary is back
    assert isinstance(lspark.aggregate_files([], params, spark=spark).params.label_domain, Domain)  # empty input
    other = proto.params(epsilon=1.0, d=64).with_domain(Domain([f"other-{i}" for i in range(64)]))
    # every file holds the other vocabulary: the refusal names whichever task failed first
    any_file = "(" + "|".join(re.escape(str(path)) for path in paths) + ")"
    with pytest.raises(IncompatibleError, match=any_file):
        lspark.aggregate_files(paths, other, spark=spark)
    with pytest.raises(IncompatibleError, match=any_file + ": reports were made with different parameters"):
        lspark.aggregate_dataframe(df, other)
    with pytest.raises(IncompatibleError, match=r"row 0: made with other parameters"):  # the rows say so too
        lspark.aggregate_dataframe(df.localCheckpoint(), other)  # no files: only the rows are checked


def test_a_dataframe_without_fingerprints_is_refused_before_any_job(spark, tmp_path, job_group):
    proto, params = _hrr()
    arrow.write_parquet(_perturb(proto, params, np.arange(100), 1), tmp_path / "plain.parquet", params)
    df = spark.read.parquet(str(tmp_path / "plain.parquet"))
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup(job_group)
    with pytest.raises(ParameterError, match=r"fingerprint_column=True.*aggregate_files.*fingerprint_value"):
        lspark.aggregate_dataframe(df, params)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(job_group) == jobs_before


# -- damaged pages ------------------------------------------------------------------------------
def _flip_a_data_byte(path):
    """Flip one byte in the middle of the first column's first data page."""
    import pyarrow.parquet as pq

    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    start = column.data_page_offset
    middle = start + column.total_compressed_size // 2
    data = bytearray(Path(path).read_bytes())
    data[middle] ^= 0x10
    Path(path).write_bytes(bytes(data))


def test_a_damaged_page_is_refused(spark, tmp_path):
    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=2, n=20_000)
    arrow.write_parquet(_perturb(proto, params, np.arange(20_000) % 4096, 5), paths[1], params,
                        compression="none", fingerprint_column=True)
    _flip_a_data_byte(paths[1])
    with pytest.raises(FormatError, match=re.escape(paths[1]) + ".*(checksum|CRC|damaged)"):
        lspark.aggregate_files(paths, params, spark=spark)
    df = spark.read.parquet(str(tmp_path / "reports"))
    with pytest.raises(Exception, match="(?i)checksum|crc"):  # Spark's reader verifies (session setting)
        lspark.aggregate_dataframe(df, params)


def test_the_checksum_guard_reads_the_setting_spark_applies(spark, tmp_path):
    """Which key makes Spark verify page checksums is measured here, on a damaged file not
    named *.parquet: set at run time, the plain parquet-mr key and the reader option are
    applied (and accepted), ``spark.hadoop.<key>`` is not (and is refused, saying why); a
    run-time ``false`` over the session's ``true`` is refused."""
    key = "parquet.page.verify-checksum.enabled"
    proto, params = _hrr()
    folder = tmp_path / "reports"
    folder.mkdir()
    damaged = folder / "part-0000.data"  # Spark reads every file of the directory, whatever its name
    arrow.write_parquet(_perturb(proto, params, np.arange(20_000) % 4096, 5), damaged, params,
                        compression="none", fingerprint_column=True)
    _flip_a_data_byte(damaged)
    context_conf = spark.sparkContext._jsc.hadoopConfiguration()
    context_conf.unset(key)  # as if the session had started without spark.hadoop.<key>
    try:
        spark.conf.set(f"spark.hadoop.{key}", "true")
        try:
            spark.read.parquet(str(folder)).selectExpr("sum(rows)").collect()  # the damaged page is read: no check
            with pytest.raises(ParameterError, match=re.escape(f"'spark.hadoop.{key}' is set in spark.conf, but "
                                                               "Spark applies spark.hadoop.* keys only when")):
                lspark.aggregate_dataframe(spark.read.parquet(str(folder)), params)
        finally:
            spark.conf.unset(f"spark.hadoop.{key}")
        spark.conf.set(key, "true")
        try:
            with pytest.raises(Exception, match="(?i)checksum|crc"):
                lspark.aggregate_dataframe(spark.read.parquet(str(folder)), params)
        finally:
            spark.conf.unset(key)
        with pytest.raises(Exception, match="(?i)checksum|crc"):
            lspark.aggregate_dataframe(spark.read.option(key, "true").parquet(str(folder)), params)
    finally:
        context_conf.set(key, "true")
    spark.conf.set(key, "false")
    try:
        with pytest.raises(ParameterError, match=re.escape(str(damaged)) + ".*" + re.escape(f"{key} = false")):
            lspark.aggregate_dataframe(spark.read.parquet(str(folder)), params)
    finally:
        spark.conf.unset(key)


# -- columns Spark widens -----------------------------------------------------------------------
def test_widened_values_that_do_not_fit_are_refused(spark):
    from pyspark.sql import functions as F

    proto, params = _hrr(d=1000)
    fp = arrow.fingerprint_value(params)
    rows = [(1, 1, fp), (2**32, 1, fp)]  # rows is uint32: 2^32 does not fit
    df = spark.createDataFrame(rows, "rows long, bits byte, ldpfast_fingerprint long")
    with pytest.raises(ReportError, match=r"row 1: report column 'rows' must fit uint32, got 4294967296"):
        lspark.aggregate_dataframe(df.coalesce(1), params)
    grr = protocols()["grr"]
    gparams = grr.params(epsilon=1.0, d=1000)
    for bad in (2**64, -1):
        df = spark.createDataFrame([(Decimal(5),), (Decimal(bad),)], "y decimal(20,0)") \
            .withColumn("ldpfast_fingerprint", F.lit(arrow.fingerprint_value(gparams)))
        with pytest.raises(ReportError, match=r"row 1: report column 'y' holds a value outside \[0, 2\^64\)"):
            lspark.aggregate_dataframe(df.coalesce(1), gparams)


# -- memory ---------------------------------------------------------------------------------------
def test_partials_larger_than_the_driver_can_pickle_travel_in_pieces(spark, tmp_path):
    """GRR over d = 2^24 values: every partial is 128 MiB of counts. Whole partials through
    the driver's JVM (1 GiB heap by default) exhaust it (the recipe this replaces); pieces
    of at most 8 MiB through Spark's shuffles, at most 64 MiB per fetch, do not."""
    grr = protocols()["grr"]
    params = grr.params(epsilon=1.0, d=1 << 24)
    rng = np.random.default_rng(3)
    batches = [_perturb(grr, params, rng.integers(0, params.d, 1000), i) for i in range(2)]
    paths = _write(tmp_path / "reports", batches, params)
    got = lspark.aggregate_files(paths, params, spark=spark, tasks=2, spill=None)
    assert got.to_bytes() == grr.aggregator(params).update(batches[0]).update(batches[1]).to_bytes()


# -- errors name the file and the row; data errors are not retried -----------------------------
def _bad_hrr_file(folder, bad_row):
    proto, params = _hrr(d=1000)
    batch = _perturb(proto, params, np.arange(60_000) % 1000, 4)
    rows = batch.rows.copy()
    rows[bad_row] = 1 << 31  # far outside every row range of d = 1000
    bad = type(batch).from_columns({"rows": rows, "bits": batch.bits})
    folder.mkdir()
    path = folder / "part-0000.parquet"
    arrow.write_parquet(bad, path, params, fingerprint_column=True)
    return params, str(path)


def test_a_bad_report_is_named_by_file_and_row_and_not_retried(spark, tmp_path, job_group):
    params, path = _bad_hrr_file(tmp_path / "reports", 54_321)
    with pytest.raises(ReportError, match=re.escape(path) + r", row 54321: "):
        lspark.aggregate_files(path, params, spark=spark, batch_rows=10_000)
    df = spark.read.parquet(str(tmp_path / "reports"))
    with pytest.raises(ReportError, match=re.escape(path) + r", row 54321: "):
        lspark.aggregate_dataframe(df, params)
    assert _failed_tasks(spark, job_group) == 0


def test_a_data_error_cancels_the_job_at_once(spark, tmp_path):
    """Partition 0 holds a bad report, partition 1 takes two minutes: the error cancels the
    job instead of waiting for partition 1 (or retrying partition 0)."""
    import time

    params, path = _bad_hrr_file(tmp_path / "reports", 10)
    good = spark.read.parquet(str(tmp_path / "reports")).limit(5)

    def two_minutes(batches):  # nested: shipped by value
        import time

        time.sleep(120)
        yield from batches

    df = spark.read.parquet(path).union(good.mapInArrow(two_minutes, good.schema))
    started = time.perf_counter()
    with pytest.raises(ReportError, match=r"row 10: "):
        lspark.aggregate_dataframe(df, params, require_page_checksums=False)
    assert time.perf_counter() - started < 90


def test_a_file_missing_a_column_is_named(spark, tmp_path):
    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=3, n=1_000)
    schema = spark.read.parquet(paths[0]).schema
    table = arrow.to_arrow(_perturb(proto, params, np.arange(1_000) % 4096, 7), params, fingerprint_column=True)
    import pyarrow.parquet as pq

    pq.write_table(table.drop_columns(["bits"]), paths[1])
    with pytest.raises(FormatError, match=re.escape(paths[1]) + ".*columns must be"):
        lspark.aggregate_files(paths, params, spark=spark)
    df = spark.read.schema(schema).parquet(str(tmp_path / "reports"))
    with pytest.raises(ReportError, match=re.escape(paths[1]) + r", row 0: report column 'bits' has no value"):
        lspark.aggregate_dataframe(df, params, require_page_checksums=False)


def test_a_killed_worker_is_retried_and_nothing_is_lost_or_counted_twice(spark, tmp_path, job_group):
    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=3, n=20_000)
    df = spark.read.parquet(str(tmp_path / "reports"))

    def kill_the_first_attempt_of_partition_0(batches):  # nested: shipped by value
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.partitionId() == 0 and context.attemptNumber() == 0:
            os._exit(3)  # the Python worker dies: a transient failure
        yield from batches

    flaky = df.mapInArrow(kill_the_first_attempt_of_partition_0, df.schema)
    got = lspark.aggregate_dataframe(flaky, params)
    assert got.to_bytes() == single_process(type(got), proto.aggregator(params).to_bytes(), paths)
    assert _failed_tasks(spark, job_group) >= 1  # the kill happened and was retried


# -- empty input ----------------------------------------------------------------------------------
def test_empty_input_gives_the_zero(spark, tmp_path):
    proto, params = _hrr()
    zero = proto.aggregator(params).to_bytes()
    (tmp_path / "none").mkdir()
    assert lspark.aggregate_files(tmp_path / "none", params, spark=spark).to_bytes() == zero
    schema = "rows long, bits byte, ldpfast_fingerprint long"
    no_partitions = spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)
    assert lspark.aggregate_dataframe(no_partitions, params).to_bytes() == zero
    no_rows = spark.createDataFrame([], schema).repartition(3)
    assert lspark.aggregate_dataframe(no_rows, params).to_bytes() == zero


# -- the command line -----------------------------------------------------------------------------
def test_ldpfast_aggregate_with_the_spark_engine_checkpoints_like_the_local_one(spark, tmp_path):
    from ldpfast.cli import main
    from ldpfast.commands.aggregate import decode_checkpoint

    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=3, n=5_000)
    states = {}
    for engine in ("local", "spark"):
        state, out = tmp_path / f"{engine}.ckpt", tmp_path / f"{engine}.bin"
        assert main(["aggregate", "--reports", str(tmp_path / "reports"), "--state", str(state),
                     "--output", str(out), "--engine", engine]) == 0
        states[engine] = (state.read_bytes(), out.read_bytes())
    assert states["spark"] == states["local"]
    agg, done = decode_checkpoint(states["spark"][0])
    assert [e["name"] for e in done] == [Path(p).name for p in paths]


# -- the documentation page -----------------------------------------------------------------------
def test_the_spark_page_runs_as_written(spark, tmp_path, monkeypatch):
    """Every Python excerpt of docs/spark.md, in order, in one namespace (as a notebook
    would run them), on this session."""
    page = (TESTS.parent / "docs" / "spark.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__spark_page__"}
    for block in blocks:
        exec(compile(block, "docs/spark.md", "exec"), namespace)


# -- a cluster with executors in their own JVMs ----------------------------------------------------
LOCAL_CLUSTER = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    from pyspark.sql import SparkSession
    import ldpfast.spark as lspark
    from ldpfast import arrow
    from ldpfast._base import protocols
    from ldpfast.dask import aggregate_files

    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.pyspark.python", sys.executable)
             .config("spark.hadoop.parquet.page.verify-checksum.enabled", "true").getOrCreate())
    out = {}
    for pid in ("npcms",):  # list columns, uint16 widened to int
        proto = protocols()[pid]
        params, values = proto.example()
        paths = []
        for i in range(3):
            path = f"{sys.argv[1]}/{pid}/part-{i}.parquet"
            arrow.write_parquet(proto.client(params, rng=i).perturb(values), path, params, fingerprint_column=True)
            paths.append(path)
        zero = proto.aggregator(params).to_bytes()
        expected = aggregate_files(proto.aggregator, zero, paths)
        files = lspark.aggregate_files(paths, params, spark=spark, tasks=3, fan_in=2).to_bytes()
        frame = lspark.aggregate_dataframe(spark.read.parquet(f"{sys.argv[1]}/{pid}"), params, spill=None).to_bytes()
        out[pid] = [files == expected, frame == expected]
    print(json.dumps(out))
    spark.stop()
""")


def test_local_cluster_executors_in_their_own_jvms(tmp_path):
    """Separate executor JVMs (1 GiB each) and real serialization between them, on the
    local-cluster master of the PySpark wheel: a merge stage and the spill directory
    (files route), pieces through shuffles (DataFrame route)."""
    (tmp_path / "npcms").mkdir()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(Path(ldpfast.__file__).resolve().parents[1]),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", LOCAL_CLUSTER, str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"npcms": [True, True]}


# -- the files a DataFrame reads, checked before any job -----------------------------------------
def _jobs(spark, group):
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_a_file_whose_metadata_records_other_parameters_is_refused_before_any_job(spark, tmp_path, job_group):
    """A file whose rows carry eps 1's fingerprint but whose metadata records eps 2: the
    per-row check alone would aggregate it; the file's metadata is checked too, naming it.
    Metadata whose fingerprint is not that of its own parameters is a FormatError."""
    import pyarrow.parquet as pq

    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=2, n=1_000)
    other = proto.params(epsilon=2.0, d=4096)
    table = arrow.to_arrow(_perturb(proto, params, np.arange(1_000), 3), params, fingerprint_column=True)
    other_metadata = arrow.to_arrow(_perturb(proto, other, np.arange(10), 3), other).schema.metadata
    pq.write_table(table.replace_schema_metadata(other_metadata), paths[1])
    df = spark.read.parquet(str(tmp_path / "reports"))
    jobs = _jobs(spark, job_group)
    with pytest.raises(IncompatibleError, match=re.escape(paths[1]) + ": reports were made with different parameters"):
        lspark.aggregate_dataframe(df, params)
    assert _jobs(spark, job_group) == jobs
    forged = {**other_metadata, b"ldpfast.fingerprint": params.fingerprint.encode()}
    pq.write_table(table.replace_schema_metadata(forged), paths[1])
    with pytest.raises(FormatError, match=re.escape(paths[1]) + ": stored parameter fingerprint does not match"):
        lspark.aggregate_dataframe(spark.read.parquet(str(tmp_path / "reports")), params)


def test_an_empty_file_is_refused_naming_it(spark, tmp_path, job_group):
    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=2, n=1_000)
    empty = tmp_path / "reports" / "part-0002.parquet"
    empty.write_bytes(b"")
    df = spark.read.parquet(str(tmp_path / "reports"))
    assert df.count() == 2_000  # Spark skips the empty file without a word
    jobs = _jobs(spark, job_group)
    with pytest.raises(FormatError, match=re.escape(str(empty)) + r" is empty \(0 bytes\)"):
        lspark.aggregate_dataframe(df, params)
    assert _jobs(spark, job_group) == jobs


def test_a_file_with_a_report_column_of_another_type_is_refused_at_once(spark, tmp_path, job_group):
    """Spark fails every attempt of the task reading a file whose column type differs from
    the DataFrame's (a Spark error after the retries); the footers are checked first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=2, n=1_000)
    table = arrow.to_arrow(_perturb(proto, params, np.arange(1_000), 3), params, fingerprint_column=True)
    pq.write_table(table.set_column(0, "rows", table.column("rows").cast(pa.float64())), paths[1])
    df = spark.read.schema(spark.read.parquet(paths[0]).schema).parquet(str(tmp_path / "reports"))
    jobs = _jobs(spark, job_group)
    with pytest.raises(DTypeError, match=re.escape(paths[1]) + ": report column 'rows' is double in this file, "
                                         "but the DataFrame reads it as long"):
        lspark.aggregate_dataframe(df, params)
    assert _jobs(spark, job_group) == jobs


def test_a_missing_directory_or_file_is_named_as_missing(tmp_path):
    _, params = _hrr()
    missing = str(tmp_path / "missing")
    for source, start in ((missing, params), (missing, None), ([missing + ".parquet"], params)):
        with pytest.raises(StorageError, match="no such directory or file: " + re.escape(missing)):
            lspark.aggregate(source, start)


# -- the Python of a session ldpfast starts -------------------------------------------------------
SESSION_OF_ITS_OWN = textwrap.dedent("""
    import json, sys
    import ldpfast.spark
    from ldpfast.dask import aggregate_files

    server = ldpfast.spark.aggregate(sys.argv[1])  # no session: ldpfast starts a local one
    files = ldpfast.spark.list_report_files(sys.argv[1])
    expected = aggregate_files(type(server), type(server)(server.params).to_bytes(), files)
    from pyspark import SparkContext
    print(json.dumps([server.to_bytes() == expected, SparkContext._active_spark_context.pythonExec]))
""")


def test_a_session_ldpfast_starts_runs_this_python_on_its_workers(tmp_path):
    """As from a virtual environment that is not activated: ``python3`` on the PATH is
    another Python (here one that fails), PYSPARK_PYTHON unset. The local session ldpfast
    starts runs its workers on this interpreter."""
    _hrr_files(tmp_path / "reports", n_files=2, n=1_000)
    (tmp_path / "bin").mkdir()
    other = tmp_path / "bin" / "python3"
    other.write_text("#!/bin/sh\necho 'not the caller's Python' >&2\nexit 1\n")
    other.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK")}
    env.update(PATH=os.pathsep.join([str(tmp_path / "bin"), "/usr/bin", "/bin"]),
               PYTHONPATH=str(Path(ldpfast.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-c", SESSION_OF_ITS_OWN, str(tmp_path / "reports")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [True, sys.executable]


def test_a_python_the_user_names_is_kept(spark, monkeypatch):
    from ldpfast.spark._run import _with_this_python

    context = spark.sparkContext
    before = context.pythonExec
    try:
        monkeypatch.setenv("PYSPARK_PYTHON", "/opt/their/python")
        assert _with_this_python(spark).sparkContext.pythonExec == "/opt/their/python"
        monkeypatch.delenv("PYSPARK_PYTHON")
        assert _with_this_python(spark).sparkContext.pythonExec == sys.executable
    finally:
        context.pythonExec = before


def test_files_read_through_a_source_the_plan_does_not_show_are_refused(spark, tmp_path):
    """With Parquet read as a DataSource V2 table, ldpfast cannot see the Hadoop settings of
    the reader: refused unless the caller says the reader verifies the checksums."""
    proto, params, paths = _hrr_files(tmp_path / "reports", n_files=2, n=1_000)
    spark.conf.set("spark.sql.sources.useV1SourceList", "")
    try:
        df = spark.read.parquet(str(tmp_path / "reports"))
        with pytest.raises(ParameterError, match="through a source ldpfast cannot inspect"):
            lspark.aggregate_dataframe(df, params)
        got = lspark.aggregate_dataframe(df, params, require_page_checksums=False)
    finally:
        spark.conf.unset("spark.sql.sources.useV1SourceList")
    assert got.to_bytes() == single_process(type(got), proto.aggregator(params).to_bytes(), paths)


# -- the documentation pages with Spark blocks, whole and in order, on this module's session ------
# (tests/test_docs.py runs every page without its Spark blocks; one session serves both, and a
# session started earlier in the suite would replace Python's SIGINT handler before the
# conformance kit's interrupt checks run)
def _spark_pages():
    from test_docs import PAGES, SPARK_BLOCK, python_blocks

    return [page for page in PAGES if any(re.search(SPARK_BLOCK, block, flags=re.M) for block in python_blocks(page))]


def test_the_end_to_end_guide_has_spark_blocks():
    assert any(page.name == "end-to-end.md" for page in _spark_pages())


@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
@pytest.mark.parametrize("page", _spark_pages(), ids=lambda page: page.name)
def test_documentation_page_runs_on_spark(page, spark, tmp_path, monkeypatch):
    from test_docs import NOT_RUN, python_blocks

    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    for index, block in enumerate(python_blocks(page)):
        if not block.startswith(NOT_RUN):
            exec(compile(block, f"{page}, block {index}", "exec"), namespace)
