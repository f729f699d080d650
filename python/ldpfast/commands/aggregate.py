"""``ldpfast aggregate``: resumable aggregation of a directory of Parquet report files.

Files (``*.parquet`` in ``--reports``, written by :func:`ldpfast.arrow.write_parquet`)
are ingested in sorted name order. After each file the aggregator state and the list of
finished files are checkpointed to ``--state`` atomically (temporary file, fsync,
``os.replace``, fsync of the directory), so a run that is killed at any point resumes
from the last finished file and ends with the same bytes as an uninterrupted run.

Checkpoint layout (little-endian)::

    magic b"LDPFCKP\\0" | u16 version | u32 hlen | header JSON (hlen bytes) |
    u64 alen | aggregator bytes (alen, see ldpfast._base) | u32 crc32 of all before

The header holds the protocol id, the parameter fingerprint and ``done``: the finished
files as ``{"name", "size", "sha256"}`` in ingestion order. Each file is read once into
memory and its size and sha256 are those of exactly the bytes aggregated (a file replaced
while being read is then refused on resume, never recorded with the other file's hash).
On resume ``done`` must be a prefix of the current sorted file list with the same sizes
and contents (files already ingested must not change; resuming re-reads them once to
check their sha256).

Every read or write failure (missing or unreadable file, disk full, damaged Parquet data,
a page checksum mismatch) stops the run with exit status 2 and a message naming the file;
no temporary file is left behind and the last checkpoint stays valid.

``--engine spark`` aggregates the files not yet checkpointed in one Spark job
(:mod:`ldpfast.spark`, files route) and checkpoints once, at the end, with the same
``done`` entries (each task hashes exactly the bytes it aggregated); the final bytes are
those of the local engine. A run stopped before the job ends resumes from the previous
checkpoint.

Each checkpoint rewrites the whole state. That is cheap for count-based aggregators
(HRR, GRR, HadaOracle, OCMS with ``--init`` candidates, ...); aggregators that keep the
reports (OCMS without candidates, OLH) grow with the input, so prefer few large files or
a candidate set for them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Tuple, Type

from .._base import Aggregator, Params, params_from_json, protocol
from .._optional import require
from ..errors import FormatError, IncompatibleError, LdpfastError, ParameterError, StorageError
from ._checkpoint import decode_checkpoint, differences, encode_checkpoint
from ._options import integer

HELP = "aggregate a directory of Parquet report files, resumably (checkpoint after each file)"

# Test hooks (used by tests/test_aggregate_cli.py to kill a run at a precise point):
#   LDPFAST_AGGREGATE_PAUSE_AFTER=k   after checkpointing the k-th file, print
#                                     "ldpfast-aggregate: paused after k" and sleep.
#   LDPFAST_AGGREGATE_KILL_IN_CHECKPOINT=k  while writing the k-th checkpoint, SIGKILL
#                                     this process after the temporary file is written
#                                     and before it replaces the state.
_PAUSE_ENV = "LDPFAST_AGGREGATE_PAUSE_AFTER"
_KILL_ENV = "LDPFAST_AGGREGATE_KILL_IN_CHECKPOINT"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reports", required=True, type=Path,
                        help="directory of *.parquet report files (ingested in sorted name order)")
    parser.add_argument("--state", required=True, type=Path,
                        help="checkpoint file; created if missing, resumed from if present")
    parser.add_argument("--params", type=Path, default=None,
                        help="parameters as JSON (Params.to_json()); default: those of --init, "
                             "else those recorded in the first Parquet file. Every file must "
                             "record these parameters")
    parser.add_argument("--init", type=Path, default=None,
                        help="empty aggregator bytes (Aggregator.to_bytes) to start from, for "
                             "aggregators with options, e.g. OCMSServer(params, candidates=...)")
    parser.add_argument("--output", type=Path, default=None,
                        help="also write the final aggregator bytes (Aggregator.to_bytes) here")
    parser.add_argument("--write-params", type=Path, default=None,
                        help="write the parameters used (Params.to_json()) to this file")
    parser.add_argument("--batch-rows", type=integer, default=1 << 20,
                        help="rows decoded at a time from a file (bounds memory besides the file's own "
                             "bytes; default 1048576)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show a progress line on stderr (default: when stderr is a terminal)")
    parser.add_argument("--engine", choices=("local", "spark"), default="local",
                        help="local: this process, checkpoint after each file (default); spark: the "
                             "remaining files in one Spark job (pip install 'ldpfast[spark]'), one "
                             "checkpoint at its end")
    parser.add_argument("--spark-master", default=None,
                        help="with --engine spark: the Spark master URL (default: an active session's, "
                             "else local[*]); the report files must be readable from the executors")


@contextlib.contextmanager
def _io(action: str, path: Path) -> Iterator[None]:
    """Turns an OSError into StorageError naming the file and the system's reason."""
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(f"cannot {action} {path}: {exc.strerror or exc}") from None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")


def atomic_write(path: Path, data: bytes, *, before_replace: Optional[Callable[[], None]] = None) -> None:
    """Write ``data`` to ``path`` so that ``path`` always holds either the old or the new
    contents: temporary file in the same directory, fsync, rename, fsync the directory.
    On failure the temporary file is removed and StorageError names ``path``."""
    tmp = _temporary(path)
    with _io("write", path):
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if before_replace is not None:
                before_replace()
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        _fsync_dir(path.parent)


@contextlib.contextmanager
def _named(source: str) -> Iterator[None]:
    """Puts ``source`` (the file, or the option and its file) in front of an ldpfast error's message."""
    try:
        yield
    except LdpfastError as exc:
        raise type(exc)(f"{source}: {exc}") from None


@contextlib.contextmanager
def _differing(path: Path, data: bytes, params: Params) -> Iterator[None]:
    """An IncompatibleError of the report file ``path`` names the parameters that differ."""
    from ..arrow import read_parquet_params

    try:
        yield
    except IncompatibleError as exc:
        try:
            differing = differences(read_parquet_params(data, name=str(path)), params)
        except LdpfastError:
            differing = ""
        if not differing:
            raise
        # the differing parameters, then the reader's refusal (the file and both fingerprints)
        raise IncompatibleError(f"{path} was made with other parameters: {differing} ({exc})") from None


def _read_init(path: Path) -> Tuple[Aggregator, bytes]:
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ParameterError(f"--init: cannot read {path}: {exc}") from None
    with _named(f"--init {path}"):
        return Aggregator.from_bytes(blob), blob


def _load_params(args: argparse.Namespace, files: List[Path]) -> Params:
    if args.params is None and args.init is not None:
        return _read_init(args.init)[0].params
    if args.params is not None:
        try:
            text = args.params.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ParameterError(f"--params: cannot read {args.params}: {exc}") from None
        with _named(f"--params {args.params}"):
            return params_from_json(text)
    if not files:
        raise ParameterError(f"--params is required: no *.parquet files in {args.reports}")
    from ..arrow import read_parquet_params

    return read_parquet_params(files[0])


def _initial(args: argparse.Namespace, params: Params) -> Aggregator:
    if args.init is None:
        aggregator: Type[Aggregator] = protocol(params.protocol).aggregator
        return aggregator(params)
    agg, blob = _read_init(args.init)
    if agg.params != params:
        raise IncompatibleError(f"--init {args.init} holds an aggregator with parameters {agg.params} "
                                f"(fingerprint {agg.params.fingerprint[:16]}), not {params} "
                                f"(fingerprint {params.fingerprint[:16]})")
    if type(agg).from_bytes(blob).merge(type(agg).from_bytes(blob)).to_bytes() != blob:
        raise ParameterError(f"--init {args.init} must hold an empty aggregator (it already has reports)")
    return agg


def _resume(state: Path, initial: Aggregator, files: List[Path]) -> Tuple[Aggregator, List[Dict[str, Any]]]:
    params = initial.params
    if not state.exists():
        return initial, []
    with _io("read", state):
        blob = state.read_bytes()
    try:
        agg, done = decode_checkpoint(blob)
    except FormatError as exc:
        raise FormatError(f"--state {state}: {exc}") from None
    if agg.params != params:
        raise IncompatibleError(f"--state {state} holds an aggregator with other parameters: "
                                f"{differences(agg.params, params)}")
    try:  # e.g. OCMS candidates: merging the initial aggregator checks its options match
        type(agg).from_bytes(agg.to_bytes()).merge(initial)
    except IncompatibleError as exc:
        raise IncompatibleError(f"--state {state} does not match --init: {exc}") from None
    if len(done) > len(files):
        raise IncompatibleError(f"--state {state} records {len(done)} finished files but "
                                f"{len(files)} are present")
    for entry, path in zip(done, files):
        with _io("read", path):
            size = path.stat().st_size
            if entry["name"] != path.name or entry["size"] != size or entry["sha256"] != _sha256(path):
                raise IncompatibleError(
                    f"--state {state} records {entry['name']!r} ({entry['size']} bytes) as finished, but "
                    f"the sorted file list has {path.name!r} ({size} bytes, other contents) "
                    "there; files already ingested must not be changed, removed or sorted before them")
    return agg, done


@contextlib.contextmanager
def _exclusive(state: Path) -> Iterator[None]:
    lock_path = state.with_name(f".{state.name}.lock")
    with _io("create the lock file", lock_path):
        lock = open(lock_path, "a")
    with lock:
        try:
            _lock_nonblocking(lock)
        except OSError:  # BlockingIOError (POSIX) or PermissionError (Windows): held elsewhere
            raise ParameterError(f"--state {state} is in use by another ldpfast aggregate run") from None
        yield


def _lock_nonblocking(handle: IO[str]) -> None:
    """An exclusive advisory lock on an open file, released when it is closed; raises
    OSError at once if another process holds it."""
    if sys.platform == "win32":
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_report_file(path: Path) -> bytes:
    """The whole file, read once: the bytes that are both aggregated and hashed."""
    with _io("read", path), open(path, "rb") as handle:
        return handle.read()


def _report_files(folder: Path) -> List[Path]:
    if not folder.is_dir():
        raise ParameterError(f"--reports must be a directory, got {folder}")
    with _io("list", folder):
        names = os.listdir(folder)
    return [folder / name for name in sorted(names) if name.endswith(".parquet")]


class _Progress:
    """One status line on stderr, rewritten in place at most every 0.2 s."""

    def __init__(self, enabled: bool, files: List[Path]):
        self.enabled = enabled
        self.total_files = len(files)
        self.total_bytes = 0
        if enabled:
            for path in files:
                with _io("read", path):
                    self.total_bytes += path.stat().st_size
        self.files = self.bytes = self.reports = 0
        self.shown = 0.0
        self.started = time.perf_counter()

    def update(self, *, reports: int = 0, file_bytes: Optional[int] = None, force: bool = False) -> None:
        self.reports += reports
        if file_bytes is not None:
            self.files += 1
            self.bytes += file_bytes
        now = time.perf_counter()
        if not self.enabled or (not force and now - self.shown < 0.2):
            return
        self.shown = now
        share = self.bytes / self.total_bytes if self.total_bytes else 1.0
        sys.stderr.write(f"\rldpfast aggregate: {self.files}/{self.total_files} files, {share:6.1%} of bytes, "
                         f"{self.reports:,} reports, {now - self.started:.1f} s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self.update(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()


def _hook(name: str) -> Optional[int]:
    value = os.environ.get(name)
    return int(value) if value else None


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except StorageError:
        raise
    except OSError as exc:  # anything not named by _io above
        raise StorageError(f"cannot access {exc.filename or 'a file'}: {exc.strerror or exc}") from None


def _run(args: argparse.Namespace) -> int:
    from ..arrow import iter_parquet

    if not 1 <= args.batch_rows < 2**63:     # Arrow's batch size is a signed 64-bit integer
        raise ParameterError(f"--batch-rows must be an integer in [1, 2^63 - 1], got {args.batch_rows}")
    files = _report_files(args.reports)
    params = _load_params(args, files)
    if args.write_params is not None:
        atomic_write(args.write_params, params.to_json().encode())
    if args.engine == "spark":
        return _run_spark(args, files, params)
    pause_after, kill_at = _hook(_PAUSE_ENV), _hook(_KILL_ENV)
    with _exclusive(args.state):
        with contextlib.suppress(FileNotFoundError):  # left by a run killed while checkpointing
            _temporary(args.state).unlink()
        agg, done = _resume(args.state, _initial(args, params), files)
        resumed = len(done)
        show = args.progress if args.progress is not None else sys.stderr.isatty()
        progress = _Progress(show, files[len(done):])
        started = time.perf_counter()
        reports = 0
        try:
            for path in files[len(done):]:
                data = _read_report_file(path)
                with _differing(path, data, params):
                    for _, batch in iter_parquet(data, params, batch_rows=args.batch_rows, name=str(path)):
                        with _named(str(path)):
                            agg.update(batch)
                        reports += len(batch)
                        progress.update(reports=len(batch))
                done.append({"name": path.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
                progress.update(file_bytes=len(data))
                del data
                kill = (lambda: os.kill(os.getpid(), signal.SIGKILL)) if kill_at == len(done) else None
                atomic_write(args.state, encode_checkpoint(agg, done), before_replace=kill)
                if pause_after == len(done):
                    print(f"ldpfast-aggregate: paused after {len(done)}", flush=True)
                    while True:
                        time.sleep(60)
        except KeyboardInterrupt:
            progress.close()
            print(f"ldpfast aggregate: interrupted; {len(done)} of {len(files)} files are checkpointed in "
                  f"{args.state}, run the same command again to resume", file=sys.stderr)
            return 130
        progress.close()
        if args.output is not None:
            atomic_write(args.output, agg.to_bytes())
        elapsed = time.perf_counter() - started
    print(json.dumps({"protocol": params.protocol, "fingerprint": params.fingerprint,
                      "files": len(files), "resumed_from": resumed, "ingested_files": len(files) - resumed,
                      "ingested_reports": reports, "seconds": round(elapsed, 3),
                      "state": str(args.state)}), file=sys.stdout)
    return 0


def _spark_session(master: Optional[str]) -> Any:
    SparkSession = require("pyspark.sql", "--engine spark").SparkSession
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    from ..spark._run import _with_this_python

    return _with_this_python(SparkSession.builder.master(master or "local[*]").appName("ldpfast aggregate")
                             .config("spark.ui.showConsoleProgress", "false").getOrCreate())


def _run_spark(args: argparse.Namespace, files: List[Path], params: Params) -> int:
    """The files not yet checkpointed, in one Spark job; one checkpoint at the end."""
    from ..spark._run import _aggregate_paths

    with _exclusive(args.state):
        with contextlib.suppress(FileNotFoundError):
            _temporary(args.state).unlink()
        initial = _initial(args, params)
        agg, done = _resume(args.state, initial, files)
        resumed = len(done)
        remaining = files[resumed:]
        started = time.perf_counter()
        reports = 0
        if remaining:
            session = _spark_session(args.spark_master)
            try:
                partial, entries = _aggregate_paths([str(p.resolve()) for p in remaining], initial, spark=session,
                                                    batch_rows=args.batch_rows, hash_files=True)
            except KeyboardInterrupt:
                print(f"ldpfast aggregate: interrupted; {resumed} of {len(files)} files are checkpointed in "
                      f"{args.state}, run the same command again to resume", file=sys.stderr)
                return 130
            if [e["name"] for e in entries] != [p.name for p in remaining]:  # never expected
                raise StorageError("the Spark job did not report every file once: "
                                   f"{[e['name'] for e in entries]}")
            reports = sum(e["reports"] for e in entries)
            agg.merge(partial)
            done.extend({key: e[key] for key in ("name", "size", "sha256")} for e in entries)
            atomic_write(args.state, encode_checkpoint(agg, done))
        if args.output is not None:
            atomic_write(args.output, agg.to_bytes())
        elapsed = time.perf_counter() - started
    print(json.dumps({"protocol": params.protocol, "fingerprint": params.fingerprint,
                      "files": len(files), "resumed_from": resumed, "ingested_files": len(files) - resumed,
                      "ingested_reports": reports, "seconds": round(elapsed, 3), "engine": "spark",
                      "state": str(args.state)}), file=sys.stdout)
    return 0
