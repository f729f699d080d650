"""The byte format's golden files and version refusal. The aggregator contract itself
(merge identity, exact associative merges, byte and pickle round trips, corrupted bytes,
rejected batches, Parquet and wire round trips, standard errors) is checked for every
registered protocol by ldpfast.testing (tests/test_conformance.py)."""

import hashlib
import inspect
import json
import zlib
from pathlib import Path

import numpy as np
import pytest

import _toy_protocol
from ldpfast._base import Aggregator, load_aggregator, params_from_json, protocols
from ldpfast.errors import FormatError


def _estimate(agg):
    """``estimate()``, or for aggregators that need candidates, the first 64 values."""
    first = next(iter(inspect.signature(agg.estimate).parameters.values()), None)
    if first is not None and first.default is inspect.Parameter.empty:
        return agg.estimate(np.arange(min(agg.params.d, 64)))
    return agg.estimate()


# -- golden files of the byte format (written once by tests/golden/make_golden.py) --------
GOLDEN = Path(__file__).resolve().parent / "golden"
MANIFEST = json.loads((GOLDEN / "MANIFEST.json").read_text())


def _golden_cases():
    registered = protocols()
    return [pytest.param(case, id=case, marks=() if entry["protocol"] in registered else
                         pytest.mark.skip(reason=f"protocol {entry['protocol']!r} not in this build"))
            for case, entry in sorted(MANIFEST.items())]


@pytest.mark.parametrize("case_id", _golden_cases())
def test_golden_files_keep_loading_and_estimating(case_id):
    """The committed bytes of format version 1 must load, re-serialize byte for byte and
    estimate the same values. The state is integral and must match exactly; estimates go
    through floating-point debiasing, whose last bits may legitimately differ between
    numpy versions or kernels, hence the 1e-12 relative tolerance."""
    entry = MANIFEST[case_id]
    blob = (GOLDEN / f"{case_id}.bin").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == entry["sha256"]
    agg = load_aggregator(blob)
    assert type(agg) is protocols()[entry["protocol"]].aggregator
    assert agg.params == params_from_json(entry["params"])
    assert agg.to_bytes() == blob
    expected = np.load(GOLDEN / f"{case_id}.estimate.npy", allow_pickle=False)
    np.testing.assert_allclose(_estimate(agg), expected, rtol=1e-12, atol=1e-15)


def test_every_builtin_protocol_has_a_golden_file():
    """A protocol shipped with ldpfast keeps its byte format only if a golden file pins it."""
    builtin = {pid for pid, proto in protocols().items() if proto.builtin}
    missing = sorted(builtin - {e["protocol"] for e in MANIFEST.values()})
    assert not missing, (f"no golden file for {missing}: run PYTHONPATH=python python tests/golden/make_golden.py "
                         "(it writes one from each new protocol's Protocol.example) and commit the files")


def test_future_format_versions_are_refused_by_name():
    params, values = _toy_protocol._example()
    blob = bytearray(_toy_protocol.ToyServer(params).update(
        _toy_protocol.ToyClient(params, rng=1).perturb(values)).to_bytes())
    blob[8:10] = (2).to_bytes(2, "little")
    body = bytes(blob[:-4])
    resealed = body + zlib.crc32(body).to_bytes(4, "little")
    with pytest.raises(FormatError, match="unsupported aggregator format version 2"):
        Aggregator.from_bytes(resealed)
    with pytest.raises(FormatError, match="version 2 .*or corrupt"):
        Aggregator.from_bytes(bytes(blob))
