"""What every artifact notebook does around its analysis (rnnrepro.analysis.notebook): write a table only
when every result it needs is there, write a figure, and nothing of this written again in a notebook."""

import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.configuration import REPO_ROOT


def test_a_table_with_a_missing_result_is_not_written_and_the_row_is_named(tmp_path):
    table = pd.DataFrame({"dataset": ["ptb", "wt2"], "model": ["lstm_m1000", "pru_g4_k2_m1400"],
                          "val_ppl": [70.0, 80.0], "test_ppl": [66.0, math.nan]})
    path = tmp_path / "pru_table1.csv"
    with pytest.raises(ValueError, match=r"pru_table1.csv not written: 1 of its 2 rows have no test_ppl "
                                         r"\(the first: dataset wt2, model pru_g4_k2_m1400\)"):
        save(table, str(path), complete=["val_ppl", "test_ppl"])
    assert not path.exists()
    save(table, str(path), complete=["val_ppl"])
    assert pd.read_csv(path).columns.tolist() == ["dataset", "model", "val_ppl", "test_ppl"]  # no index column


def test_a_figure_is_written_and_closed(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    save_figure(fig, str(tmp_path / "figure.png"))
    assert (tmp_path / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)


@pytest.mark.parametrize("notebook", sorted((REPO_ROOT / "notebooks").glob("*.py")), ids=lambda p: p.stem)
def test_notebooks_leave_reading_and_writing_to_the_helper(notebook):
    """A notebook shows its analysis: the backend, the CSV and PNG writing are the helper's."""
    text = notebook.read_text()
    assert "from rnnrepro.analysis.notebook import" in text
    for own_copy in ("matplotlib.use(", ".to_csv(", ".savefig("):
        assert own_copy not in text, f"{notebook.name} writes {own_copy!r} itself: use rnnrepro.analysis.notebook"
    assert '# %% tags=["parameters"]' in text  # papermill fills in this cell


@pytest.mark.parametrize("notebook", sorted((REPO_ROOT / "notebooks").glob("*.py")), ids=lambda p: p.stem)
def test_notebooks_read_run_files_and_tables_through_the_checked_readers(notebook):
    """A file a notebook reads is checked as it is read, and a damaged one is named (rnnrepro.analysis.
    run_files, rnnrepro.analysis.claims): a notebook opens none itself."""
    text = notebook.read_text()
    for own_reading in ("read_csv(", "read_json(", "json.load", ".read_text("):
        assert own_reading not in text, f"{notebook.name} reads with {own_reading!r}: use a checked reader"
