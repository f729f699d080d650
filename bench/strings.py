"""String data end to end (issue 22, point 1): a vocabulary of a million generated words,
a million users holding Zipf-distributed words, in each form users have them (a list of
str, a numpy object array, a pandas category column, an Arrow dictionary array), through
``Domain`` -> perturb -> aggregate -> labelled estimates; the open dictionary
(``HashedDomain``, OCMS) and byte-prefix heavy hitters (``PrefixDomain``, PEM) too.

Baseline, measured in the same run: the same pipeline on the integer value ids (what a
user had to build by hand before). The vocabulary is generated (``word0000000`` ...), not
downloaded.

    PYTHONPATH=python python3 bench/strings.py [--n 1000000] [--vocabulary 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time

import numpy as np

try:
    from machine import describe
except ImportError:  # imported as bench.strings
    from .machine import describe

import ldpfast
from ldpfast import Domain, HashedDomain, PrefixDomain
from ldpfast.protocols.frequency import hadamard, ocms
from ldpfast.protocols.heavy import pem


def _timed(rows, label, fn, baseline=None):
    start = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - start
    rows.append({"step": label, "seconds": seconds, "baseline": baseline})
    print(f"{label:<62} {seconds:8.3f} s", flush=True)
    return out


def run(n: int, size: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    rows: list = []
    words = _timed(rows, "generate the vocabulary (numpy)",
                   lambda: np.char.add("word", np.char.zfill(np.arange(size).astype("U7"), 7)).astype(object))
    ids = np.minimum(rng.zipf(1.1, n) - 1, size - 1)
    users = words[ids]                                  # an object array of str
    as_list = users.tolist()
    vocabulary = _timed(rows, "Domain(1e6 labels): lookup table", lambda: Domain(words))
    _timed(rows, "its fingerprint (sha256 of every label)", lambda: vocabulary.fingerprint)
    _timed(rows, "pickle round trip of the Domain", lambda: pickle.loads(pickle.dumps(vocabulary)))
    _timed(rows, "encode: list of str", lambda: vocabulary.encode(as_list))
    _timed(rows, "encode: numpy object array", lambda: vocabulary.encode(users))
    try:
        import pandas as pd
        column = _timed(rows, "(build a pandas category column, not ldpfast)",
                        lambda: pd.Series(pd.Categorical.from_codes(ids, categories=words)))
        _timed(rows, "encode: pandas category column", lambda: vocabulary.encode(column))
    except ImportError:
        print("pandas not installed: skipped")
    try:
        import pyarrow as pa
        dictionary = pa.DictionaryArray.from_arrays(pa.array(ids.astype(np.int32)), pa.array(words.tolist()))
        _timed(rows, "encode: Arrow dictionary array", lambda: vocabulary.encode(dictionary))
    except ImportError:
        print("pyarrow not installed: skipped")

    # the whole pipeline, labels vs ids, HRR over the vocabulary (one FWHT answers every label)
    params = hadamard.HRRParams(epsilon=2.0, d=size)
    labelled = params.with_domain(vocabulary)
    reports_ids = _timed(rows, "HRR perturb, ids (baseline)", lambda: hadamard.HRRClient(params, rng=seed).perturb(ids))
    _timed(rows, "HRR perturb, labels (list of str)",
           lambda: hadamard.HRRClient(labelled, rng=seed).perturb(as_list), "HRR perturb, ids (baseline)")
    reports = hadamard.HRRClient(labelled, rng=seed).perturb(users)
    assert np.array_equal(reports.rows, reports_ids.rows) and np.array_equal(reports.bits, reports_ids.bits)
    server = _timed(rows, "HRR aggregate", lambda: hadamard.HRRServer(labelled).update(reports))
    top = [str(w) for w in words[:10]]
    _timed(rows, "HRR estimate of 10 labels", lambda: server.estimate(top))
    estimate = _timed(rows, "HRR frequencies of the whole vocabulary", lambda: server.frequencies())
    _timed(rows, "  its top 10", lambda: estimate.top_k(10))

    # the open dictionary: hashed labels, OCMS, candidates given as labels
    open_params = ocms.OCMSParams.optimal(epsilon=2.0, d=2**64 - 60).with_domain(HashedDomain())
    _timed(rows, "HashedDomain: hash 1e6 user labels (SHA-256 of each distinct one)",
           lambda: open_params.label_domain.encode(users))
    _timed(rows, "OCMS perturb, ids (baseline)", lambda: ocms.OCMSClient(open_params, rng=seed).perturb(ids))
    open_reports = _timed(rows, "OCMS perturb, hashed labels",
                          lambda: ocms.OCMSClient(open_params, rng=seed).perturb(users), "OCMS perturb, ids (baseline)")
    open_server = _timed(rows, "OCMS aggregate", lambda: ocms.OCMSServer(open_params).update(open_reports))
    _timed(rows, "OCMS estimate of 1,000 labels (n x 1,000 hashed pairs)",
           lambda: open_server.estimate([str(w) for w in words[:1000]]))

    # byte prefixes: PEM heavy hitters over 7-byte prefixes of the words
    prefix_params = pem.PEMParams.create(epsilon=4.0, d=2**56, n=n, k=16).with_domain(PrefixDomain())
    prefix_server = _timed(rows, "PEM perturb + aggregate, 7-byte prefixes",
                           lambda: pem.PEMServer(prefix_params).update(pem.PEMClient(prefix_params,
                                                                                     rng=seed).perturb(users)))
    found = _timed(rows, "PEM top-16 search", lambda: prefix_server.top_k())
    print("PEM prefixes found:", found.labels[:5].tolist())
    seconds = {r["step"]: r["seconds"] for r in rows}
    for r in rows:
        r["ratio_vs_baseline"] = None if r["baseline"] is None else r["seconds"] / seconds[r["baseline"]]
    return {"n": n, "vocabulary": size, "rows": rows, "pem_prefixes": [bytes(b).decode("ascii", "replace")
                                                                       for b in found.labels[:5]],
            "threads": ldpfast.backend_info()["threads"], "machine": describe()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--vocabulary", type=int, default=1_000_000)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "strings.json"))
    args = parser.parse_args()
    result = run(args.n, args.vocabulary)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
