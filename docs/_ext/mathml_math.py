"""A Sphinx math renderer that writes MathML at build time (latex2mathml), so formulas show
without JavaScript or a network connection: every current browser renders MathML Core.
``html_math_renderer = "mathml"`` in conf.py selects it instead of MathJax from a CDN."""

from __future__ import annotations

from typing import Any, Dict

from docutils import nodes
from latex2mathml.converter import convert


def to_mathml(latex: str, display: str) -> str:
    """The MathML of a LaTeX formula (``display``: ``"inline"`` or ``"block"``)."""
    return convert(latex.strip(), display=display)


def visit_inline(self: Any, node: nodes.Element) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(to_mathml(node.astext(), "inline"))
    self.body.append("</span>")
    raise nodes.SkipNode


def visit_block(self: Any, node: nodes.Element) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    if node.get("number"):
        self.body.append(f'<span class="eqno">({node["number"]})</span>')
    self.body.append(to_mathml(node.astext(), "block"))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app: Any) -> Dict[str, Any]:
    app.add_html_math_renderer("mathml", (visit_inline, None), (visit_block, None))
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
