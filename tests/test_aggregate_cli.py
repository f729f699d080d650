"""``ldpfast aggregate``: checkpointed, resumable aggregation, killed for real (SIGKILL)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")

import _toy_protocol as toy  # noqa: E402
import ldpfast  # noqa: E402
from ldpfast import arrow  # noqa: E402
from ldpfast.commands.aggregate import decode_checkpoint  # noqa: E402
from ldpfast.errors import FormatError  # noqa: E402

RUNNER = "import sys, _toy_protocol; from ldpfast.cli import main; sys.exit(main())"
N_FILES = 5


def _env(**extra):
    """The subprocess imports the same ldpfast as this process (installed or in-place
    build) and the toy protocol from tests/."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(ldpfast.__file__).resolve().parents[1]),
                                         str(Path(__file__).resolve().parent), env.get("PYTHONPATH", "")])
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _cli(args, **env):
    return subprocess.run([sys.executable, "-c", RUNNER, "aggregate", *map(str, args)],
                          env=_env(**env), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def reports_dir(tmp_path_factory):
    """Five Parquet files of toy reports, and the bytes of their in-process aggregate."""
    folder = tmp_path_factory.mktemp("reports")
    params, _ = toy._example()
    rng = np.random.default_rng(11)
    total = toy.ToyServer(params)
    for i in range(N_FILES):
        values = rng.integers(0, params.m, size=500 + 100 * i)
        batch = toy.ToyClient(params, rng=i).perturb(values)
        arrow.write_parquet(batch, folder / f"part-{i:03d}.parquet", params)
        total.update(batch)
    (folder.parent / "params.json").write_text(params.to_json())
    return folder, params, total.to_bytes()


def _args(folder, state, output):
    return ["--params", folder.parent / "params.json", "--reports", folder, "--state", state,
            "--output", output, "--batch-rows", 128]


def test_uninterrupted_run_matches_in_process_aggregation(reports_dir, tmp_path):
    folder, params, expected = reports_dir
    out = _cli(_args(folder, tmp_path / "s.ckpt", tmp_path / "agg.bin"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "agg.bin").read_bytes() == expected
    agg, done = decode_checkpoint((tmp_path / "s.ckpt").read_bytes())
    assert agg.to_bytes() == expected
    assert [d["name"] for d in done] == sorted(p.name for p in folder.glob("*.parquet"))
    # A second run finds everything done and changes nothing.
    again = _cli(_args(folder, tmp_path / "s.ckpt", tmp_path / "agg.bin"))
    assert again.returncode == 0 and '"ingested_files": 0' in again.stdout
    assert (tmp_path / "agg.bin").read_bytes() == expected


def test_params_default_to_those_recorded_in_the_files(reports_dir, tmp_path):
    folder, params, expected = reports_dir
    out = _cli(["--reports", folder, "--state", tmp_path / "s.ckpt", "--output", tmp_path / "a.bin",
                "--write-params", tmp_path / "p.json"])
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "a.bin").read_bytes() == expected
    assert (tmp_path / "p.json").read_text() == params.to_json()


def test_sigkill_mid_run_then_resume_gives_identical_bytes(reports_dir, tmp_path):
    folder, params, expected = reports_dir
    state, output = tmp_path / "s.ckpt", tmp_path / "agg.bin"
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, "aggregate", *map(str, _args(folder, state, output))],
                            env=_env(LDPFAST_AGGREGATE_PAUSE_AFTER=2), stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ldpfast-aggregate: paused after 2"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert not output.exists()
    _, done = decode_checkpoint(state.read_bytes())
    assert len(done) == 2
    resumed = _cli(_args(folder, state, output))
    assert resumed.returncode == 0, resumed.stderr
    assert '"resumed_from": 2' in resumed.stdout
    assert output.read_bytes() == expected


def test_kill_between_temp_write_and_replace_keeps_previous_checkpoint(reports_dir, tmp_path):
    folder, params, expected = reports_dir
    state, output = tmp_path / "s.ckpt", tmp_path / "agg.bin"
    killed = _cli(_args(folder, state, output), LDPFAST_AGGREGATE_KILL_IN_CHECKPOINT=3)
    assert killed.returncode == -signal.SIGKILL
    _, done = decode_checkpoint(state.read_bytes())
    assert len(done) == 2  # the third checkpoint never replaced the second
    resumed = _cli(_args(folder, state, output))
    assert resumed.returncode == 0, resumed.stderr
    assert output.read_bytes() == expected


def test_resume_refuses_changed_inputs_params_and_corrupt_state(reports_dir, tmp_path):
    folder, params, _ = reports_dir
    state = tmp_path / "s.ckpt"
    assert _cli(_args(folder, state, tmp_path / "a.bin"), LDPFAST_AGGREGATE_KILL_IN_CHECKPOINT=3).returncode != 0

    # A file sorted before the finished ones appears: the recorded prefix no longer matches.
    moved = tmp_path / "moved"
    moved.mkdir()
    for p in folder.glob("*.parquet"):
        os.link(p, moved / p.name)
    (moved / "aaa.parquet").write_bytes((folder / "part-000.parquet").read_bytes())
    out = _cli(["--params", folder.parent / "params.json", "--reports", moved, "--state", state])
    assert out.returncode == 2 and "must not be changed" in out.stderr

    # A finished file rewritten with other reports of the same size.
    changed = tmp_path / "changed"
    changed.mkdir()
    for p in folder.glob("*.parquet"):
        os.link(p, changed / p.name)
    (changed / "part-000.parquet").unlink()
    params0, first = arrow.read_parquet(folder / "part-000.parquet")
    swapped = toy.ToyReports(y=first.y[::-1].copy(), s=first.s[::-1].copy())
    arrow.write_parquet(swapped, changed / "part-000.parquet", params0)
    out = _cli(["--params", folder.parent / "params.json", "--reports", changed, "--state", state])
    assert out.returncode == 2 and "must not be changed" in out.stderr

    # Other parameters than the checkpoint's.
    other = tmp_path / "other.json"
    other.write_text(toy.ToyParams(m=38).to_json())
    out = _cli(["--params", other, "--reports", folder, "--state", state])
    assert out.returncode == 2 and "parameters" in out.stderr

    # A corrupted checkpoint is reported, never silently restarted.
    blob = bytearray(state.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    state.write_bytes(bytes(blob))
    out = _cli(_args(folder, state, tmp_path / "a.bin"))
    assert out.returncode == 2 and "corrupt" in out.stderr
    with pytest.raises(FormatError):
        decode_checkpoint(bytes(blob))
    with pytest.raises(FormatError):
        decode_checkpoint(bytes(blob[:20]))


def test_init_aggregator_with_options(tmp_path):
    """OCMS streaming match counts: the candidates come from --init; a resumed run must use
    the same --init."""
    from ldpfast._base import protocols

    proto = protocols().get("ocms")
    if proto is None:
        pytest.skip("OCMS is not merged on this branch")
    params = proto.params.optimal(epsilon=2.0, d=500)
    folder = tmp_path / "reports"
    folder.mkdir()
    candidates = np.arange(0, 500, 25)
    expected = proto.aggregator(params, candidates=candidates)
    for i in range(3):
        batch = proto.client(params, rng=i).perturb(np.random.default_rng(i).integers(0, 500, size=400))
        arrow.write_parquet(batch, folder / f"{i}.parquet", params)
        expected.update(batch)
    init = tmp_path / "zero.bin"
    init.write_bytes(proto.aggregator(params, candidates=candidates).to_bytes())
    state, output = tmp_path / "s.ckpt", tmp_path / "agg.bin"
    killed = _cli(["--init", init, "--reports", folder, "--state", state, "--output", output],
                  LDPFAST_AGGREGATE_KILL_IN_CHECKPOINT=2)
    assert killed.returncode == -signal.SIGKILL
    other = tmp_path / "other.bin"
    other.write_bytes(proto.aggregator(params, candidates=candidates[:-1]).to_bytes())
    out = _cli(["--init", other, "--reports", folder, "--state", state])
    assert out.returncode == 2 and "does not match --init" in out.stderr
    out = _cli(["--init", init, "--reports", folder, "--state", state, "--output", output])
    assert out.returncode == 0, out.stderr
    assert output.read_bytes() == expected.to_bytes()
    nonempty = tmp_path / "nonempty.bin"
    nonempty.write_bytes(expected.to_bytes())
    out = _cli(["--init", nonempty, "--reports", folder, "--state", tmp_path / "fresh.ckpt"])
    assert out.returncode == 2 and "empty aggregator" in out.stderr


# --- read and write failures: exit 2, the file named, no traceback, no temporary files -----

def _copy_dir(src, dst):
    """A copy of the report folder (and of the params.json beside it) at dst."""
    dst.mkdir()
    (dst.parent / "params.json").write_bytes((src.parent / "params.json").read_bytes())
    for p in src.glob("*.parquet"):
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def _assert_clean_failure(out, *fragments):
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    for fragment in fragments:
        assert str(fragment) in out.stderr, (fragment, out.stderr)


def _no_temporaries(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _failing_fsync_runner(fail_at):
    """The CLI with os.fsync failing with ENOSPC on its `fail_at`-th call (a full disk
    shows up at write, flush or fsync; fsync is the last and most reliable of them)."""
    return ("import errno, os, sys, _toy_protocol\n"
            "real, calls = os.fsync, [0]\n"
            "def fsync(fd):\n"
            "    calls[0] += 1\n"
            f"    if calls[0] == {fail_at}:\n"
            "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
            "    return real(fd)\n"
            "os.fsync = fsync\n"
            "from ldpfast.cli import main\n"
            "sys.exit(main())\n")


def _cli_with(runner, args):
    return subprocess.run([sys.executable, "-c", runner, "aggregate", *map(str, args)],
                          env=_env(), capture_output=True, text=True, timeout=120)


def test_disk_full_while_checkpointing_keeps_the_previous_checkpoint(reports_dir, tmp_path):
    folder, params, expected = reports_dir
    state, output = tmp_path / "s.ckpt", tmp_path / "agg.bin"
    # fsync calls per checkpoint: the temporary file, then the directory; the 3rd call is
    # the second checkpoint's file.
    out = _cli_with(_failing_fsync_runner(3), _args(folder, state, output))
    _assert_clean_failure(out, f"cannot write {state}", "No space left on device")
    assert _no_temporaries(tmp_path) == []
    _, done = decode_checkpoint(state.read_bytes())
    assert len(done) == 1
    resumed = _cli(_args(folder, state, output))
    assert resumed.returncode == 0, resumed.stderr
    assert output.read_bytes() == expected


def test_disk_full_while_writing_the_output(reports_dir, tmp_path):
    folder, params, expected = reports_dir
    state, output = tmp_path / "s.ckpt", tmp_path / "agg.bin"
    out = _cli_with(_failing_fsync_runner(2 * N_FILES + 1), _args(folder, state, output))
    _assert_clean_failure(out, f"cannot write {output}", "No space left on device")
    assert _no_temporaries(tmp_path) == [] and not output.exists()
    assert len(decode_checkpoint(state.read_bytes())[1]) == N_FILES


def test_missing_state_directory_and_unreadable_inputs(reports_dir, tmp_path):
    folder, params, _ = reports_dir
    state = tmp_path / "absent" / "s.ckpt"
    out = _cli(_args(folder, state, tmp_path / "a.bin"))
    _assert_clean_failure(out, "cannot create the lock file", tmp_path / "absent")

    odd = _copy_dir(folder, tmp_path / "odd")
    (odd / "part-002b.parquet").mkdir()  # sorted among the files, not a file
    state = tmp_path / "s.ckpt"
    out = _cli(_args(odd, state, tmp_path / "a.bin"))
    _assert_clean_failure(out, f"cannot read {odd / 'part-002b.parquet'}")
    assert len(decode_checkpoint(state.read_bytes())[1]) == 3
    assert _no_temporaries(tmp_path) == []


def _flip(path, offset):
    blob = bytearray(path.read_bytes())
    blob[offset] ^= 0x55
    path.write_bytes(bytes(blob))


def test_damaged_parquet_files_give_format_errors_naming_them(reports_dir, tmp_path):
    folder, params, _ = reports_dir
    cases = {
        "truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
        "garbage": lambda p: p.write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1"),
        "bad end magic": lambda p: p.write_bytes(p.read_bytes()[:-1] + b"2"),
        "page bit flip": lambda p: _flip(p, 60),
        "empty": lambda p: p.write_bytes(b""),
    }
    for i, (what, damage) in enumerate(cases.items()):
        case = _copy_dir(folder, tmp_path / f"case{i}")
        damage(case / "part-001.parquet")
        state = tmp_path / f"s{i}.ckpt"
        out = _cli(_args(case, state, tmp_path / "a.bin"))
        _assert_clean_failure(out, case / "part-001.parquet")
        assert "not a readable Parquet file" in out.stderr or "parameters" in out.stderr, (what, out.stderr)
        assert len(decode_checkpoint(state.read_bytes())[1]) == 1, what
        assert _no_temporaries(tmp_path) == [], what


def test_page_checksums_are_written_and_verified(tmp_path):
    """A flipped bit inside an uncompressed data page decodes to a plausible wrong value;
    only the page checksum catches it."""
    import pyarrow.parquet as pq

    params, _ = toy._example()
    values = np.arange(4000, dtype=np.uint64) % np.uint64(params.m)
    reports = toy.ToyReports(y=values, s=np.ones(4000, np.int8))
    path = tmp_path / "r.parquet"
    arrow.write_parquet(reports, path, params, compression="none")
    assert pq.ParquetFile(path).metadata.num_rows == 4000
    blob = bytearray(path.read_bytes())
    at = bytes(blob).find(values[1000:1008].tobytes())
    assert at > 0
    blob[at + 3] ^= 0x01  # y[1000] += 2^24 ... still a uint64
    path.write_bytes(bytes(blob))
    unchecked = pq.read_table(path, page_checksum_verification=False).column("y").to_numpy()
    assert unchecked[1000] != values[1000]  # without checksums the damage would go unnoticed
    with pytest.raises(FormatError, match="r.parquet is not a readable Parquet file.*(?i:crc|checksum)"):
        arrow.read_parquet(path)


def test_metadata_that_is_not_utf8_is_a_format_error(tmp_path):
    import pyarrow.parquet as pq

    params, values = toy._example()
    table = arrow.to_arrow(toy.ToyClient(params, rng=0).perturb(values), params)
    meta = dict(table.schema.metadata)
    meta[b"ldpfast.params"] = b"\xff\xfe{"
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "bad.parquet")
    with pytest.raises(FormatError, match="bad.parquet is not a readable Parquet file.*UnicodeDecodeError"):
        arrow.read_parquet(tmp_path / "bad.parquet")


def test_failed_parquet_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno

    import pyarrow.parquet as pq

    params, values = toy._example()
    reports = toy.ToyClient(params, rng=0).perturb(values)
    real = pq.write_table

    def full_disk(table, where, **kwargs):
        real(table, where, **kwargs)  # the temporary file exists, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq, "write_table", full_disk)
    with pytest.raises(OSError, match="No space left"):
        arrow.write_parquet(reports, tmp_path / "r.parquet", params)
    assert list(tmp_path.iterdir()) == []


def test_a_file_replaced_while_read_is_recorded_with_the_hash_of_what_was_aggregated(reports_dir, tmp_path):
    """The replacement lands right after the file was read (while its reports are being
    aggregated): the checkpoint must describe the bytes that were aggregated, so resuming
    over the replaced file is refused instead of silently mixing two versions."""
    import hashlib

    folder, params, expected = reports_dir
    case = _copy_dir(folder, tmp_path / "reports")
    target = case / "part-002.parquet"
    original = target.read_bytes()
    replacement = tmp_path / "other.parquet"
    other = toy.ToyClient(params, rng=99).perturb(np.zeros(9000, np.int64))
    arrow.write_parquet(other, replacement, params)
    # The first batch of part-002: after the batches of files 0 and 1 (128 rows each).
    trigger = sum(-(-(500 + 100 * i) // 128) for i in range(2)) + 1
    runner = ("import os, sys, _toy_protocol\n"
              "real, calls = _toy_protocol.ToyServer.update, [0]\n"
              "def update(self, batch):\n"
              "    calls[0] += 1\n"
              f"    if calls[0] == {trigger}:\n"
              f"        os.replace({str(replacement)!r}, {str(target)!r})\n"
              "    return real(self, batch)\n"
              "_toy_protocol.ToyServer.update = update\n"
              "from ldpfast.cli import main\n"
              "sys.exit(main())\n")
    state, output = tmp_path / "s.ckpt", tmp_path / "agg.bin"
    # Stop after file 3 (index 2), whose first batch triggers the replacement.
    proc = subprocess.Popen([sys.executable, "-c", runner, "aggregate", *map(str, _args(case, state, output))],
                            env=_env(LDPFAST_AGGREGATE_PAUSE_AFTER=3), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ldpfast-aggregate: paused after 3"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
    assert target.read_bytes() != original  # it was replaced during the run
    _, done = decode_checkpoint(state.read_bytes())
    assert done[2] == {"name": "part-002.parquet", "size": len(original),
                       "sha256": hashlib.sha256(original).hexdigest()}
    out = _cli(_args(case, state, output))
    _assert_clean_failure(out, "must not be changed")


def test_progress_line_only_on_request_or_terminal(reports_dir, tmp_path):
    folder, params, _ = reports_dir
    quiet = _cli(_args(folder, tmp_path / "q.ckpt", tmp_path / "q.bin"))
    assert quiet.returncode == 0 and quiet.stderr == ""
    shown = _cli([*_args(folder, tmp_path / "p.ckpt", tmp_path / "p.bin"), "--progress"])
    assert shown.returncode == 0, shown.stderr
    last = shown.stderr.splitlines()[-1]  # (text mode reads the "\r" rewrites as lines)
    assert last.startswith(f"ldpfast aggregate: {N_FILES}/{N_FILES} files, 100.0% of bytes, ")
    total = sum(500 + 100 * i for i in range(N_FILES))
    assert f"{total:,} reports" in last


def test_a_state_locked_by_another_run_is_refused(reports_dir, tmp_path):
    """Two runs on one --state: the second exits 2 naming the state (the lock is held here,
    through the same portable helper the command uses)."""
    from ldpfast.commands.aggregate import _lock_nonblocking

    folder, _, _ = reports_dir
    state = tmp_path / "state.bin"
    with open(tmp_path / f".{state.name}.lock", "a") as held:
        _lock_nonblocking(held)
        result = _cli(_args(folder, state, tmp_path / "out.bin"))
    assert result.returncode == 2, result.stderr
    assert "in use by another ldpfast aggregate run" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out.bin").exists()
