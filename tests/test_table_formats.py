"""Every published table is written as LaTeX and Markdown beside its CSV (rnnrepro.analysis.table_formats),
by the notebook runner, only when the notebook succeeded."""

import pandas as pd
import pytest

from rnnrepro.analysis import run_notebook, table_formats
from rnnrepro.analysis.notebook import rounded

TABLE = pd.DataFrame({
    "model": ["lstm_m1000", "pru_g4_k2_m1400", "mgu"],
    "test_ppl": [278.65515706, 275.4, float("nan")],
    "seeds": [3, 3, 3],
    "footing": ["", "", "50 % of #2 & {a} | b\nsecond line"],
})


def test_latex_and_markdown_hold_the_csv_cell_for_cell(tmp_path):
    path = tmp_path / "pru_table1.csv"
    rounded(TABLE).to_csv(path, index=False)
    out = table_formats.texts(path)
    assert set(out) == {".tex", ".md"}
    latex = out[".tex"].splitlines()
    # numbers right, text left; booktabs rules; one line per row
    assert latex[0] == r"\begin{tabular}{lrrl}" and latex[1] == r"\toprule" and latex[-1] == r"\end{tabular}"
    assert sum(line.rstrip().endswith(r"\\") for line in latex) == 1 + len(TABLE)
    assert r"test\_ppl" in latex[2] and r"pru\_g4\_k2\_m1400" in out[".tex"]
    assert "278.7" in out[".tex"] and "278.655" not in out[".tex"]  # the CSV's rounding, not a new one
    assert r"50 \% of \#2 \& \{a\}" in out[".tex"]  # LaTeX's special characters escaped
    markdown = out[".md"].splitlines()
    assert len(markdown) == 2 + len(TABLE)
    assert [cell.strip() for cell in markdown[0].strip("|").split("|")] == list(TABLE.columns)
    assert markdown[1].replace(" ", "").startswith("|:--") and "--:|" in markdown[1]  # model left, test_ppl right
    assert r"{a} \| b second line" in markdown[-1]  # a pipe and a line break do not break the row
    assert all(line.count("|") - line.count(r"\|") == 5 for line in markdown)


def test_a_table_without_rows_keeps_its_columns(tmp_path):
    path = tmp_path / "claims.csv"
    path.write_text("study,claim,verdict\n")
    out = table_formats.texts(path)
    assert out[".tex"].startswith(r"\begin{tabular}{lll}") and out[".md"].splitlines()[0].count("|") == 4


def test_an_empty_file_is_named(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("")
    with pytest.raises(ValueError, match="x.csv is empty"):
        table_formats.texts(path)


NOTEBOOK = """# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
tables = []
figures = []
fail = False

# %%
import pandas as pd

pd.DataFrame({"model": ["lstm", "pru"], "test_ppl": [80.5, 78.25]}).to_csv(tables[0], index=False)
assert not fail, "failing on purpose"
"""


def test_the_notebook_runner_writes_them_beside_the_csv_only_on_success(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "x.py"
    notebook.write_text(NOTEBOOK)
    table, executed = tmp_path / "tables" / "pru_table1.csv", tmp_path / "x.ipynb"
    table.parent.mkdir()
    with pytest.raises(RuntimeError, match="failing on purpose"):
        run_notebook.run(notebook, executed, {"tables": [str(table)], "figures": [], "fail": True})
    assert sorted(p.name for p in table.parent.iterdir()) == []
    run_notebook.run(notebook, executed, {"tables": [str(table)], "figures": []})
    assert sorted(p.name for p in table.parent.iterdir()) == ["pru_table1.csv", "pru_table1.md", "pru_table1.tex"]
    assert "78.25" in (table.parent / "pru_table1.tex").read_text()
    assert (table.parent / "pru_table1.md").read_text() == table_formats.texts(table)[".md"]
