"""Write the golden aggregator files of the current byte format (tests/golden/).

For every case below: ``<case>.bin`` (``Aggregator.to_bytes()`` after aggregating seeded
simulated reports) and ``<case>.estimate.npy`` (its ``estimate()``), plus
``MANIFEST.json`` (protocol id, parameters, number of reports, format version, sha256).
tests/test_contract.py checks that every file keeps loading, re-serializes to the same
bytes and estimates the same values. Committed files must never be regenerated after a
format change: add new ones beside them (e.g. ``<case>.v2.bin``) instead.

Usage: PYTHONPATH=python python3 tests/golden/make_golden.py [--force]
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from ldpfast._base import FORMAT_VERSION, protocols

HERE = Path(__file__).resolve().parent


def _values(d, n, seed):
    rng = np.random.default_rng(seed)
    return np.minimum(rng.zipf(1.3, size=n) - 1, d - 1)


def cases():
    """case -> (protocol id, params factory, zero(params) factory or None, n, seed)."""
    known = protocols()

    def fam(pid, attr="params"):
        return getattr(known[pid], attr)

    table = {
        "ocms": ("ocms", lambda: fam("ocms").optimal(epsilon=2.0, d=200, field="compact"), None),
        "ocms-candidates": ("ocms", lambda: fam("ocms").optimal(epsilon=2.0, d=200),
                            lambda p: fam("ocms", "aggregator")(p, candidates=np.arange(0, 200, 9))),
        "grr": ("grr", lambda: fam("grr")(epsilon=1.5, d=64), None),
        "hrr": ("hrr", lambda: fam("hrr")(epsilon=1.0, d=200), None),
        "he": ("he", lambda: fam("he")(epsilon=1.0, d=200), None),
        "cmshe": ("cmshe", lambda: fam("cmshe")(epsilon=2.0, d=200, k=8, m=32, hash_seed=7), None),
        "rhr": ("rhr", lambda: fam("rhr")(epsilon=2.0, d=200), None),
        "olh": ("olh", lambda: fam("olh")(epsilon=1.0, d=200), None),
    }
    return {case: (pid, make, zero, 2000, 20261121) for case, (pid, make, zero) in table.items()
            if pid in known}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    args = parser.parse_args(argv)
    manifest_path = HERE / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for case, (pid, make, zero, n, seed) in cases().items():
        if case in manifest and not args.force:
            print(f"{case}: kept (exists)")
            continue
        proto = protocols()[pid]
        params = make()
        values = _values(params.d, n, seed)
        reports = proto.client(params, rng=seed).perturb(values)
        agg = (zero or proto.aggregator)(params).update(reports)
        blob = agg.to_bytes()
        (HERE / f"{case}.bin").write_bytes(blob)
        np.save(HERE / f"{case}.estimate.npy", agg.estimate(), allow_pickle=False)
        manifest[case] = {"protocol": pid, "params": params.to_json(), "n": n, "seed": seed,
                          "format_version": FORMAT_VERSION, "sha256": hashlib.sha256(blob).hexdigest()}
        print(f"{case}: wrote {len(blob)} bytes")
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
