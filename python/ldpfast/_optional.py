"""Optional dependencies: one import helper, so every missing package gives the same one
line naming the ``ldpfast[extra]`` that installs it (and the command line prints that line,
not a traceback)."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

#: The extra of pyproject.toml that installs each optional package.
EXTRAS = {"pyarrow": "arrow", "matplotlib": "plot", "dask": "dask", "distributed": "dask", "pandas": "pandas",
          "scipy": "shuffle", "pyspark": "spark"}


def require(module: str, what: str) -> ModuleType:
    """``importlib.import_module(module)``; MissingDependencyError saying that ``what``
    needs the package and which extra installs it, when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split(".")[0]
        raise MissingDependencyError(f"{what} needs {package}, which is not installed: "
                                     f"pip install 'ldpfast[{EXTRAS[package]}]'") from None
