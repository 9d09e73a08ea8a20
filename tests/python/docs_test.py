"""docs/python.md's and docs/formats.md's examples: python.md's ```python blocks, in order, in one namespace, in a scratch
folder that sees the repository's examples/, with a groved started here on examples/models in place
of the page's localhost:8001. A failing assert in the page fails this test."""

import os
import re
import sys

import pytest
from conftest import SOURCE_DIR, need, need_binary


def blocks(page="python.md"):
    text = open(os.path.join(SOURCE_DIR, "docs", page)).read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_python_md_examples_run(tmp_path, monkeypatch):
    for module in ("pandas", "shap", "matplotlib", "pyspark", "dask.dataframe", "distributed",
                   "grpc", "xgboost"):
        need(module)
    import groved_harness as h
    groved = need_binary("GROVED")
    code = blocks()
    assert len(code) >= 6, "docs/python.md lost its examples"
    os.symlink(os.path.join(SOURCE_DIR, "examples"), tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    with h.Groved(groved, os.path.join(SOURCE_DIR, "examples", "models")) as g:
        namespace = {"__name__": "__docs__"}
        for i, block in enumerate(code):
            block = block.replace("localhost:8001", g.target)
            try:
                exec(compile(block, f"docs/python.md block {i + 1}", "exec"), namespace)
            except Exception as e:
                pytest.fail(f"docs/python.md block {i + 1} failed: {type(e).__name__}: {e}\n"
                            f"{block}")
    assert (tmp_path / "waterfall.png").stat().st_size > 5000
    assert (tmp_path / "beeswarm.png").stat().st_size > 5000


def test_formats_md_examples_run(tmp_path, monkeypatch):
    """docs/formats.md's examples (a Treelite checkpoint of an XGBoost model, a scikit-learn forest
    through Model.from_sklearn, a CatBoost model with CTR splits against CatBoost's predictions),
    each in a scratch folder."""
    for module in ("xgboost", "treelite", "sklearn", "catboost", "pandas"):
        need(module)
    code = blocks("formats.md")
    assert len(code) >= 3, "docs/formats.md lost its examples"
    monkeypatch.chdir(tmp_path)
    for i, block in enumerate(code):
        try:
            exec(compile(block, f"docs/formats.md block {i + 1}", "exec"), {"__name__": "__docs__"})
        except Exception as e:
            pytest.fail(f"docs/formats.md block {i + 1} failed: {type(e).__name__}: {e}\n{block}")
    assert (tmp_path / "checkpoint.tl").stat().st_size > 1000
