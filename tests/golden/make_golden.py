"""Write the golden aggregator files of the current byte format (tests/golden/).

For every case (the committed ones in ``MANIFEST.json``, and one for each protocol shipped
with ldpfast that has none yet, from its registered ``Protocol.example``): ``<case>.bin``
(``Aggregator.to_bytes()`` after aggregating seeded simulated reports) and
``<case>.estimate.npy`` (its ``estimate()``), plus
``MANIFEST.json`` (protocol id, parameters, number of reports, format version, sha256).
tests/test_contract.py checks that every file keeps loading, re-serializes to the same
bytes and estimates the same values. Committed files must never be regenerated after a
format change: add new ones beside them (e.g. ``<case>.v2.bin``) instead.

Usage: PYTHONPATH=python python3 tests/golden/make_golden.py [--force]
"""

import argparse
import hashlib
import inspect
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from ldpfast._base import FORMAT_VERSION, params_from_json, protocols

HERE = Path(__file__).resolve().parent


def _values(d, n, seed):
    rng = np.random.default_rng(seed)
    return np.minimum(rng.zipf(1.3, size=n) - 1, d - 1)


N, SEED = 2000, 20261121

#: Server options of the committed ``*-candidates`` cases (case -> zero(params)).
SERVER_OPTIONS = {
    "ocms-candidates": lambda p: protocols()["ocms"].aggregator(p, candidates=np.arange(0, 200, 9)),
    "cms-rappor-candidates": lambda p: protocols()["cms-rappor"].aggregator(p, candidates=np.arange(0, 200, 9)),
}


def cases(manifest):
    """case -> (protocol id, params factory, zero(params) factory or None, n, seed): every
    committed case (its stored parameters), plus one case per registered built-in protocol
    without a golden file, from its registered ``Protocol.example``."""
    known = protocols()
    out = {case: (entry["protocol"], lambda entry=entry: params_from_json(entry["params"]),
                  SERVER_OPTIONS.get(case), entry["n"], entry["seed"])
           for case, entry in manifest.items() if entry["protocol"] in known}
    covered = {entry["protocol"] for entry in manifest.values()}
    for pid, proto in sorted(known.items()):
        if proto.builtin and pid not in covered:
            if proto.example is None:
                raise SystemExit(f"protocol {pid!r} registers no example (Protocol.example)")
            out[pid] = (pid, lambda proto=proto: proto.example()[0], None, N, SEED)
    return out


def client_inputs(pid, d, n, seed, domains=None):
    """Zipf-like values, or for set-valued protocols (``Protocol.inputs == "sets"``) sets of
    0..4 distinct items; for key-value protocols (``"pairs"``) such sets of keys, each with a value
    uniform in [-1, 1]; for numeric ones (``"numbers"``) the registered example's numbers, and for
    record protocols (``"records"``) the example's first n records, or one Zipf-like column per
    attribute of ``domains`` where the example has fewer."""
    kind = protocols()[pid].inputs
    if kind == "numbers":
        return protocols()[pid].example()[1]
    if kind == "records":
        example = np.asarray(protocols()[pid].example()[1])
        if len(example) >= n:
            return example[:n]
        return np.stack([_values(k, n, seed + j) for j, k in enumerate(domains)], axis=1)
    if kind not in ("sets", "pairs"):
        return _values(d, n, seed)
    rng = np.random.default_rng(seed)
    sets = [sorted(rng.choice(d, size=int(rng.integers(0, 5)), replace=False).tolist()) for _ in range(n)]
    if kind == "sets":
        return sets
    return [{key: float(rng.uniform(-1.0, 1.0)) for key in keys} for keys in sets]


def estimate(agg):
    """``estimate()``, or for aggregators that need candidates, the first 64 values."""
    first = next(iter(inspect.signature(agg.estimate).parameters.values()), None)
    if first is not None and first.default is inspect.Parameter.empty:
        return agg.estimate(np.arange(min(agg.params.d, 64)))
    return agg.estimate()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true",
                        help="rewrite the committed cases too (from their stored parameters)")
    args = parser.parse_args(argv)
    manifest_path = HERE / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for case, (pid, make, zero, n, seed) in cases(manifest).items():
        if case in manifest and not args.force:
            print(f"{case}: kept (exists)")
            continue
        proto = protocols()[pid]
        params = make()
        with warnings.catch_warnings():  # PrivSketch clients warn that they are not eps-LDP
            warnings.simplefilter("ignore")
            reports = proto.client(params, rng=seed).perturb(
                client_inputs(pid, getattr(params, "d", None), n, seed, getattr(params, "domains", None)))
        agg = (zero or proto.aggregator)(params).update(reports)
        blob = agg.to_bytes()
        (HERE / f"{case}.bin").write_bytes(blob)
        np.save(HERE / f"{case}.estimate.npy", estimate(agg), allow_pickle=False)
        manifest[case] = {"protocol": pid, "params": params.to_json(), "n": n, "seed": seed,
                          "format_version": FORMAT_VERSION, "sha256": hashlib.sha256(blob).hexdigest()}
        print(f"{case}: wrote {len(blob)} bytes")
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
