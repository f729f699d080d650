"""``ldpfast estimate``: the frequency estimates of an aggregated state, with labels,
standard errors and confidence intervals.

``STATE`` is a checkpoint of ``ldpfast aggregate --state`` or the aggregator bytes of its
``--output`` (``Aggregator.to_bytes``). Example::

    ldpfast aggregate --reports reports/ --state run.ckpt
    ldpfast estimate run.ckpt --labels vocabulary.txt --format csv --output estimates.csv

Columns: ``candidate`` (the value id), ``label`` (when the parameters have a label domain
that decodes ids, or the candidates are labels), ``estimate``, ``std``, ``count``
(``n * estimate``) and, for debiased estimates with standard errors, ``ci_low, ci_high``
(``Estimate.confidence_interval`` at ``--confidence``). ``--format`` table (default, for
reading), csv, json or parquet (``--output`` required; needs pyarrow).

A vocabulary (``ldpfast.Domain``) travels in the state by its fingerprint only: give its
labels with ``--labels FILE`` (one label per line, in the domain's order; with an "other"
bucket, its label last) to see them, checked against the fingerprint.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .._aggregator import Aggregator
from ..errors import LdpfastError, ParameterError, StorageError
from ._checkpoint import CHECKPOINT_MAGIC, decode_checkpoint

HELP = "print the frequency estimates of an aggregated state (ldpfast aggregate) with labels and intervals"
FORMATS = ("table", "csv", "json", "parquet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("state", type=Path,
                        help="checkpoint of ldpfast aggregate --state, or aggregator bytes (its --output)")
    parser.add_argument("--labels", type=Path, default=None,
                        help="the vocabulary of the parameters' Domain, one label per line in order (its 'other' "
                             "label last when it has one), to print labels")
    parser.add_argument("--candidates", type=Path, default=None,
                        help="values to estimate, one per line: labels when the parameters have a label domain, "
                             "else integer value ids (default: what the aggregator estimates, e.g. every value)")
    parser.add_argument("--method", choices=("debiased", "ibu", "mle"), default="debiased",
                        help="debiased (unbiased, with intervals; default), ibu or mle (on the simplex)")
    parser.add_argument("--confidence", type=float, default=0.95,
                        help="level of the confidence intervals, in [0.5, 1) (default 0.95)")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    parser.add_argument("--output", type=Path, default=None, help="write here instead of standard output")


def _read_lines(path: Path, flag: str) -> List[str]:
    """The non-empty lines of a UTF-8 text file (line ends removed, nothing else)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{flag} {path} must be UTF-8 text: {exc}") from None
    except OSError as exc:
        raise StorageError(f"cannot read {flag} {path}: {exc.strerror or exc}") from None
    lines = [line for line in text.splitlines() if line]
    if not lines:
        raise ParameterError(f"{flag} {path} must hold at least one line")
    return lines


def _vocabulary(path: Path, stored: Any) -> Any:
    """The Domain of the labels in ``path`` (the last one its "other" label when the
    ``stored`` domain has an "other" bucket)."""
    from ..domain import Domain

    labels = _read_lines(path, "--labels")
    try:
        if stored is not None and stored.to_dict().get("other") is True:
            return Domain(labels[:-1], other=labels[-1])
        return Domain(labels)
    except LdpfastError as exc:
        raise type(exc)(f"--labels {path}: {exc}") from None


def load_state(path: Path, labels: Optional[Path] = None) -> Aggregator:
    """The aggregator of a checkpoint or of aggregator bytes, with the vocabulary of
    ``labels`` attached (checked against the fingerprint the state records)."""
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        agg = decode_checkpoint(blob)[0] if blob.startswith(CHECKPOINT_MAGIC) else Aggregator.from_bytes(blob)
    except LdpfastError as exc:
        raise type(exc)(f"{path}: {exc}") from None
    if labels is None:
        return agg
    domain = _vocabulary(labels, agg.params.label_domain)
    try:
        return type(agg).from_bytes(agg.to_bytes(), domain=domain)
    except LdpfastError as exc:
        raise type(exc)(f"--labels {labels}: {exc}") from None


def _candidates(args: argparse.Namespace, agg: Aggregator) -> Any:
    if args.candidates is None:
        return None
    lines = _read_lines(args.candidates, "--candidates")
    domain = agg.params.label_domain
    if domain is not None and domain.kind == "vocabulary" and not domain.decodes:
        raise ParameterError(f"--candidates {args.candidates}: these parameters have a vocabulary (a Domain) known "
                             "here by its fingerprint only: give its labels with --labels FILE")
    if domain is not None:
        return lines
    bad = [line for line in lines if not _is_int(line)]
    if bad:
        raise ParameterError(f"--candidates {args.candidates}: these parameters have no label domain, so the "
                             f"candidates must be integer value ids, got {bad[0]!r:.60}")
    ids = [int(line) for line in lines]
    return np.array(ids, dtype=np.uint64 if ids and max(ids) >= 2**63 else np.int64)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def columns(estimate: Any, confidence: float) -> Dict[str, Any]:
    """The output columns of an ``Estimate`` (intervals only where it has them)."""
    out: Dict[str, Any] = {"candidate": [int(c) for c in estimate.candidates]}
    if estimate.labels is not None:
        out["label"] = list(estimate.labels)
    out.update(estimate=estimate.values, std=estimate.std, count=estimate.counts)
    if estimate.method == "debiased" and estimate.uncertainty is not None:
        out["ci_low"], out["ci_high"] = estimate.confidence_interval(confidence=confidence)
    return {name: [_plain(v) for v in values] for name, values in out.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, float)):
        return float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    return value


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return _text(value) if isinstance(value, bytes) else value


def render(table: Dict[str, List[Any]], meta: Dict[str, Any], fmt: str) -> str:
    """The table in a text format (``table``, ``csv``, ``json``)."""
    names = list(table)
    rows = list(zip(*table.values()))
    if fmt == "json":
        records = [{name: _json_value(v) for name, v in zip(names, row)} for row in rows]
        return json.dumps({**meta, "rows": records}, indent=1) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([repr(v) if isinstance(v, float) else _text(v) for v in row] for row in rows)
        return buffer.getvalue()
    cells = [[f"{v:.6g}" if isinstance(v, float) else _text(v) for v in row] for row in rows]
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in enumerate(names)]
    lines = ["  ".join(name.rjust(w) for name, w in zip(names, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    head = (f"{meta['protocol']}: n={meta['n']:,} reports, {meta['method']} estimates of {meta['target']}"
            + (f", {meta['confidence']:g} intervals" if "ci_low" in table else ""))
    return "\n".join([head, *lines]) + "\n"


def _write_parquet(table: Dict[str, List[Any]], meta: Dict[str, Any], path: Path) -> None:
    from .._optional import require

    pa = require("pyarrow", "ldpfast estimate --format parquet")
    pq = require("pyarrow.parquet", "ldpfast estimate --format parquet")
    arrow_table = pa.table(table).replace_schema_metadata({"ldpfast.estimate": json.dumps(meta)})
    try:
        pq.write_table(arrow_table, path)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    if not 0.5 <= args.confidence < 1:
        raise ParameterError(f"--confidence must be in [0.5, 1), got {args.confidence!r}")
    if args.format == "parquet" and args.output is None:
        raise ParameterError("--format parquet needs --output PATH")
    agg = load_state(args.state, args.labels)
    estimate = agg.frequencies(_candidates(args, agg), method=args.method)
    meta = {"protocol": estimate.protocol, "n": int(estimate.n), "method": estimate.method,
            "target": estimate.target, "confidence": args.confidence, "fingerprint": agg.params.fingerprint}
    table = columns(estimate, args.confidence)
    if args.format == "parquet":
        _write_parquet(table, meta, args.output)
        return 0
    text = render(table, meta, args.format)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StorageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    return 0

