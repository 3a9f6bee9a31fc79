"""The PRU study's grid beyond the cells: the dropout Table 1's standard rows and their variants train
with; the ablations and figures (Tables 3 and 4, Figures 1, 4 and 5): every model's parameter count at
the paper's widths, the analysis functions and each notebook on hand-made run folders, and a dry run
of the paper budget listing every ablation cell."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import copy_project, snakemake

from rnnrepro import grid, tuning
from rnnrepro.analysis import pru, results
from rnnrepro.analysis.run_notebook import run as run_notebook
from rnnrepro.analysis.claims import HELD, evaluate_study
from rnnrepro.cells.counting import pru_params
from rnnrepro.configuration import REPO_ROOT, load_run_config, load_study, load_yaml
from rnnrepro.train.language_model import build_model

PTB_VOCAB = 10_000
WT2_VOCAB = 33_278
ARTIFACTS = ("table3", "table4", "fig5", "counts", "fig1", "fig4")
ABLATIONS = ("table3", "table4", "fig5")
LSTM_RU = 2_884_800  # one layer 600 -> 600: 4M(N + M) + 8M
# Recurrent-unit parameters of the released cell's formula, one layer 600 -> 600, by Table 3 row.
TABLE3_RU = {"R1": 2_884_800, "R2": 724_800, "R3": 1_410_000, "R4": 2_490_000, "R5": 2_095_200, "R6": 2_490_000}
# The same rows with every pyramid level also split into g = 4 groups (pyramid_groups 4, near-equal
# contiguous groups): level i costs sum_j n_ij 4 d_ij + 4 d_i with n = 600, 300, 150, 75 and
# d = 337, 150, 75, 38 cut into 4, e.g. level 3: 4 (19*10 + 19*10 + 19*9 + 18*9) + 152 = 3,004.
TABLE3_RU_GROUPED = {"R1": 2_884_800, "R2": 724_800, "R3": 626_104, "R4": 1_706_104, "R5": 527_408,
                     "R6": 1_706_104}
TABLE3_MODELS = {"R1": "abl_r1_lt_lt", "R2": "abl_r2_glt_glt", "R3": "abl_pru_g4_k4_m600", "R4": "abl_r4_lt_pt",
                 "R5": "abl_r5_pt_pt", "R6": "abl_r6_lt_pt_nores"}
# The paper's Table 3 (PTB / WT-2 totals, RU; millions) and text ("R3 ... about 75 % fewer than R4")
PAPER_TABLE3 = {"R1": (8.8, 22.8, 2.9), "R2": (6.5, 20.46, 0.5), "R3": (6.6, 20.6, 0.64), "R4": (8.5, 22.5, 2.5),
                "R5": (8.1, 22.1, 2.1), "R6": (8.5, 22.5, 2.5)}
EMBEDDING_AND_BIAS = {"ptb": 600 * PTB_VOCAB + PTB_VOCAB, "wt2": 600 * WT2_VOCAB + WT2_VOCAB}
TABLE4_RU = {"abl_skip_g1_k4": 2_490_000, "abl_maxpool_g1_k4": 2_490_000, "abl_pru_g1_k4_m600": 2_490_000,
             "abl_conv_g1_k4": 2_490_000 + 3 * 3}  # three learned kernels of 3
FIG5_RU = {  # (g, K) -> RU parameters; K = 1..4 by g = 1, 2, 4
    (1, 1): 2_884_800, (1, 2): 2_704_800, (1, 3): 2_569_800, (1, 4): 2_490_000,
    (2, 1): 2_164_800, (2, 2): 1_984_800, (2, 3): 1_849_800, (2, 4): 1_770_000,
    (4, 1): 1_804_800, (4, 2): 1_624_800, (4, 3): 1_489_800, (4, 4): 1_410_000,
}
FIG5_RU_GROUPED = {  # pyramid_groups = g (g = 1: the released cell)
    **{(1, k): FIG5_RU[(1, k)] for k in (1, 2, 3, 4)},
    (2, 1): 1_444_800, (2, 2): 1_354_800, (2, 3): 1_287_300, (2, 4): 1_247_400,
    (4, 1): 724_800, (4, 2): 679_800, (4, 3): 646_052, (4, 4): 626_104,
}


@pytest.fixture(scope="module")
def study():
    return load_study("pru")


def run_config(budget: str) -> dict:
    """The project's run config (config/config.yaml) at this budget."""
    return {**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": budget, "device": "cpu"}


def counts(study: dict, model_id: str, budget: str = "paper", corpus: str = "ptb", vocab: int = PTB_VOCAB):
    """(total, recurrent) parameters of the model the training CLI would build for this cell."""
    config, cell = run_config(budget), grid.Cell("pru", corpus, model_id, 100, 1111, budget)
    try:
        cfg = grid.resolve_cell(study, config, cell)
    except tuning.TuningPending:
        # a tuned cell's learning rate waits on its tuning runs; its tuning variant at the recipe's own
        # rate is the same network
        cfg = grid.resolve_cell(study, config, dataclasses.replace(cell, model=tuning.variant_id(model_id, 1), seed=1000))
    with torch.device("meta"):
        model = build_model(cfg, vocab)
    return sum(p.numel() for p in model.parameters()), model.recurrent_parameter_count()


# --- Table 1's standard dropout -------------------------------------------------------------------

STANDARD_ROWS = ("lstm_m1000", "lstm_m1200", "lstm_m1400", "pru_g1_k2_m1000", "pru_g2_k2_m1200", "pru_g4_k2_m1400")


def resolved_dropouts(study: dict, model_id: str, corpus: str, budget: str = "paper") -> set[float]:
    recipe = grid.resolve_cell(study, run_config(budget), grid.Cell("pru", corpus, model_id, 100, 1111, budget))["recipe"]
    return {recipe["dropout_input"], recipe["dropout_hidden"], recipe["dropout_output"]}


@pytest.mark.parametrize("corpus", ["ptb", "wt2"])
def test_table1_standard_rows_train_at_the_code_default_and_the_variant_at_the_papers_rate(study, corpus):
    # Table 1's standard-dropout rows: the authors' code default 0.4; the dropout artifact's *_do05
    # twins: the paper's stated 0.5, otherwise the same cell and recipe.
    assert set(STANDARD_ROWS) < set(study["artifacts"]["table1"]["models"])
    for model_id in STANDARD_ROWS:
        assert study["models"][model_id]["recipe"] == "standard"
        assert resolved_dropouts(study, model_id, corpus) == {0.4}
        variant = f"{model_id}_do05"
        assert resolved_dropouts(study, variant, corpus) == {0.5}
        assert {k: v for k, v in study["models"][variant].items() if k != "recipe"} == \
            {k: v for k, v in study["models"][model_id].items() if k != "recipe"}
        base = grid.resolve_cell(study, run_config("paper"), grid.Cell("pru", corpus, model_id, 100, 1, "paper"))["recipe"]
        other = grid.resolve_cell(study, run_config("paper"), grid.Cell("pru", corpus, variant, 100, 1, "paper"))["recipe"]
        assert {k for k in base if base[k] != other[k]} == {"dropout_input", "dropout_hidden", "dropout_output"}
    assert study["artifacts"]["dropout"]["models"] == [m for row in STANDARD_ROWS for m in (row, f"{row}_do05")]
    # the smoke and reduced budgets keep the cheapest pair, headline row first
    for budget in ("smoke", "reduced"):
        assert study["budgets"][budget]["artifacts"]["dropout"]["models"] == ["lstm_m1000", "lstm_m1000_do05"]
    assert resolved_dropouts(study, "lstm_m1000", "synth_ptb", "smoke") == {0.4}


def test_dropout_table_pairs_each_variant_with_its_table1_row(study):
    cells = pd.DataFrame([
        {"dataset": "ptb", "corpus": "ptb", "model": model, "recipe": study["models"][model]["recipe"], "cell": "lstm",
         "budget": "paper", "seed": 1111, "val_ppl": ppl + 2, "test_ppl": ppl}
        for model, ppl in (("lstm_m1000", 66.0), ("lstm_m1000_do05", 70.0))])
    table = results.pru_dropout_table(cells, study)
    assert table[["model", "paper_model", "dropout"]].values.tolist() == [
        ["lstm_m1000", "lstm_m1000", 0.4], ["lstm_m1000_do05", "lstm_m1000", 0.5]]
    assert table["paper_test_ppl"].tolist() == [66.29, 66.29]


# --- the ablation grid and its parameter counts ---------------------------------------------------

def test_ablation_models_are_one_layer_600_wide_tied_standard_dropout(study):
    models = {m for a in ABLATIONS for m in study["artifacts"][a]["models"]}
    assert len(models) == 21 + 8  # the released grid and the grouped pyramid's g = 2, 4 points
    for model_id in models:
        arch = grid.architecture(study, run_config("paper"), model_id, "ptb")
        assert (arch["embedding_size"], arch["hidden_size"], arch["layers"], arch["tie_weights"]) == (600, 600, 1, True)
        assert study["models"][model_id]["recipe"] == "standard"
        options = study["models"][model_id]["cell_options"]
        # *_grouped_pt: the same cell as its released twin, pyramid levels split into its g groups
        if model_id.endswith("_grouped_pt"):
            twin = study["models"][model_id.removesuffix("_grouped_pt")]["cell_options"]
            assert options == {**twin, "pyramid_groups": twin["groups"]} and twin["groups"] > 1
        else:
            assert "pyramid_groups" not in options and "pooling_kernels" not in options  # the released code's


def row_counts(study: dict, row: str, pyramid_groups: int, corpus: str = "ptb") -> tuple[int, int]:
    """(total, RU) of a Table 3 row's model as built, with its pyramid levels split into pyramid_groups."""
    model_id = TABLE3_MODELS[row]
    options = study["models"][model_id]["cell_options"]
    if "pt" in (options.get("input_transform", "pt"), options.get("context_transform")):
        study = {**study, "models": {**study["models"], model_id: {
            **study["models"][model_id], "cell_options": {**options, "pyramid_groups": pyramid_groups}}}}
    vocab = {"ptb": PTB_VOCAB, "wt2": WT2_VOCAB}[corpus]
    return counts(study, model_id, corpus=corpus, vocab=vocab)


@pytest.mark.parametrize("row", list(TABLE3_MODELS))
def test_table3_row_counts_under_both_pyramids(study, row):
    """Exact counts of every Table 3 row with the released pyramid and with the grouped one (g = 4), from
    the built model and from the counting formulas, and whether the paper's printed numbers fit each."""
    options = {k: v for k, v in study["models"][TABLE3_MODELS[row]]["cell_options"].items()
               if k in ("levels", "groups", "input_transform", "context_transform")}
    paper_ptb, paper_wt2, paper_ru = PAPER_TABLE3[row]
    fits = {}
    for pyramid_groups, expected in ((1, TABLE3_RU), (4, TABLE3_RU_GROUPED)):
        total, ru = row_counts(study, row, pyramid_groups)
        assert ru == expected[row] == pru_params(600, 600, **options, pyramid_groups=pyramid_groups)
        assert total == EMBEDDING_AND_BIAS["ptb"] + ru
        assert row_counts(study, row, pyramid_groups, corpus="wt2")[0] == EMBEDDING_AND_BIAS["wt2"] + ru
        # fits: both printed totals within their last digit (0.1 M: the paper rounds some and truncates
        # R1's) and the RU within 0.05 M
        wt2_total = EMBEDDING_AND_BIAS["wt2"] + ru
        fits[pyramid_groups] = (abs(total / 1e6 - paper_ptb) < 0.1 and abs(wt2_total / 1e6 - paper_wt2) < 0.1
                                and abs(ru / 1e6 - paper_ru) < 0.05)
    expected_fit = {"R1": {1: True, 4: True}, "R2": {1: False, 4: False}, "R3": {1: False, 4: True},
                    "R4": {1: True, 4: False}, "R5": {1: True, 4: False}, "R6": {1: True, 4: False}}
    assert fits == expected_fit[row]
    assert pru.paper_table3_counts_fit(row, 4, 4) == (fits[4] and row != "R1")
    assert pru.paper_table3_counts_fit(row, 1, 4) == fits[1]


def test_table3_counts_in_detail(study):
    # WT-2: 33,278 x 600 + 33,278 = 20,000,078 for embedding and decoder bias, + 2,884,800
    assert row_counts(study, "R1", 1, corpus="wt2")[0] == 22_884_878
    # R3 against R4 (the text: "about 75 % fewer"): the grouped pyramid 74.9 %, the released 43.4 %
    assert round(100 * (1 - TABLE3_RU_GROUPED["R3"] / TABLE3_RU["R4"]), 1) == 74.9
    assert round(100 * (1 - TABLE3_RU["R3"] / TABLE3_RU["R4"]), 1) == 43.4
    # R4 against R1 (the text: "about 14 % fewer"): released 13.7 %
    assert round(100 * (1 - TABLE3_RU["R4"] / TABLE3_RU["R1"]), 1) == 13.7
    # R2 (0.5 M; WT-2 total 20.46 M, i.e. 0.46 M of RU) needs about 6 groups on both sides
    assert pru_params(600, 600, 4, 6, input_transform="glt", context_transform="glt") == 484_800


def test_the_tables_pru_defaults_are_the_layers_own_and_need_no_torch():
    """The options a table fills in are PRULayer's signature defaults, read without importing torch."""
    import inspect
    import subprocess
    import sys

    from rnnrepro.cells.pru import PRULayer

    signature = {name: p.default for name, p in inspect.signature(PRULayer).parameters.items()
                 if p.default is not inspect.Parameter.empty}
    assert pru.pru_defaults() == signature and len(signature) == 6
    pru.pru_defaults()["subsample"] = "max"  # a caller's change stays its own
    assert pru.pru_defaults()["subsample"] == "avg"
    fresh = subprocess.run([sys.executable, "-c", "import sys; from rnnrepro.analysis.pru import pru_defaults; "
                            "pru_defaults(); print('torch' in sys.modules)"], capture_output=True, text=True)
    assert fresh.stdout.strip() == "False", fresh.stderr


def test_table3_labels_follow_the_cell_options(study):
    cells = pd.DataFrame([{"cell": "pru", "hidden_size": 600, "params": 1, "params_recurrent": 1,
                           **{f"opt_{k}": v for k, v in study["models"][m]["cell_options"].items()}, "model": m}
                          for m in study["artifacts"]["table3"]["models"]])
    cells = pru.with_cell_options(cells)
    labels = [pru.TABLE3_ROWS[(c.opt_context_transform, c.opt_input_transform, bool(c.opt_residual))]
              for c in cells.itertuples()]
    assert labels == ["R1", "R2", "R3", "R3", "R4", "R5", "R6"]
    assert cells["opt_pyramid_groups"].tolist() == [1, 1, 1, 4, 1, 1, 1]


def test_table4_and_figure5_counts(study):
    for model_id, ru in TABLE4_RU.items():
        assert counts(study, model_id)[1] == ru, model_id
    assert [study["models"][m]["cell_options"].get("subsample", "avg")
            for m in study["artifacts"]["table4"]["models"]] == ["skip", "max", "avg", "conv"]
    seen, seen_grouped = {}, {}
    for model_id in study["artifacts"]["fig5"]["models"]:
        options = study["models"][model_id]["cell_options"]
        key = (options["groups"], options["levels"]) if options else "lstm"
        (seen_grouped if "pyramid_groups" in options else seen)[key] = counts(study, model_id)[1]
    assert seen == {**FIG5_RU, "lstm": LSTM_RU}
    assert seen_grouped == {key: ru for key, ru in FIG5_RU_GROUPED.items() if key[0] > 1}
    for (g, levels), ru in FIG5_RU_GROUPED.items():
        assert pru_params(600, 600, levels, g, pyramid_groups=g) == ru
    # the text's "K = 2, g = 4 learns 77 % fewer": released 43.7 %, grouped pyramid 76.4 %
    assert round(100 * (1 - seen[(4, 2)] / LSTM_RU), 1) == 43.7
    assert round(100 * (1 - FIG5_RU_GROUPED[(4, 2)] / LSTM_RU), 1) == 76.4
    # every grouped point's saving, and K = 1 grouped by 4 is R2 (a GLT input)
    assert [round(100 * (1 - FIG5_RU_GROUPED[(g, k)] / LSTM_RU), 1) for g in (2, 4) for k in (1, 2, 3, 4)] == \
        [49.9, 53.0, 55.4, 56.8, 74.9, 76.4, 77.6, 78.3]
    assert FIG5_RU_GROUPED[(4, 1)] == TABLE3_RU["R2"]
    # released: more levels save the same 394,800 (13.7 % of the LSTM's) at every g: "up to 15 %"
    assert {seen[(g, 1)] - seen[(g, 4)] for g in (1, 2, 4)} == {394_800}


def test_counts_table_and_the_claims_that_read_it(study):
    table = pru.ablation_counts(study, run_config("reduced"), "counts")
    assert set(table["pyramid"]) == {"released", "grouped"} and len(table) == 2 * 2 * 18
    ptb = table[table["dataset"] == "ptb"].set_index(["model", "pyramid"])
    for row, model_id in TABLE3_MODELS.items():
        assert ptb.loc[(model_id, "released"), "params_recurrent"] == TABLE3_RU[row]
        assert ptb.loc[(model_id, "grouped"), "params_recurrent"] == TABLE3_RU_GROUPED[row]
        assert ptb.loc[(model_id, "released"), "table3_row"] == row
    for model_id in study["artifacts"]["counts"]["models"][7:]:
        options = study["models"][model_id]["cell_options"]
        key = (options["groups"], options["levels"])
        assert ptb.loc[(model_id, "released"), "params_recurrent"] == FIG5_RU[key]
        assert ptb.loc[(model_id, "grouped"), "params_recurrent"] == FIG5_RU_GROUPED[key]
    assert ptb.loc[("abl_pru_g4_k4_m600", "grouped"), "ru_saving_vs_r4_pct"] == pytest.approx(74.855, abs=1e-3)
    assert ptb.loc[("abl_pru_g4_k2_m600", "released"), "paper_ru_saving_pct"] == 77
    wt2 = table[table["dataset"] == "wt2"].set_index(["model", "pyramid"])
    assert wt2.loc[("abl_pru_g4_k4_m600", "grouped"), "params"] == 20_626_182
    # the scorecard on this table: held at every real-data budget (no training), grouped for R3 and
    # Figure 5, released for the rows without a grouped context
    ids = [c["id"] for c in study["claims"] if c["table"] == "pru_counts" and c["id"].startswith("paper_counts")]
    assert len(ids) == 5
    # with them, Figure 5's "more levels, fewer recurrent parameters" at every g, on the same exact counts:
    # no training, so decided at every budget, smoke included
    ids.append("more_levels_fewer_ru_params")
    for budget in ("smoke", "cpu", "reduced", "paper"):
        config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": budget})
        rows = evaluate_study({**study, "claims": [c for c in study["claims"] if c["id"] in ids]}, config,
                              {"pru_counts": table})
        assert len(rows) == 1 + 2 + 1 + 1 + 3 + 3
        assert {r["verdict"] for r in rows} == {HELD}, [(r["claim"], r["reason"]) for r in rows]


def test_smoke_cells_are_tiny_and_one_per_code_path(study):
    smoke = study["budgets"]["smoke"]["artifacts"]
    cells = {(d, m) for a in ABLATIONS for d in smoke[a]["datasets"] for m in smoke[a]["models"]}
    assert len(cells) == 5
    for _, model_id in cells:
        total, _ = counts(study, model_id, budget="smoke", corpus="synth_ptb", vocab=2_000)
        assert total < 200_000, model_id
    # Figures 1 and 4 train nothing of their own under smoke: their cells are Table 1's
    table1 = grid.artifact_cells(study, run_config("smoke"), "table1")
    for artifact in ("fig1", "fig4"):
        assert set(grid.artifact_cells(study, run_config("smoke"), artifact)) <= set(table1)


# --- analysis functions and notebooks on hand-made run folders -------------------------------------

ENGLISH = ["the company said its profits rose in the third quarter",
           "he quickly sold the new shares and bought bonds",
           "she said the market was very weak N years ago"]


def make_runs(root, study: dict, artifact: str, cells: list | None = None) -> list[str]:
    """Run folders for every smoke cell of an artifact (or the ``cells`` given): real configs and models,
    made-up perplexities; the learning-rate tuning cells of a tuned cell first (rnnrepro.tuning), so that
    its config resolves."""
    config = run_config("smoke")
    if cells is None:
        cells = grid.artifact_cells(study, config, artifact)
        for cell in cells:
            variants = [v for v in grid.tuning_cells_of(study, config, cell) if not (root / v.run_dir).exists()]
            if variants:
                make_runs(root, study, "tuning", variants)
    corpus_dir = root / "data/processed/synth_ptb"
    corpus_dir.mkdir(parents=True, exist_ok=True)
    words = sorted({w for line in ENGLISH for w in line.split()}) + ["<unk>", "<eos>"]
    (corpus_dir / "vocab.txt").write_text("".join(json.dumps(w) + "\n" for w in words))
    (corpus_dir / "train.txt").write_text("\n".join(ENGLISH * 3) + "\n")
    files = []
    for i, cell in enumerate(cells):
        cfg = grid.resolve_cell(study, config, cell)
        run_dir = root / cell.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(i)
        model = build_model(cfg, len(words))
        val_ppl = 100.0 + 7 * i
        history = pd.DataFrame({"epoch": [1, 2, 3], "train_loss": [5.0, 4.5, 4.0], "val_loss": [5.2, 4.8, 4.9]})
        history["train_ppl"], history["val_ppl"] = np.exp(history["train_loss"]), np.exp(history["val_loss"])
        history.to_csv(run_dir / "history.csv", index=False)
        (run_dir / "config.json").write_text(json.dumps(cfg))
        torch.save({"config": cfg, "state_dict": model.state_dict()}, run_dir / "model.pt")
        metrics = {"study": "pru", "dataset": cfg["dataset"], "corpus": cfg["corpus"], "model": cell.model,
                   "fraction": 100, "seed": 1111, "budget": "smoke", "params": sum(p.numel() for p in model.parameters()),
                   "params_recurrent": model.recurrent_parameter_count(), "epochs": 3, "best_epoch": 2,
                   "val_loss": float(np.log(val_ppl)), "val_ppl": val_ppl, "test_loss": float(np.log(val_ppl - 3)),
                   "test_ppl": val_ppl - 3, "wall_seconds": 1.0}
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
        files.append(str(run_dir / "metrics.json"))
    return files


@pytest.fixture
def runs(tmp_path, monkeypatch, study):
    monkeypatch.chdir(tmp_path)
    return lambda artifact: make_runs(tmp_path, study, artifact)


def execute(tmp_path, artifact: str, metrics: list[str]) -> tuple[pd.DataFrame, str]:
    table, figure = tmp_path / f"{artifact}.csv", tmp_path / f"{artifact}.png"
    run_notebook(REPO_ROOT / f"notebooks/pru_{artifact}.py", tmp_path / f"{artifact}.ipynb",
                 {"study": "pru", "artifact": artifact, "metrics_files": metrics, "tables": [str(table)],
                  "figures": [str(figure)]})
    assert figure.stat().st_size > 10_000
    return pd.read_csv(table), (tmp_path / f"{artifact}.ipynb").read_text()


@pytest.mark.slow
def test_table3_notebook(runs, tmp_path, study):
    table, _ = execute(tmp_path, "table3", runs("table3"))
    assert table["row"].tolist() == ["R1", "R3"]
    assert table["pyramid_groups"].tolist() == [1, 1]
    assert table["paper_params_fit"].tolist() == [True, False]
    assert table["paper_val_ppl"].tolist() == [74.80, 82.67]
    assert table["val_ppl"].tolist() == [100.0, 107.0]  # the runs' own numbers, untouched
    assert (table["corpus"] == "synth_ptb").all() and table["residual"].tolist() == [False, True]


@pytest.mark.slow
def test_table4_and_fig5_notebooks(runs, tmp_path):
    table4, _ = execute(tmp_path, "table4", runs("table4"))
    assert table4["method"].tolist() == ["Avg pool", "Convolution"]
    assert table4["paper_val_ppl"].tolist() == [73.86, 81.56]
    fig5, _ = execute(tmp_path, "fig5", runs("fig5"))
    assert fig5["model"].tolist() == ["abl_lstm_m600", "abl_pru_g1_k4_m600", "abl_pru_g4_k4_m600"]
    assert fig5["ru_saving_pct"].iloc[0] == pytest.approx(0)
    assert (fig5["ru_saving_pct"].iloc[1:] > 0).all()
    # published to four significant digits (rnnrepro.analysis.notebook.rounded)
    assert fig5["ru_saving_pct"].iloc[2] == pytest.approx(
        100 * (1 - fig5["params_recurrent"].iloc[2] / fig5["lstm_ru_params"].iloc[2]), rel=5e-4)


@pytest.mark.slow
def test_fig1_notebook(runs, tmp_path):
    table, _ = execute(tmp_path, "fig1", runs("fig1"))
    assert table["model"].tolist() == ["lstm_m1000", "pru_g4_k2_m1400"]
    assert (table["best_epoch"] == 2).all() and (table["epochs"] == 3).all()
    assert table["gap_at_best"].tolist() == pytest.approx([np.exp(4.8) - np.exp(4.5)] * 2, rel=5e-4)  # 4 digits


def test_word_categories_majority_tag_and_fixed_tokens():
    tags = {"runs": ["VBZ", "NNS", "VBZ"], "the": ["DT"] * 3}
    seen = {w: iter(t) for w, t in tags.items()}
    categories = pru.word_categories(["the runs", "the runs <eos>", "the runs N"],
                                     tagger=lambda tokens: [next(seen[t]) if t in seen else "NN" for t in tokens])
    assert categories == {"the": "DET", "runs": "VERB", "N": "NUM"}
    # a line the tagger splits differently is skipped, never guessed
    assert pru.word_categories(["a b"], tagger=lambda tokens: ["DT"]) == {}


def test_embedding_variance_by_hand():
    vectors = torch.tensor([[1.0, -1.0], [2.0, 0.0], [3.0, 3.0]])
    table = pru.embedding_variance(vectors, ["a", "b", "c"], {"a": "NOUN", "b": "NOUN", "c": "VERB"})
    assert table.set_index("category")["variance"].to_dict() == {"NOUN": 1.0, "VERB": 0.0}
    assert table.set_index("category")["words"].to_dict() == {"NOUN": 2, "VERB": 1}


@pytest.mark.slow
def test_fig4_notebook_tags_real_english(runs, tmp_path):
    table, _ = execute(tmp_path, "fig4", runs("fig4"))
    assert set(table["series"]) == {"LSTM", "PRU level 1", "PRU level 2"}
    assert {"NOUN", "VERB", "DET", "ADJ"} <= set(table["category"])
    levels = table.drop_duplicates("series").set_index("series")["dimensions"]
    assert levels["PRU level 2"] == (levels["PRU level 1"] + 1) // 2


# --- the paper budget's dry run -------------------------------------------------------------------

def test_dry_run_of_the_paper_budget_lists_every_new_cell(tmp_path, study):
    project = copy_project(tmp_path)
    targets = [f"results/tables/pru_{a}.csv" for a in ARTIFACTS]
    result = snakemake(project, "-n", "--config", "budget=paper", "studies=[pru]", "--", *targets)
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    planned = set(re.findall(r"results/runs/pru/(\w+)/(\w+)/frac100/seed1111/metrics\.json", out))
    expected = {(c.corpus, c.model) for a in ARTIFACTS for c in grid.artifact_cells(study, run_config("paper"), a)}
    assert planned == expected and len(planned) == 29 * 2 + 6
    assert re.search(r"train_cell\s+64\b", out)
    for artifact in ARTIFACTS:
        assert re.search(rf"notebook_pru_{artifact}\s+1\b", out), artifact
