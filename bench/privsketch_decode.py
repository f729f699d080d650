"""Decode-first PrivSketch aggregation at scale, next to a brute-force numpy collector.

n = 1,000,000 users: the bundled Kosarak prefix (36,681 users) replicated; domain padded
to full Kosarak's 41,270 item ids (1..41270, so d = 41,271 with the unused id 0), every
id is a candidate; K = 4, M = 128, eps = 3. Reports are generated in batches (the ordering
matrices take 1 KiB per user) and each batch is aggregated with Server.update; the
reported aggregation time is the sum of the update calls (validation included).
The baseline is the O(n d K) numpy collector (argmin over O for every user and item),
timed on a subsample and extrapolated linearly to n.

    PYTHONPATH=python python3 bench/privsketch_decode.py [--users 1000000] [--threads 0]
"""

import argparse
import time
import warnings

import numpy as np

import ldpfast as lf
from ldpfast.protocols.sets import privsketch as ps
from ldpfast.datasets import SetData, load_sets


def brute_force_numpy(params, reports, candidates, chunk=100):
    cells = params.cells(candidates).astype(np.int64)                      # (D, K)
    n = len(reports)
    flat = reports.order.reshape(n, -1)
    sampled = reports.k.astype(np.int64) * params.M + reports.m
    pos = np.zeros(candidates.size, dtype=np.int64)
    neg = np.zeros(candidates.size, dtype=np.int64)
    for b in range(0, n, chunk):
        ranks = flat[b:b + chunk][:, cells]                                 # (c, D, K)
        kstar = ranks.argmin(axis=2)
        hit = np.take_along_axis(np.broadcast_to(cells, ranks.shape), kstar[..., None], 2)[..., 0] \
            == sampled[b:b + chunk, None]
        up = reports.bit[b:b + chunk, None] > 0
        pos += (hit & up).sum(axis=0)
        neg += (hit & ~up).sum(axis=0)
    return pos, neg


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=125_000)
    parser.add_argument("--subsample", type=int, default=1000, help="users for the brute-force timing")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()

    base = load_sets("kosarak-prefix")
    d = 41271
    reps = -(-args.users // base.n)
    sizes = np.tile(base.sizes(), reps)[:args.users]
    offsets = np.zeros(args.users + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    items = np.tile(base.items, reps)[:offsets[-1]]
    data = SetData(offsets=offsets, items=items, d=d, name="kosarak-prefix x%d" % reps)
    print(f"users {data.n:,}  (user,item) entries {items.size:,}  d {d:,}  K 4  M 128  eps 3  "
          f"threads {lf.backend_info()['threads'] if args.threads == 0 else args.threads}  "
          f"backend {lf.backend_info()['active']}")

    params = ps.PrivSketchParams.create(epsilon=3.0, d=d, K=4, M=128, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.PrivacyWarning)
        client = ps.PrivSketchClient(params, rng=2, threads=args.threads)
    server = ps.PrivSketchServer(params, threads=args.threads)
    t0 = time.perf_counter()
    server._build_index()
    index_time = time.perf_counter() - t0
    client_time = decode_time = 0.0
    first = None
    for b in range(0, data.n, args.batch):
        e = min(data.n, b + args.batch)
        batch = (offsets[b:e + 1] - offsets[b], items[offsets[b]:offsets[e]])
        t0 = time.perf_counter()
        reports = client.perturb(batch)
        client_time += time.perf_counter() - t0
        t0 = time.perf_counter()
        server.update(reports)
        decode_time += time.perf_counter() - t0
        if first is None:
            first = reports
    print(f"client (sketch + ordering matrix + RR), all users: {client_time:8.2f} s")
    print(f"inverted index (once per candidate set):           {index_time:8.3f} s")
    print(f"decode-first aggregation, all users (C++):          {decode_time:8.2f} s   "
          f"({decode_time / data.n * 1e9:.0f} ns/user)")

    sub = ps.PrivSketchReports(k=first.k[:args.subsample], m=first.m[:args.subsample], bit=first.bit[:args.subsample],
                     order=first.order[:args.subsample])
    cand = np.arange(d)
    t0 = time.perf_counter()
    pos, neg = brute_force_numpy(params, sub, cand)
    brute = time.perf_counter() - t0
    check = ps.PrivSketchServer(params, threads=args.threads).update(sub)
    assert np.array_equal(check._pos, pos) and np.array_equal(check._neg, neg), "mismatch vs brute force"
    extrapolated = brute / len(sub) * data.n
    print(f"brute-force numpy O(n d K), {len(sub):,} users:          {brute:8.2f} s  (same counts: yes)")
    print(f"brute-force extrapolated to {data.n:,} users:         {extrapolated:8.0f} s")
    print(f"speed-up of decode-first C++ over brute-force numpy:  {extrapolated / decode_time:8.0f}x")
    est = server.estimate()
    truth = np.bincount(items, minlength=d) / data.n
    top = np.argsort(-truth)[:5]
    print("top-5 items: true f", np.round(truth[top], 4), " estimate", np.round(est[top], 4))


if __name__ == "__main__":
    main()
