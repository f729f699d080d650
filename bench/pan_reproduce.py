"""Reproduce Pan (CSF 2025) section 6, Figs. 2-4: a thin wrapper around
``ldpfast reproduce`` (same options; see ``ldpfast reproduce --help``).

    python bench/pan_reproduce.py --runs 100 --out pan-run
    python bench/pan_reproduce.py --runs 100 --report docs/pan_reproduction.md --force --plots docs/img \\
        --json docs/pan_reproduction.json          # refresh the committed report
"""

import sys

from ldpfast.cli import main

if __name__ == "__main__":
    sys.exit(main(["reproduce", *sys.argv[1:]]))
