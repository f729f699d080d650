"""Sphinx configuration: `python -m sphinx -W --keep-going -b html docs docs/_build/html`
(pip install ".[docs]"). Pages are Markdown (MyST); the API reference is generated from
the docstrings of the installed (or PYTHONPATH) package."""

import sys
from pathlib import Path

import ldpfast

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "ldpfast"
author = "The ldpfast developers"
copyright = "2026, The ldpfast developers"
release = ldpfast.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "mathml_math",  # formulas as MathML at build time: no MathJax from a CDN, pages work offline
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "img", "_ext", "numbers.json"]
html_math_renderer = "mathml"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# Several protocol modules define a class named Params; annotations that name the base class
# unqualified (the registry's, read as strings since they mention TYPE_CHECKING-only names)
# are then ambiguous and Sphinx links one of them. Not a broken link: not a build failure.
suppress_warnings = ["ref.python"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_numpy_docstring = True
napoleon_google_docstring = True

# Furo ships its stylesheets and scripts in the package and uses the system's fonts: the
# site works offline. Its content column widens with the window and code blocks scroll
# sideways instead of being cut (tests/test_docs_browser.py checks both in a browser).
html_theme = "furo"
html_title = f"ldpfast {release}"
