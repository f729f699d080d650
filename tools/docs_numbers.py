"""Regenerates the numbers and figures the documentation quotes, so they cannot drift.

    PYTHONPATH=python python tools/docs_numbers.py          # recompute, rewrite the pages and figures
    PYTHONPATH=python python tools/docs_numbers.py --check  # exit 1 if a page differs from docs/numbers.json

Cheap numbers are computed here (the bundled Kosarak prefix's counts, the shuffle figure,
the estimation figure from the table bench/estimation_accuracy.py wrote). Expensive ones
are read from the JSON their benchmark writes, named in SOURCES with the command that
regenerates it: rerun that command on a quiet machine first. docs/numbers.json records
every value and where it came from; QUOTES lists each sentence that quotes one, and
--check (run by tests/test_docs.py) compares the pages with docs/numbers.json.
"""

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
NUMBERS = ROOT / "docs" / "numbers.json"
SHUFFLE_DELTA = 1e-6  # the delta docs/guide/shuffle.md's text and table use

# Expensive numbers: (key, the benchmark's JSON, the row's config, the command that writes it).
SOURCES: List[Tuple[str, str, str, str]] = [
    ("ocms_query_scan_eps2_s", "bench/results/full_domain_query.json", "OCMS+RR l (default: prime field, scan)",
     "python bench/full_domain_query.py"),
    ("ocms_query_fast_eps2_s", "bench/results/full_domain_query.json", "OCMS+RR l fast_query (GF(2^l), affine)",
     "python bench/full_domain_query.py"),
    ("ocms_query_scan_eps4_s", "bench/results/full_domain_query_eps4.json", "OCMS+RR l (default: prime field, scan)",
     "python bench/full_domain_query.py --eps 4 --out bench/results/full_domain_query_eps4.json"),
    ("ocms_query_fast_eps4_s", "bench/results/full_domain_query_eps4.json", "OCMS+RR l fast_query (GF(2^l), affine)",
     "python bench/full_domain_query.py --eps 4 --out bench/results/full_domain_query_eps4.json"),
]

# (page, sentence): every {key} is a value of docs/numbers.json, formatted as written.
QUOTES: List[Tuple[str, str]] = [
    ("README.md", "the bundled first {kosarak_users:,} users of the Kosarak"),
    ("README.md", "one report per (user, page) click ({kosarak_reports:,} reports over {kosarak_pages:,} distinct\n"
                  "   pages, numbered 1 to {kosarak_pages:,}: the demo's d = {kosarak_d:,})"),
    ("docs/guide/ocms.md", "the whole-dictionary query of l-OCMS+RR takes {ocms_query_scan_eps2_s:.2g} s\n"
                           "  with the default parameters and {ocms_query_fast_eps2_s:.2g} s with `fast_query` "
                           "at eps = 2"),
    ("docs/guide/ocms.md", "{ocms_query_scan_eps4_s:.2g} s and\n  {ocms_query_fast_eps4_s:.2g} s at eps = 4"),
    ("docs/guide/shuffle.md", "![central epsilon against n at delta = {shuffle_figure_delta:g}]"),
    ("docs/guide/shuffle.md",
     "# {shuffle_1e6_1_upper:.4g}, {shuffle_1e6_1_lower:.4g}, {shuffle_1e6_1_closed_form:.4g}"),
    ("docs/guide/shuffle.md", "# 10 collections composed: {shuffle_r10_n1e6_upper:.4g}"),
    ("docs/guide/shuffle.md", "generic bound is {shuffle_1e6_1_upper:.4g})"),
    ("docs/guide/shuffle.md", "10 rounds at n = 1e6: upper {shuffle_r10_n1e6_upper:.4g}, lower\n"
                              "{shuffle_r10_n1e6_lower:.4g} (0.8 CPU s); at n = 1e8: {shuffle_r10_n1e8_upper:#.3g} / "
                              "{shuffle_r10_n1e8_lower:#.3g}"),
    ("docs/guide/shuffle.md", "100 rounds at n = 1e8:\n{shuffle_r100_n1e8_upper:.4g} / {shuffle_r100_n1e8_lower:.4g}"),
    ("docs/guide/shuffle.md", "k-RR with k = 16 at n = 1e6, eps0 = 1: {shuffle_k16_n1e6_upper:#.4g}"),
    *[("docs/guide/shuffle.md", f"| {n} | {eps0} | {{shuffle_{n}_{eps0}_upper:#.4g}} "
                                f"| {{shuffle_{n}_{eps0}_lower:#.4g}} | {{shuffle_{n}_{eps0}_closed_form:.4g}} |")
      for n in ("1e6", "1e8") for eps0 in (1, 4, 8)],
]


def _kosarak() -> Dict[str, Any]:
    import numpy as np

    from ldpfast import datasets

    sets = datasets.load_sets("kosarak-prefix")
    return {"kosarak_users": int(sets.n), "kosarak_reports": int(sets.items.size),
            "kosarak_pages": int(np.unique(sets.items).size), "kosarak_d": int(sets.d)}


def _from_benchmarks() -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, path, config, command in SOURCES:
        rows = json.loads((ROOT / path).read_text())["rows"]
        (row,) = [r for r in rows if r["config"] == config]
        out[key] = row["seconds"]
        out[key + "_source"] = f"{path} ({command})"
    return out


def _shuffle() -> Dict[str, Any]:
    """The accountant's bounds that docs/guide/shuffle.md quotes (about 15 s)."""
    from ldpfast.theory.shuffle import shuffle_epsilon

    out: Dict[str, Any] = {}
    for n in ("1e6", "1e8"):
        for eps0 in (1, 4, 8):
            bound = shuffle_epsilon(float(eps0), int(float(n)), SHUFFLE_DELTA)
            for part in ("upper", "lower", "closed_form"):
                out[f"shuffle_{n}_{eps0}_{part}"] = getattr(bound, part)
    for rounds, n in ((10, "1e6"), (10, "1e8"), (100, "1e8")):
        bound = shuffle_epsilon(1.0, int(float(n)), SHUFFLE_DELTA, rounds=rounds)
        out[f"shuffle_r{rounds}_n{n}_upper"], out[f"shuffle_r{rounds}_n{n}_lower"] = bound.upper, bound.lower
    out["shuffle_k16_n1e6_upper"] = shuffle_epsilon(1.0, 10**6, SHUFFLE_DELTA, k=16).upper
    return out


def _shuffle_figure() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from shuffle_accountant import plot

    plot(str(ROOT / "docs" / "img" / "shuffle_central_eps.png"), SHUFFLE_DELTA)


def _estimation_figure() -> None:
    """l1 of the debiased and the likelihood estimates against eps, from the table between the
    estimation-accuracy markers of docs/guide/estimation.md."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    page = (ROOT / "docs" / "guide" / "estimation.md").read_text()
    block = page.split("<!-- estimation-accuracy:start -->")[1].split("<!-- estimation-accuracy:end -->")[0]
    header = ["data", "protocol", "eps", "debiased", "norm-sub", "projection", "ibu", "mle"]
    l1: Dict[Tuple[str, str, str], List[Tuple[float, float]]] = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(header) or not re.fullmatch(r"[\d.]+", cells[2]):
            continue
        for method in ("debiased", "norm-sub", "mle"):
            value = float(cells[header.index(method)].split("/")[0])
            l1.setdefault((cells[0], cells[1], method), []).append((float(cells[2]), value))
    data_sets = sorted({key[0] for key in l1})
    protocols = sorted({key[1] for key in l1})
    fig, axes = plt.subplots(1, len(data_sets), figsize=(3.6 * len(data_sets), 3.6), sharey=True)
    styles = {"debiased": ":", "norm-sub": "--", "mle": "-"}
    for ax, data in zip(axes, data_sets):
        for color, protocol in enumerate(protocols):
            for method, style in styles.items():
                points = sorted(l1[(data, protocol, method)])
                ax.loglog([p[0] for p in points], [p[1] for p in points], style, color=f"C{color}",
                          label=protocol if method == "mle" else None)
        ax.set_title(data, fontsize=10)
        ax.set_xlabel("eps")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(sorted({p[0] for points in l1.values() for p in points}))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("l1 over the whole domain")
    axes[-1].legend(fontsize=8, title="mle (solid), norm-sub (dashed),\ndebiased (dotted)", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(ROOT / "docs" / "img" / "estimation_l1.png", dpi=110)


def _pattern(sentence: str) -> "re.Pattern[str]":
    """The sentence with each {key...} standing for any number as written."""
    parts = re.split(r"\{[^}]+\}", sentence)
    return re.compile(r"[\d][\d,.e+-]*".join(re.escape(p) for p in parts))


def rewrite(numbers: Dict[str, Any]) -> None:
    for page, sentence in QUOTES:
        path = ROOT / page
        text = path.read_text(encoding="utf-8")
        new, count = _pattern(sentence).subn(sentence.format(**numbers).replace("\\", "\\\\"), text)
        if count != 1:
            raise SystemExit(f"{page}: {count} places match {sentence!r} (expected 1)")
        path.write_text(new, encoding="utf-8")


def stale_quotes(numbers: Dict[str, Any]) -> List[str]:
    return [f"{page}: {sentence.format(**numbers)!r}" for page, sentence in QUOTES
            if sentence.format(**numbers) not in (ROOT / page).read_text(encoding="utf-8")]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare the pages with docs/numbers.json")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_quotes(json.loads(NUMBERS.read_text()))
        for line in stale:
            print("stale (run python tools/docs_numbers.py):", line, file=sys.stderr)
        return 1 if stale else 0
    numbers: Dict[str, Any] = {**_kosarak(), **_from_benchmarks(), **_shuffle(), "shuffle_figure_delta": SHUFFLE_DELTA}
    _shuffle_figure()
    _estimation_figure()
    NUMBERS.write_text(json.dumps(numbers, indent=1, sort_keys=True) + "\n")
    rewrite(numbers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
