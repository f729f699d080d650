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
import inspect
import json
import sys
import warnings
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
        "hadaoracle": ("hadaoracle", lambda: fam("hadaoracle").create(epsilon=2.0, d=1000, n=2000, hash_seed=3),
                       None),
        "hadaheavy": ("hadaheavy", lambda: fam("hadaheavy").create(epsilon=2.0, d=1024, n=2000, hash_seed=3),
                      None),
        "privsketch": ("privsketch", lambda: fam("privsketch").create(epsilon=2.0, d=60, K=2, M=8, seed=1),
                       None),
        "privsketch-nosmp": ("privsketch-nosmp", lambda: fam("privsketch-nosmp").create(
            epsilon=2.0, d=60, K=2, M=8, seed=1), None),
        "privsketch-ldp": ("privsketch-ldp", lambda: fam("privsketch-ldp").create(
            epsilon=2.0, d=60, K=2, M=8, seed=1), None),
        "multi-pcms-mean": ("multi-pcms-mean", lambda: fam("multi-pcms-mean").create(
            epsilon=2.0, d=60, K=2, M=8, seed=1), None),
        "multi-pcms-min": ("multi-pcms-min", lambda: fam("multi-pcms-min").create(
            epsilon=2.0, d=60, K=2, M=8, seed=1), None),
        "ps-olh": ("ps-olh", lambda: fam("ps-olh")(epsilon=2.0, d=60, pad_len=3), None),
        "svim-items": ("svim-items", lambda: fam("svim-items")(epsilon=2.0, d=60, k=10), None),
        "svim-lengths": ("svim-lengths", lambda: fam("svim-lengths")(
            epsilon=2.0, d=60, candidates=tuple(range(0, 60, 5))), None),
        "svim-padded": ("svim-padded", lambda: fam("svim-padded")(
            epsilon=2.0, d=60, candidates=tuple(range(0, 60, 5)), L=3), None),
        "cms-rappor": ("cms-rappor", lambda: fam("cms-rappor")(epsilon=2.0, d=200, m=24, variant="asymmetric",
                                                                field_size=211), None),
        "cms-rappor-candidates": ("cms-rappor", lambda: fam("cms-rappor")(epsilon=1.0, d=200, m=16),
                                  lambda p: fam("cms-rappor", "aggregator")(p, candidates=np.arange(0, 200, 9))),
        "ss": ("ss", lambda: fam("ss")(epsilon=1.0, d=200), None),
        "cmshe-apple": ("cmshe-apple", lambda: fam("cmshe-apple")(epsilon=2.0, d=200, k=8, m=32, hash_seed=7), None),
        "rhr-original": ("rhr-original", lambda: fam("rhr-original")(epsilon=2.0, d=200), None),
        "hashtogram": ("hashtogram", lambda: fam("hashtogram")(epsilon=2.0, d=1000, R=5, T=32, hash_seed=3), None),
        "npcms": ("npcms", lambda: fam("npcms").create(epsilon=2.0, d=60, K=2, M=8, seed=1, L=3), None),
        "treehist-cs": ("treehist-cs", lambda: fam("treehist-cs").create(epsilon=2.0, d=1024, n=2000, hash_seed=3),
                        None),
    }
    return {case: (pid, make, zero, 2000, 20261121) for case, (pid, make, zero) in table.items()
            if pid in known}


SET_VALUED = {"privsketch", "privsketch-nosmp", "privsketch-ldp", "multi-pcms-mean", "multi-pcms-min",
              "ps-olh", "svim-items", "svim-lengths", "svim-padded", "npcms"}


def client_inputs(pid, d, n, seed):
    """Zipf-like values, or for set-valued protocols sets of 0..4 distinct items."""
    if pid not in SET_VALUED:
        return _values(d, n, seed)
    rng = np.random.default_rng(seed)
    return [sorted(rng.choice(d, size=int(rng.integers(0, 5)), replace=False).tolist()) for _ in range(n)]


def estimate(agg):
    """``estimate()``, or for aggregators that need candidates, the first 64 values."""
    first = next(iter(inspect.signature(agg.estimate).parameters.values()), None)
    if first is not None and first.default is inspect.Parameter.empty:
        return agg.estimate(np.arange(min(agg.params.d, 64)))
    return agg.estimate()


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
        with warnings.catch_warnings():  # PrivSketch clients warn that they are not eps-LDP
            warnings.simplefilter("ignore")
            reports = proto.client(params, rng=seed).perturb(client_inputs(pid, params.d, n, seed))
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
