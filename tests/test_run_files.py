"""Damaged training results: a notebook (and its rule) stops before running, naming the run folder of
every damaged metrics.json; a failed notebook's kept copy is removed once the notebook succeeds; a
damaged model.pt is named by status and by the notebooks that read weights."""

import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from rnnrepro import grid, status
from rnnrepro.analysis import run_notebook
from rnnrepro.analysis.results import read_cells
from rnnrepro.analysis.run_files import DamagedRunFile, check_weights, read_metrics
from rnnrepro.configuration import REPO_ROOT, load_study

METRICS = {"study": "pru", "dataset": "ptb", "corpus": "synth_ptb", "model": "lstm_m1000", "fraction": 100,
           "seed": 1111, "budget": "smoke", "params": 1000, "epochs": 2, "wall_seconds": 3.0,
           "val_loss": math.log(50.0), "val_ppl": 50.0, "test_loss": math.log(48.0), "test_ppl": 48.0}


def current_config(model: str) -> dict:
    """What the pru study file resolves for the smoke cell of ``model`` (run_folder's cells are current)."""
    run_config = dict(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text()), budget="smoke")
    return grid.resolve_cell(load_study("pru"), run_config, grid.Cell("pru", "synth_ptb", model, 100, 1111, "smoke"))


CONFIG = current_config("lstm_m1000")
# A notebook that only reads its cells (and writes its one table), failing when `fail` is set.
NOTEBOOK = """# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
study = "pru"
artifact = "x"
metrics_files = []
tables = []
figures = []
fail = False

# %%
from rnnrepro.analysis.results import read_cells

assert not fail, "failing on purpose"
read_cells(metrics_files).to_csv(tables[0], index=False)
"""


def run_folder(root: Path, model: str, metrics_text: str | None = None) -> Path:
    run_dir = root / "results/runs/pru/synth_ptb" / model / "frac100/seed1111"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json").write_text(metrics_text or json.dumps(dict(METRICS, model=model)))
    (run_dir / "config.json").write_text(json.dumps(current_config(model)))
    return run_dir


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[:50], r"metrics.json is not valid JSON"),
    (lambda text: text.replace("48.0", '"48.0"'), r"key 'test_ppl': '48.0' is not of type 'number'"),
    (lambda text: text.replace('"val_ppl"', '"val_pp"'), r"missing 'val_ppl'"),
])
def test_damaged_metrics_names_the_run_folder(tmp_path, damage, message):
    good = run_folder(tmp_path, "lstm_m1200")
    bad = run_folder(tmp_path, "lstm_m1000", damage(json.dumps(METRICS)))
    with pytest.raises(DamagedRunFile, match=rf"^run folder {bad}: .*{message}.*--force"):
        read_metrics(bad / "metrics.json")
    with pytest.raises(DamagedRunFile, match=rf"^run folder {bad}: "):
        read_cells([str(good / "metrics.json"), str(bad / "metrics.json")])
    assert read_metrics(good / "metrics.json")["model"] == "lstm_m1200"


def test_damaged_config_names_the_run_folder(tmp_path):
    run_dir = run_folder(tmp_path, "lstm_m1000")
    (run_dir / "config.json").write_text("{}")
    with pytest.raises(DamagedRunFile, match=rf"^run folder {run_dir}: config.json is damaged: no architecture"):
        read_cells([str(run_dir / "metrics.json")])


def notebook_cli(root: Path, notebook: Path, metrics: list[Path], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rnnrepro.analysis.run_notebook", str(notebook), "out/x.ipynb",
                           "--study", "pru", "--artifact", "x", "--metrics", *map(str, metrics),
                           "--tables", "out/x.csv", *extra], cwd=root, capture_output=True, text=True, timeout=300)


def test_notebook_stops_before_running_and_names_every_damaged_folder(tmp_path):
    notebook = tmp_path / "x.py"
    notebook.write_text(NOTEBOOK)
    good = run_folder(tmp_path, "lstm_m1200")
    truncated = run_folder(tmp_path, "lstm_m1000", json.dumps(METRICS)[:50])
    missing_key = run_folder(tmp_path, "lstm_m1400", json.dumps({k: v for k, v in METRICS.items() if k != "epochs"}))
    out = notebook_cli(tmp_path, notebook, [good / "metrics.json", truncated / "metrics.json",
                                            missing_key / "metrics.json"])
    assert out.returncode == 1
    assert "not run: 2 of its 3 training results cannot be read" in out.stderr
    assert f"run folder {truncated.relative_to(tmp_path)}: metrics.json is not valid JSON" in out.stderr
    assert f"run folder {missing_key.relative_to(tmp_path)}: metrics.json is damaged: 'epochs' is a required" in out.stderr
    # stopped before papermill: only the record of the failure, which has the workflow run it again
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["x.last-failure"]


def test_failed_notebook_copy_is_removed_after_a_successful_rerun(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "x.py"
    notebook.write_text(NOTEBOOK)
    metrics = run_folder(tmp_path, "lstm_m1000") / "metrics.json"
    kept = tmp_path / run_notebook.failed_copy(notebook)
    parameters = {"study": "pru", "artifact": "x", "metrics_files": [str(metrics)],
                  "tables": [str(tmp_path / "x.csv")], "figures": []}
    with pytest.raises(RuntimeError, match=rf"(?s)failed in cell .*failing on purpose.*kept at {run_notebook.FAILED_DIR}"):
        run_notebook.run(notebook, tmp_path / "x.ipynb", dict(parameters, fail=True))
    assert kept.exists()
    run_notebook.run(notebook, tmp_path / "x.ipynb", parameters)
    assert not kept.exists()
    assert (tmp_path / "x.csv").read_text().splitlines()[1].startswith("pru,ptb,synth_ptb,lstm_m1000")


def test_a_kernel_that_dies_while_starting_is_started_again(tmp_path, monkeypatch, capsys):
    """A kernel can die before it answers, having run no cell (over TCP, a process starting at the same
    moment could take its ports). The notebook then runs in another kernel; a kernel that never starts
    is still an error."""
    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "x.py"
    notebook.write_text(NOTEBOOK)
    metrics = run_folder(tmp_path, "lstm_m1000") / "metrics.json"
    parameters = {"study": "pru", "artifact": "x", "metrics_files": [str(metrics)],
                  "tables": [str(tmp_path / "x.csv")], "figures": []}
    real, starts = run_notebook.papermill.execute_notebook, []

    def port_taken_once(*args, **kwargs):
        starts.append(1)
        if len(starts) == 1:
            raise RuntimeError(run_notebook.KERNEL_DIED)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_notebook.papermill, "execute_notebook", port_taken_once)
    run_notebook.run(notebook, tmp_path / "x.ipynb", parameters)
    assert len(starts) == 2 and (tmp_path / "x.csv").exists() and (tmp_path / "x.ipynb").exists()
    assert "kernel died while starting (attempt 1 of 3)" in capsys.readouterr().err

    def never_starts(*args, **kwargs):
        starts.append(1)
        raise RuntimeError(run_notebook.KERNEL_DIED)

    starts.clear()
    monkeypatch.setattr(run_notebook.papermill, "execute_notebook", never_starts)
    with pytest.raises(RuntimeError, match=run_notebook.KERNEL_DIED):
        run_notebook.run(notebook, tmp_path / "y.ipynb", parameters)
    assert len(starts) == run_notebook.KERNEL_STARTS


# ---- a damaged model.pt ------------------------------------------------------------------------

def save_weights(run_dir: Path) -> Path:
    """A model.pt as the trainer writes it (config and weights, one torch.save)."""
    torch.save({"config": CONFIG, "state_dict": {"embedding.weight": torch.zeros(50, 8)}}, run_dir / "model.pt")
    return run_dir / "model.pt"


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def test_damaged_weights_are_found_from_the_zip_directory(tmp_path):
    run_dir = run_folder(tmp_path, "lstm_m1000")
    check_weights(run_dir / "model.pt")  # none (a cell rendered from records/): nothing to check
    weights = save_weights(run_dir)
    check_weights(weights)
    truncate(weights)
    with pytest.raises(DamagedRunFile, match=rf"^run folder {run_dir}: model.pt is damaged \(not a complete zip "
                                             rf"archive: .*\); delete it and its metrics.json, then rerun"):
        check_weights(weights)
    with zipfile.ZipFile(weights, "w") as archive:
        archive.writestr("notes.txt", "not weights")
    with pytest.raises(DamagedRunFile, match="not one torch.save wrote"):
        check_weights(weights)


def test_status_shows_a_finished_cell_with_damaged_weights(tmp_path):
    cell = grid.Cell("pru", "synth_ptb", "lstm_m1000", 100, 1111, "smoke")
    run_dir = tmp_path / cell.run_dir
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json").write_text(json.dumps(METRICS))
    assert status.cell_status(tmp_path, cell, "ptb").state == "done"  # no weights (rendered from records/)
    weights = save_weights(run_dir)
    assert status.cell_status(tmp_path, cell, "ptb").state == "done"
    truncate(weights)
    row = status.cell_status(tmp_path, cell, "ptb")
    assert row.state == "failed"
    assert row.note.startswith("model.pt is damaged") and "delete it and its metrics.json" in row.note


@pytest.mark.slow
def test_figure_4_names_a_damaged_model_file(tmp_path):
    """The Figure 4 notebook reads each cell's weights: a truncated model.pt stops it with exit status 1,
    naming the file and the fix, not torch's "PytorchStreamReader failed reading zip archive" alone."""
    train_file = tmp_path / CONFIG["data"]["train_file"]  # relative, as the workflow writes it
    train_file.parent.mkdir(parents=True)
    train_file.write_text("the cat sat on the mat\n" * 20)
    run_dir = run_folder(tmp_path, "lstm_m1000")
    weights = save_weights(run_dir)
    truncate(weights)
    out = subprocess.run([sys.executable, "-m", "rnnrepro.analysis.run_notebook",
                          str(REPO_ROOT / "notebooks/pru_fig4.py"), "out/fig4.ipynb", "--study", "pru", "--artifact",
                          "fig4", "--metrics", str(run_dir / "metrics.json"), "--tables", "out/fig4.csv",
                          "--figures", "out/fig4.png"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    assert f"{weights} is damaged" in out.stderr and "delete it and its metrics.json, then rerun" in out.stderr


SHARING = '''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
tables = []
figures = []
leave = False

# %%
import os
from pathlib import Path

assert "left_behind" not in globals(), "a variable of the notebook before survived"
if leave:
    left_behind = 1
Path(tables[0]).write_text(f"pid\\n{os.getpid()}\\n")
'''


def test_notebooks_in_a_shared_kernel_start_from_an_empty_namespace(tmp_path, monkeypatch):
    """`records render` runs a worker's notebooks in turn in one kernel: each sees nothing the one before
    defined, and the kernel is gone afterwards."""
    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "share.py"
    notebook.write_text(SHARING)
    with run_notebook.shared_kernel() as kernel:
        for name, leave in (("first", True), ("second", False)):
            run_notebook.run(notebook, tmp_path / f"{name}.ipynb",
                             {"tables": [str(tmp_path / f"{name}.csv")], "figures": [], "leave": leave},
                             kernel=kernel)
        assert kernel.is_alive()
    assert not kernel.is_alive()
    pids = {(tmp_path / f"{name}.csv").read_text().split()[1] for name in ("first", "second")}
    assert len(pids) == 1  # one kernel ran both


# ---- a stale cell never feeds a table --------------------------------------------------------------

@pytest.mark.parametrize("change, said", [
    (lambda cfg: cfg["recipe"].update(lr=cfg["recipe"]["lr"] * 2), "stale (the study file changed since it was "
                                                                    "trained: recipe.lr"),
    (lambda cfg: cfg["architecture"].update(hidden_size=7), "architecture.hidden_size 7 ->"),
    (lambda cfg: cfg.pop("recipe_name"), "config.json is damaged: no recipe_name"),
])
def test_a_stale_cell_stops_its_notebook_naming_it(tmp_path, monkeypatch, change, said):
    """A cell whose config.json is not what the study file gives it now (restored from records/ before a
    recipe changed, which Snakemake has no record of and so does not retrain) feeds no table: the
    notebook stops before running, naming the cell, the difference and how to retrain it."""
    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "x.py"
    notebook.write_text(NOTEBOOK)
    current = run_folder(tmp_path, "lstm_m1200")
    stale = run_folder(tmp_path, "lstm_m1000")
    cfg = json.loads((stale / "config.json").read_text())
    change(cfg)
    (stale / "config.json").write_text(json.dumps(cfg))
    parameters = {"study": "pru", "artifact": "x", "metrics_files": [str(current / "metrics.json"),
                                                                      str(stale / "metrics.json")],
                  "tables": [str(tmp_path / "x.csv")], "figures": []}
    with pytest.raises(RuntimeError) as stopped:
        run_notebook.run(notebook, tmp_path / "x.ipynb", parameters)
    message = str(stopped.value)
    assert "not run: 1 of its 2 training results were trained with another config" in message
    assert f"{stale.relative_to(tmp_path)}: " in message and said in message, message
    assert str(current.relative_to(tmp_path)) not in message
    assert "--force" in message
    assert not (tmp_path / "x.csv").exists()


def test_the_same_cells_current_feed_the_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "x.py"
    notebook.write_text(NOTEBOOK)
    metrics = [str(run_folder(tmp_path, model) / "metrics.json") for model in ("lstm_m1000", "lstm_m1200")]
    run_notebook.run(notebook, tmp_path / "x.ipynb", {"study": "pru", "artifact": "x", "metrics_files": metrics,
                                                      "tables": [str(tmp_path / "x.csv")], "figures": []})
    assert len((tmp_path / "x.csv").read_text().splitlines()) == 3


# ---- a failing notebook leaves the tables of an earlier run ----------------------------------------

@pytest.mark.slow
def test_a_failing_notebook_leaves_the_earlier_table_and_records_the_failure(tmp_path, monkeypatch):
    """The notebook writes beside the table and replaces it only once it succeeded: a failure, even after
    the table was written (here: columns other than the artifact declares), leaves the earlier table,
    no partial file, and a record of the failure that the workflow reads as a param."""
    from rnnrepro.analysis import failed_notebooks

    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "x.py"
    notebook.write_text(NOTEBOOK)
    metrics = str(run_folder(tmp_path, "lstm_m1000") / "metrics.json")
    table, executed = tmp_path / "pru_table1.csv", tmp_path / "x.ipynb"
    table.write_text("an earlier run's table\n")
    assert failed_notebooks.last_failure(executed) == ""
    for parameters, error in ((dict(fail=True), "failing on purpose"),
                              (dict(artifact="table1"), "columns differ from those declared")):
        with pytest.raises(RuntimeError, match=error):
            run_notebook.run(notebook, executed, {"study": "pru", "artifact": "x", "metrics_files": [metrics],
                                                  "tables": [str(table)], "figures": [], **parameters})
        assert table.read_text() == "an earlier run's table\n"
        assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["pru_table1.csv", "x.last-failure", "x.py"]
        failure = failed_notebooks.last_failure(executed)
        assert failure and failure != getattr(test_a_failing_notebook_leaves_the_earlier_table_and_records_the_failure,
                                              "seen", None)
        test_a_failing_notebook_leaves_the_earlier_table_and_records_the_failure.seen = failure
    run_notebook.run(notebook, executed, {"study": "pru", "artifact": "x", "metrics_files": [metrics],
                                          "tables": [str(table)], "figures": []})
    assert table.read_text().startswith("study,") and executed.exists()
    assert failed_notebooks.last_failure(executed) == failure  # a success leaves the param as it was


# ---- histories, evaluation outputs and speed results are checked as they are read -----------------

@pytest.mark.parametrize("damage, said", [
    (lambda text: text.replace("2,", "abc,", 1), "column epoch holds 'abc' (row 2), not a number"),
    (lambda text: text.replace("val_loss", "val_los"), "no column val_loss"),
    (lambda text: text.replace("3.9", "nan", 1), "val_loss is nan in row 1"),
    (lambda text: text.splitlines()[0] + "\n", "no rows"),
    (lambda text: 'epoch,"val_loss\n1,2', "not a CSV table"),
])
def test_a_damaged_history_is_named(tmp_path, damage, said):
    from rnnrepro.analysis.run_files import read_history

    run_dir = run_folder(tmp_path, "lstm_m1000")
    good = "epoch,train_loss,val_loss,lr,averaging\n1,4.5,3.9,30.0,False\n2,4.0,3.5,30.0,True\n"
    (run_dir / "history.csv").write_text(good)
    assert list(read_history(run_dir)["val_loss"]) == [3.9, 3.5]
    (run_dir / "history.csv").write_text(damage(good))
    with pytest.raises(DamagedRunFile, match=rf"^run folder {run_dir}: history.csv is damaged"):
        read_history(run_dir)
    with pytest.raises(DamagedRunFile) as error:
        read_history(run_dir)
    assert said in str(error.value) and "--force" in str(error.value)


DYNAMIC_EVAL = {"study": "pru", "dataset": "ptb", "corpus": "synth_ptb", "model": "lstm_m1000", "fraction": 100,
                "seed": 1111, "budget": "smoke", "evaluation": "dynamic_eval", "method": "dynamic",
                "static_test_ppl": 120.0, "dynamic_test_ppl": 110.0, "lr": 1e-4, "decay": 0.002, "epsilon": 2e-5,
                "segment_length": 5, "grid": [{"lr": 1e-4, "ppl": 111.0}]}


@pytest.mark.parametrize("damage, said", [
    (lambda text: text[:40], "not valid JSON"),
    (lambda text: text.replace('"dynamic_test_ppl"', '"dynamic_test_pp"'), "no dynamic_test_ppl"),
    (lambda text: text.replace("110.0", '"110"'), "dynamic_test_ppl is not a number ('110')"),
    (lambda text: text.replace("111.0", "NaN"), "grid[0].ppl is nan"),
    (lambda text: text.replace('"seed": 1111', '"seed": "1111"'), "seed is not a int"),
    (lambda text: "[]", "not a JSON object"),
])
def test_a_damaged_evaluation_output_is_named(tmp_path, damage, said):
    """What the dynamic evaluation, entropy and saliency notebooks read: a damaged file is named, with
    how to make it again, instead of a KeyError or a NaN table."""
    from rnnrepro.evaluation.results import read_evaluation

    metrics = run_folder(tmp_path, "lstm_m1000") / "metrics.json"
    path = metrics.parent / "dynamic_eval.json"
    path.write_text(json.dumps(DYNAMIC_EVAL))
    assert read_evaluation(metrics, "dynamic_eval")["dynamic_test_ppl"] == 110.0
    path.write_text(damage(json.dumps(DYNAMIC_EVAL)))
    with pytest.raises(DamagedRunFile) as error:
        read_evaluation(metrics, "dynamic_eval")
    assert str(error.value).startswith(f"{path} is damaged: ") and said in str(error.value), str(error.value)
    assert "Delete it and rerun" in str(error.value)


def test_a_damaged_speed_result_and_non_finite_metrics_are_named(tmp_path):
    from rnnrepro.analysis.run_files import read_speed_file

    speed = {"batch_size": 12, "bptt": 70, "vocab_size": 10000, "device_name": "cpu",
             "rows": [{"model": "lstm", "lm_seconds_per_batch": 0.5, "layer_seconds": 0.05}]}
    path = tmp_path / "lrn.json"
    path.write_text(json.dumps(speed))
    assert read_speed_file(path)["rows"][0]["model"] == "lstm"
    speed["rows"][0]["layer_seconds"] = 0
    path.write_text(json.dumps(speed))
    with pytest.raises(DamagedRunFile, match=rf"^{path} is damaged: rows: lstm: layer_seconds is not a positive"):
        read_speed_file(path)
    run_dir = run_folder(tmp_path, "lstm_m1000", json.dumps(dict(METRICS, test_ppl=math.inf)))
    with pytest.raises(DamagedRunFile, match=rf"^run folder {run_dir}: metrics.json is damaged: test_ppl is inf"):
        read_metrics(run_dir / "metrics.json")


def test_a_history_read_again_is_the_file_as_it_is_now(tmp_path):
    """read_history keeps what it parsed for files read again unchanged (a render reads each several
    times); a changed file is read anew, and a caller's changes to its table reach no later reader."""
    from rnnrepro.analysis.run_files import read_history

    path = tmp_path / "history.csv"
    path.write_text("epoch,val_loss\n1,5.0\n")
    first = read_history(tmp_path)
    first.loc[0, "val_loss"] = 1.0
    assert read_history(tmp_path)["val_loss"].tolist() == [5.0]
    path.write_text("epoch,val_loss\n1,5.0\n2,4.5\n")
    assert read_history(tmp_path)["val_loss"].tolist() == [5.0, 4.5]
    path.write_text("epoch,val_loss\n1,5.0\n2,nan\n")
    with pytest.raises(DamagedRunFile, match="val_loss is nan in row 2"):
        read_history(tmp_path)
