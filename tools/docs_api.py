"""Writes the API reference: one page per module, docs/api/<module>.md, and their index.

    python tools/docs_api.py          # rewrite docs/api/
    python tools/docs_api.py --check  # exit 1 if docs/api/ is not what this script writes

MODULES is the one list to edit when a module is added, renamed or moved (tests/test_docs.py
runs --check). Each entry: the module, the page title, the autodoc options, and a lead
paragraph.
"""

import argparse
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple

API = Path(__file__).resolve().parent.parent / "docs" / "api"


class Page(NamedTuple):
    module: str
    title: str
    options: str = ""
    lead: str = ""
    extra: str = ""  # more autodoc directives on the same page


PROTOCOL_LEAD = ("A protocol module: for each protocol, frozen **Params**, a **Client** (`perturb`), typed **Reports** "
                 "and a **Server** (`update`, `merge`, `estimate`, `to_bytes`/`from_bytes`), named `<Protocol><Role>` "
                 "(`GRRParams`, ...); `ldpfast.protocol(id)` hands them out as `.Params`, `.Client`, `.Reports`, "
                 "`.Server`. See the [user guide](../guide/index.md).")

MODULES: List[Page] = [
    Page("ldpfast", "The package",
         ":members: backend_info, set_backend, set_num_threads, set_progress, load, protocol"),
    Page("ldpfast._registry", "Protocols and the registry",
         ":members: Protocol, AuditHooks, WireField, bits_for, register_protocol, protocols, protocol, "
         "params_from_json,\n             INPUT_KINDS, ENTRY_POINT_GROUP",
         "Each protocol is one module of a family of `ldpfast.protocols`, grouped by the data a user holds "
         "(`frequency`, `heavy`, `sets`, `repeated`, `numeric`, `multiattribute`); the module's one public home is "
         "its family path (`from ldpfast.protocols.frequency import ocms`). It registers itself with one "
         "`register_protocol(Protocol(...))` call: its classes and the hooks every generic layer reads "
         "(example, input kind, wire fields, closed-form variance, simulation entries, audit plan). "
         "`CONTRIBUTING.md` walks through adding one; another package ships one through the "
         "`ldpfast.protocols` entry point group ([conformance checks](../testing.md)). The paths of "
         "ldpfast 0.1.0 (`ldpfast.ocms`, ...), the flat paths of 0.2 (`ldpfast.protocols.ocms`, ...) and the "
         "bare class names (`grr.Params`, ...) still work with a `DeprecationWarning` that names each name's "
         "new home, and are removed in ldpfast 0.3.0.",
         ".. autoclass:: ldpfast._base.ClientBase\n   :members: seeded"),
    Page("ldpfast.planning", "Choosing a protocol: recommend",
         ":members: recommend, Option, QUERIES, STEPS_PER_SECOND"),
    Page("ldpfast.domain", "Labels: domains",
         ":members: Domain, HashedDomain, PrefixDomain, DomainRef, label_hash, hash_labels, domain_from_dict",
         "", ".. automethod:: ldpfast._params.Params.with_domain\n\n"
         ".. autoattribute:: ldpfast._params.Params.label_domain"),
    Page("ldpfast.testing", "Conformance checks",
         ":members: check_protocol, protocol_checks, Check, CheckResult, CheckSkipped, ProtocolCheckError, "
         "CHECK_NAMES,\n             CHECK_GROUPS, GROUPS, SEED",
         "See [Conformance checks for protocols](../testing.md)."),
    Page("ldpfast.errors", "Errors"),
    Page("ldpfast.estimates", "Estimates with error bars"),
    Page("ldpfast.postprocessing", "Consistency post-processing", "",
         "`Estimate.postprocess`; also importable from `ldpfast.estimates`."),
    Page("ldpfast.uncertainty", "Standard errors and intervals", "",
         "The models behind the standard errors, intervals and tests (what each protocol's "
         "`variance` hook returns)."),
    Page("ldpfast.protocols.frequency.ocms", "OCMS+RR", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.frequency._hashed_reports", "OCMS+RR's report store", "",
         "The report store behind `ldpfast.protocols.frequency.ocms.Server` (kept reports or streamed match counts)."),
    Page("ldpfast.protocols.frequency.grr", "GRR", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.frequency.olh", "OLH", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.frequency.blh", "BLH", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.frequency.pgr", "PGR", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.frequency.unary", "Unary encoding (OUE, SUE)", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.repeated.rappor", "RAPPOR", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.repeated.longitudinal", "Longitudinal GRR and OLH", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.repeated.longitudinal_unary", "Longitudinal unary encodings", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.repeated.dbitflip", "dBitFlip and 1BitMean", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols._memo", "Memoization", ":members: new_secrets, MemoClient"),
    Page("ldpfast.protocols._bitvec", "Bit rows", ":members: pack_bits, unpack_bits"),
    Page("ldpfast.protocols.frequency.hadamard", "Hadamard family (HE, HRR, CMS+HE)", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.frequency.rhr", "RHR", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.frequency.hadaoracle", "HadaOracle", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.heavy.hadaheavy", "HadaHeavy", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.heavy.pem", "PEM", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.sets.privsketch", "PrivSketch", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.sets.privsketch_ldp", "PrivSketch-LDP", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.sets.multi_pcms", "Multi-PCMS", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.sets.ps_olh", "PS-OLH", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.sets.svim", "SVIM", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.numeric.mean", "Means of one number (Duchi, PM, HM, Laplace)", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.numeric.multidim", "Means of several numbers (sampled-mean, Duchi's multidimensional, "
         "moments)", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.numeric.square_wave", "Square Wave", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.numeric.distribution", "The distribution of a number: the entry point"),
    Page("ldpfast.protocols.numeric.binned", "Binned frequency oracles"),
    Page("ldpfast.protocols.numeric.hierarchy", "Range queries: hierarchical histograms and HIO", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.numeric.ahead", "Range queries: AHEAD", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.multiattribute.multifreq", "Records: SPL, SMP, RS+FD", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.multiattribute.calm", "Records: CALM and the full joint", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.multiattribute.tdg", "Multi-dimensional ranges: TDG", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.multiattribute.hdg", "Multi-dimensional ranges: HDG", "", PROTOCOL_LEAD),
    Page("ldpfast.protocols.multiattribute.adaptive_grid", "Multi-dimensional ranges: the adaptive grid", "",
         PROTOCOL_LEAD),
    Page("ldpfast.experiments.rounds", "Repeated collection"),
    Page("ldpfast.theory", "Closed forms", ":imported-members:"),
    Page("ldpfast.estimation", "IBU and maximum-likelihood estimation"),
    Page("ldpfast.estimation.channel", "Channels"),
    Page("ldpfast.estimation.solve", "Solvers"),
    Page("ldpfast.estimation.accuracy", "Accuracy of IBU and MLE"),
    Page("ldpfast.theory.shuffle", "Shuffle model"),
    Page("ldpfast.audit", "Privacy audit"),
    Page("ldpfast.kernels", "Kernels", ":imported-members:"),
    Page("ldpfast.metrics", "Metrics"),
    Page("ldpfast.datasets", "Data sets"),
    Page("ldpfast.experiments", "Simulations"),
    Page("ldpfast.wire", "Wire formats"),
    Page("ldpfast.arrow", "Arrow and Parquet"),
    Page("ldpfast.dask", "Dask"),
    Page("ldpfast.spark", "Spark"),
]

INDEX = """# API reference

Generated from the docstrings, one page per module (`tools/docs_api.py` writes these pages).
Every protocol module has the same four parts: a frozen **Params**, a **Client**
(`perturb`), typed **Reports** and a **Server** (`update`, `merge`, `estimate`,
`to_bytes`/`from_bytes`); see the [user guide](../guide/index.md).

```{toctree}
:maxdepth: 1

"""


def page_text(page: Page) -> str:
    directive = f".. automodule:: {page.module}" + (f"\n   {page.options}" if page.options else "")
    if page.extra:
        directive += "\n\n" + page.extra
    lead = f"{page.lead}\n\n" if page.lead else ""
    return f"# `{page.module}`: {page.title}\n\n{lead}```{{eval-rst}}\n{directive}\n```\n"


def pages() -> Dict[str, str]:
    out = {f"{page.module}.md": page_text(page) for page in MODULES}
    out["index.md"] = INDEX + "".join(f"{page.module}\n" for page in MODULES) + "```\n"
    return out


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare docs/api/ with what would be written")
    args = parser.parse_args(argv)
    wanted = pages()
    if args.check:
        present = {path.name: path.read_text(encoding="utf-8") for path in API.glob("*.md")}
        stale = sorted(name for name in wanted.keys() | present.keys() if wanted.get(name) != present.get(name))
        if stale:
            print("docs/api/ is stale (run python tools/docs_api.py):", ", ".join(stale), file=sys.stderr)
        return 1 if stale else 0
    API.mkdir(exist_ok=True)
    for stale in set(path.name for path in API.glob("*.md")) - wanted.keys():
        (API / stale).unlink()
    for name, text in wanted.items():
        (API / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
