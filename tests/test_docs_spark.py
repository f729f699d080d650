"""The documentation pages with Spark blocks run whole, in order, in one namespace, on one
local Spark session (tests/test_spark.py's, which skips where Spark cannot start and fails
in CI). tests/test_docs.py runs every page without its Spark blocks; docs/spark.md is run
by tests/test_spark.py."""

import re

import pytest

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install 'ldpfast[spark]')")

from test_docs import NOT_RUN, PAGES, SPARK_BLOCK, python_blocks  # noqa: E402
from test_spark import spark  # noqa: E402,F401  (the module's Spark session fixture)

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

SPARK_PAGES = [page for page in PAGES if any(re.search(SPARK_BLOCK, block, flags=re.M)
                                              for block in python_blocks(page))]


def test_the_end_to_end_guide_has_spark_blocks():
    assert any(page.name == "end-to-end.md" for page in SPARK_PAGES)


@pytest.mark.parametrize("page", SPARK_PAGES, ids=[page.name for page in SPARK_PAGES])
def test_page_runs_on_spark(page, spark, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    for index, block in enumerate(python_blocks(page)):
        if not block.startswith(NOT_RUN):
            exec(compile(block, f"{page}, block {index}", "exec"), namespace)
