"""Recorded runs standing in for training (workflow/rules/records.smk, rnnrepro.records.Restorer): with
records of every baseline, a run with a cell of your own trains that cell's seeds alone; a stale,
unfinished or missing record trains its cell, and so does a cell whose weights the run needs. On
hand-written records in temporary directories, and Snakemake dry runs."""

import contextlib
import json

import pytest
from conftest import copy_project, snakemake

from rnnrepro import grid, records, tuning
from rnnrepro.configuration import REPO_ROOT, load_run_config, load_yaml
from rnnrepro.custom_cell_checks import check_custom_cells

EXAMPLE = REPO_ROOT / "examples" / "mgu.yaml"


def cpu_studies(custom: bool = True) -> tuple[dict, dict]:
    config = load_run_config({**load_yaml(REPO_ROOT / "config" / "config.yaml"), "budget": "cpu"})
    cells = load_yaml(EXAMPLE)["custom_cells"] if custom else {}
    studies = {name: grid.load_study(name, custom_cells={}) for name in config["studies"]}
    if cells:
        check_custom_cells(cells, studies, "examples/mgu.yaml")
    studies = {name: grid.load_study(name, custom_cells=cells, custom_source="examples/mgu.yaml") for name in studies}
    return config, grid.studies_with_budget(studies, "cpu")


def write_record(root, study: dict, config: dict, cell: grid.Cell, evaluations=()) -> None:
    """A hand-written record of one cell: the config the study file resolves for it, a one-epoch history,
    metrics with the fields the notebooks read, and empty evaluation outputs."""
    run = root / records.record_of(cell)
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(grid.resolve_cell(study, config, cell)))
    (run / "history.csv").write_text("epoch,train_loss,train_ppl,val_loss,val_ppl,lr,averaging,seconds,tokens_per_s\n"
                                     "1,5.8,330.3,5.7,298.9,30.0,False,60.0,1500.0\n")
    (run / "metrics.json").write_text(json.dumps({
        "study": cell.study, "dataset": "ptb", "corpus": cell.corpus, "model": cell.model, "fraction": cell.fraction,
        "seed": cell.seed, "budget": cell.budget, "params": 559568, "epochs": 1, "wall_seconds": 60.0,
        "val_loss": 5.7, "val_ppl": 298.9, "test_loss": 5.65, "test_ppl": 284.3}))
    for name in evaluations:
        (run / f"{name}.json").write_text("{}")


def record_units(root, studies: dict, config: dict, study: str, models: set[str]) -> list[records.Unit]:
    """Records of every unit of ``study`` whose cell is one of ``models`` or a learning-rate tuning cell of
    one (rnnrepro.tuning; recorded first, as the units come, so the cells they tune resolve), with their
    evaluations."""
    written = []
    for unit in records.units({study: studies[study]}, config):
        model = unit.cells[-1].model if unit.cells else None
        if model in models or (tuning.parse_variant(model or "") or ("",))[0] in models:
            for cell in unit.cells:
                names = [e.rsplit("/", 1)[1].removesuffix(".json") for e in unit.evaluations
                         if e.startswith(cell.run_dir + "/")]
                write_record(root, studies[study], config, cell, names)
            written.append(unit)
    return written


TABLE1 = {"lstm_m1000", "lstm_m1400", "pru_g1_k2_m1000", "pru_g2_k2_m1200", "pru_g4_k2_m1400"}


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """The cpu budget's PRU Table 1 baselines recorded (by hand) in a temporary working directory."""
    monkeypatch.chdir(tmp_path)
    config, studies = cpu_studies()
    record_units(tmp_path, studies, config, "pru", TABLE1)
    return tmp_path, config, studies


def config_seeds(studies: dict) -> list[int]:
    return studies["pru"]["budgets"]["cpu"]["seeds"]


def table1_cell(model: str, seed: int = 1111) -> grid.Cell:
    return grid.Cell("pru", "ptb", model, 10, seed, "cpu")


def test_a_current_record_stands_in_and_what_does_not_is_named(recorded):
    root, config, studies = recorded
    restorer = records.Restorer(studies, config)
    assert restorer.problem(table1_cell("lstm_m1400")) is None
    assert restorer.problem(table1_cell("mgu")) == "pru/ptb/mgu/frac10/seed1111: not recorded"

    # a record the study file no longer resolves to (the recipe changed)
    stale = root / records.record_of(table1_cell("pru_g1_k2_m1000", 1112)) / "config.json"
    cfg = json.loads(stale.read_text())
    cfg["recipe"]["lr"] = 20.0
    stale.write_text(json.dumps(cfg))
    assert "stale record" in records.Restorer(studies, config).problem(table1_cell("pru_g1_k2_m1000", 1112))

    # a unit not wholly recorded: the cell's evaluation output is missing, so the cell trains again
    (root / records.record_of(table1_cell("lstm_m1000", 1113)) / "entropy.json").unlink()
    problem = records.Restorer(studies, config).problem(table1_cell("lstm_m1000", 1113))
    assert problem.startswith("pru/ptb/lstm_m1000/frac10/seed1113: ") and "entropy.json: not recorded" in problem

    # a cell this machine trained (its weights are here) is never replaced by a record
    run = root / table1_cell("lstm_m1400", 1112).run_dir
    run.mkdir(parents=True)
    (run / "model.pt").write_bytes(b"")
    assert "trained on this machine" in records.Restorer(studies, config).problem(table1_cell("lstm_m1400", 1112))

    # a cell whose weights the run needs (records keep none)
    needs = records.Restorer(studies, config, weights_needed={table1_cell("pru_g4_k2_m1400")})
    assert "needs the weights" in needs.problem(table1_cell("pru_g4_k2_m1400"))
    assert needs.problem(table1_cell("pru_g4_k2_m1400", 1112)) is None


def test_the_cells_whose_weights_a_target_reads(recorded):
    from rnnrepro import targets

    _, config, studies = recorded
    assert targets.weights_read(studies, config, ["results/cpu/tables/pru_table1.csv"]) == set()
    fig4 = targets.weights_read(studies, config, ["results/cpu/tables/pru_fig4.csv"])
    assert fig4 == {table1_cell(m, s) for m in ("lstm_m1000", "pru_g4_k2_m1400") for s in config_seeds(studies)}
    assert targets.weights_read(studies, config, []) == fig4  # no target: rule all, every artifact
    # the scorecard reads no table of an artifact that reads weights
    assert targets.weights_read(studies, config, ["results/cpu/tables/claims.csv"]) == set()
    asked = targets.weights_read(studies, config, ["results/cpu/runs/pru/ptb/lstm_m1400/frac10/seed1111/model.pt"])
    assert asked == {table1_cell("lstm_m1400")}


# --- the workflow ------------------------------------------------------------------------------------

def planned(run) -> dict[str, int]:
    """Job counts of a dry run's job stats table."""
    lines = run.stdout.split("Job stats:")[1].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project copy with the example and hand-written records of the cpu budget's PRU Table 1."""
    import shutil

    root = copy_project(tmp_path_factory.mktemp("restore"))
    shutil.copytree(REPO_ROOT / "examples", root / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    config, studies = cpu_studies()
    with contextlib.chdir(root):  # the tuned cells resolve from the tuning cells' records written first
        record_units(root, studies, config, "pru", TABLE1)
    return root


TABLE1_TARGET = "results/cpu/tables/pru_table1.csv"


@pytest.mark.slow
def test_only_the_cell_of_your_own_trains_beside_recorded_baselines(project):
    run = snakemake(project, "-n", "--cores", "2", TABLE1_TARGET, "--configfile", "examples/mgu.yaml",
                    "--config", "budget=cpu")
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = planned(run)
    # the baselines' 25 cells restored; the cell of your own tuned (4 rates) and trained (5 seeds)
    assert jobs["restore_cell"] == 25 and jobs["train_cell"] == 9 and jobs["lr_choice"] == 1, jobs
    assert jobs["notebook_pru_table1"] == 1, jobs
    trained = [line for line in run.stdout.splitlines() if line.startswith("    output: results/cpu/runs/")
               and line.endswith("model.pt")]
    assert len(trained) == 9 and all("/mgu/" in line or "/mgu__lrx" in line for line in trained), trained
    # the baselines alone: nothing trains
    run = snakemake(project, "-n", "--cores", "2", TABLE1_TARGET, "--config", "budget=cpu")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "train_cell" not in planned(run) and planned(run)["restore_cell"] == 25
    # without the records: every cell trains
    run = snakemake(project, "-n", "--cores", "2", TABLE1_TARGET, "--configfile", "examples/mgu.yaml",
                    "--config", "budget=cpu", "use_records=false")
    assert run.returncode == 0, run.stderr[-3000:]
    # 30 cells and the 24 tuning cells of the six models
    assert planned(run)["train_cell"] == 54 and "restore_cell" not in planned(run)


def test_a_stale_baseline_trains_again_and_is_named(project):
    stale = project / records.record_of(table1_cell("pru_g2_k2_m1200", 1113)) / "config.json"
    saved = stale.read_text()
    cfg = json.loads(saved)
    cfg["architecture"]["hidden_size"] += 8
    stale.write_text(json.dumps(cfg))
    try:
        run = snakemake(project, "-n", "--cores", "2", TABLE1_TARGET, "--config", "budget=cpu")
    finally:
        stale.write_text(saved)
    assert run.returncode == 0, run.stderr[-3000:]
    # the stale cell trains at the rate its model's recorded tuning cells choose (4 restored for lr_choice)
    assert planned(run)["train_cell"] == 1 and planned(run)["restore_cell"] == 24 + 4
    assert planned(run)["lr_choice"] == 1
    said = run.stdout + run.stderr
    assert ("not restored from its record, so it trains: pru/ptb/pru_g2_k2_m1200/frac10/seed1113: stale record"
            in said), said[-3000:]
    assert "architecture.hidden_size 120 -> 128" in said or "architecture.hidden_size 128 -> 120" in said


def test_a_copy_of_a_record_gone_stale_is_not_kept_quietly(project):
    """A cell restored into the results tree (records.smk copied its record; no model.pt), then its record
    goes stale (here its config, as a changed study file would make it): Snakemake would keep the copy and
    plan nothing, so the run stops at planning, names the copy and the fix, and changes nothing."""
    import shutil

    cell = table1_cell("lstm_m1000", 1111)
    record, run = project / records.record_of(cell), project / cell.run_dir
    saved = (record / "config.json").read_text()
    cfg = json.loads(saved)
    cfg["architecture"]["hidden_size"] += 8
    run.mkdir(parents=True)
    try:
        for name in ("config.json", "history.csv", "metrics.json"):
            shutil.copy(record / name, run / name)
        for folder in (record, run):
            (folder / "config.json").write_text(json.dumps(cfg))
        found = snakemake(project, "-n", "--cores", "1", f"{cell.run_dir}/metrics.json", "--config", "budget=cpu")
        left = sorted(p.name for p in run.iterdir())
    finally:
        (record / "config.json").write_text(saved)
        shutil.rmtree(project / "results")
    said = found.stdout + found.stderr
    assert found.returncode != 0, said[-3000:]
    assert (f"{cell.run_dir}/ holds a copy of its record made for another config (the study file changed: "
            f"architecture.hidden_size") in said, said[-3000:]
    assert f"`rm -r {cell.run_dir}`" in said and left == ["config.json", "history.csv", "metrics.json"]


def test_grow_deletes_a_stale_copy_of_a_record_before_it_trains_the_cell(tmp_path, monkeypatch, capsys):
    """`records grow` trains a unit whose record is stale; a copy of that record in the results tree would
    make its Snakemake run stop (above), so grow deletes the copy first, and says so. A run folder of this
    machine (model.pt) is never deleted."""
    import sys
    from argparse import Namespace

    monkeypatch.chdir(tmp_path)
    config, studies = cpu_studies(custom=False)
    cell = table1_cell("lstm_m1000__lrx1", 1000)
    unit = next(u for u in records.units({"pru": studies["pru"]}, config) if u.cells == [cell])
    write_record(tmp_path, studies["pru"], config, cell)
    stale = json.loads((records.record_of(cell) / "config.json").read_text())
    stale["recipe"]["lr"] += 1
    run = tmp_path / cell.run_dir
    run.mkdir(parents=True)
    for name in ("config.json", "history.csv", "metrics.json"):
        (run / name).write_text((records.record_of(cell) / name).read_text())
    (run / "config.json").write_text(json.dumps(stale))
    grower = records.Grower("cpu", [unit], studies, config, Namespace(minutes=1, threads=1, jobs=1, config=[],
                                                                      commit=False, records=tmp_path / "records"))
    monkeypatch.setattr(grower, "snakemake", lambda *args: [sys.executable, "-c", "pass"])
    grower.log_dir.mkdir(parents=True)  # made by grow's first Snakemake run, which prepares the data
    grower.work()
    said = capsys.readouterr().out
    assert f"deleted {cell.run_dir}/, a copy of its record that is stale now (the study file changed: recipe.lr" \
        in said, said
    assert not run.exists()


def test_an_artifact_that_reads_weights_trains_its_cells(project):
    run = snakemake(project, "-n", "--cores", "2", "results/cpu/tables/pru_fig4.csv", TABLE1_TARGET,
                    "--config", "budget=cpu")
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = planned(run)
    # LSTM M=1000 and PRU g=4 (five seeds each) train; their Table 1 rows come from those runs too
    # (and their two models' recorded tuning cells are restored for their learning rates)
    assert jobs["train_cell"] == 10 and jobs["restore_cell"] == 15 + 8 and jobs["lr_choice"] == 2, jobs


def test_render_with_cells_of_your_own_starts_the_scorecards_kernel_knowing_them(monkeypatch):
    """`records render --configfile` runs the scorecard in a kernel started before any budget is
    rendered: the cells of your own (their `footing` column, their claims) must be in its environment
    by then, or the scorecard finds the tables that hold them damaged."""
    import contextlib
    import os

    from rnnrepro.analysis import run_notebook
    from rnnrepro.custom_cells import ENVIRONMENT_VARIABLE

    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    seen = []

    @contextlib.contextmanager
    def kernel():
        seen.append(json.loads(os.environ[ENVIRONMENT_VARIABLE])["cells"] if ENVIRONMENT_VARIABLE in os.environ
                    else None)
        raise RuntimeError("stopped where the kernel would start")
        yield

    monkeypatch.setattr(run_notebook, "shared_kernel", kernel)
    code = records.main(["render", "--budget", "cpu",
                         "--configfile", "examples/mgu.yaml"])
    assert code == 1 and seen and seen[0] is not None and "mgu" in seen[0]
