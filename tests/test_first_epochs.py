"""The first epochs of the authors' own configurations at their size (budget paper_start): the AWD-LSTM
(pru study) and the mixture of softmaxes (lrn study) built and trained as their commands give them,
their published parameter counts, the budgets that train them, and the first-epoch claims."""

import pandas as pd
import pytest
import torch

from rnnrepro import grid
from rnnrepro.analysis import calibration
from rnnrepro.analysis.claims import HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTED, declared_columns, evaluate_study
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_run_config, load_study, load_yaml
from rnnrepro.train.language_model import build_model

BUDGET = "paper_start"
#: study -> (model, the recipe's full epochs, the parameters its authors' code counts on PTB)
PUBLISHED = {"pru": ("awd_lstm", 300, 24_221_600), "lrn": ("mos", 1000, 21_675_120)}
#: the epochs paper_start trains: as many as the authors' log printed (AWD-LSTM epoch 1; MoS 1 and 2)
LOGGED_EPOCHS = {"pru": 1, "lrn": 2}


def run_config(budget: str) -> dict:
    return load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": budget})


def resolved(study_name: str, budget: str) -> dict:
    study, model = load_study(study_name), PUBLISHED[study_name][0]
    return grid.resolve_cell(study, run_config(budget), grid.Cell(study_name, "ptb", model, 100, 1111, budget))


@pytest.mark.parametrize("study_name", sorted(PUBLISHED))
def test_the_published_models_have_the_published_parameter_counts(study_name):
    """The mixture of softmaxes: 21,675,120, as zihangdai/mos issue 12's log printed (three nn.LSTM
    layers with two biases per gate, 16 experts, tied decoder). The AWD-LSTM: 24,221,600 (its paper's
    "24M"; 20,211,600 in the LSTMs plus the 4,000,000-word embedding and the decoder's 10,000 biases)."""
    cfg = resolved(study_name, BUDGET)
    with torch.device("meta"):
        model = build_model(cfg, 10_000)
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[study_name][2]


@pytest.mark.parametrize("study_name", sorted(PUBLISHED))
def test_paper_start_trains_the_published_model_for_the_logged_epochs(study_name):
    """The short budget changes nothing but the epochs (those the authors' log printed): the paper
    budget's widths and recipe."""
    short, full = resolved(study_name, BUDGET), resolved(study_name, "paper")
    assert short["architecture"] == full["architecture"]
    assert short["recipe"] == {**full["recipe"], "epochs": LOGGED_EPOCHS[study_name]}
    assert full["recipe"]["epochs"] == PUBLISHED[study_name][1]
    assert grid.runs_dir(BUDGET) == "results/paper_start/runs"  # never the paper budget's run folders


def test_the_recipes_are_the_authors_commands():
    awd, mos = resolved("pru", BUDGET)["recipe"], resolved("lrn", BUDGET)["recipe"]
    # the AWD-LSTM's first release: --batch_size 20 --dropouti 0.4, main.py's dropouth 0.3 then
    assert (awd["batch_size"], awd["dropout_input"], awd["dropout_hidden"], awd["dropout_output"]) == (20, 0.4, 0.3, 0.4)
    assert (awd["dropout_embedding"], awd["weight_drop"], awd["lr"], awd["seq_len_cap"]) == (0.1, 0.5, 30.0, None)
    # mos issue 12: --dropouti 0.4 --dropouth 0.225 --batch_size 12 --lr 20.0; wdrop 0.5 acts in its code
    assert (mos["batch_size"], mos["dropout_input"], mos["dropout_hidden"], mos["lr"]) == (12, 0.4, 0.225, 20.0)
    assert (mos["weight_drop"], mos["seq_len_cap"], mos["dropout_output"]) == (0.5, 110, 0.4)
    head = resolved("lrn", BUDGET)["architecture"]["head"]
    assert head == {"type": "mixture_of_softmaxes", "experts": 16, "latent_dropout": 0.29}


@pytest.mark.parametrize("budget", ["cpu", "cpu_wide", "reduced", "smoke"])
def test_no_scaled_budget_trains_them_on_real_data(budget):
    """On real data only paper and paper_start train the two models: every other budget leaves them out
    (the lrn artifact by its `budgets`, the pru one by each budget's smaller grid); smoke trains the
    mixture tiny on its synthetic stand-in, so its notebook runs end to end."""
    for study_name, (model, _, _) in PUBLISHED.items():
        study, config = load_study(study_name), run_config(budget)
        if budget not in study["budgets"]:
            continue
        cells = [c for a in grid.artifacts(study, config) for c in grid.artifact_cells(study, config, a)
                 if c.model == model]
        if budget == "smoke" and study_name == "lrn":
            [cell] = cells
            cfg = grid.resolve_cell(study, config, cell)
            assert cfg["corpus"] == "synth_ptb" and cfg["architecture"]["hidden_size"] == 48
            continue
        assert cells == [], (study_name, budget)
    assert "calibration" not in grid.artifacts(load_study("lrn"), run_config("cpu"))
    assert grid.artifacts(load_study("lrn"), run_config(BUDGET)) == ["calibration"]
    assert grid.artifacts(load_study("pru"), run_config(BUDGET)) == ["calibration"]


def test_an_artifact_names_only_budgets_of_its_study(tmp_path):
    text = (REPO_ROOT / "config/studies/lrn.yaml").read_text()
    assert text.count("budgets: [paper, paper_start, smoke]") == 1
    (tmp_path / "config/studies").mkdir(parents=True)
    (tmp_path / "config/studies/lrn.yaml").write_text(text.replace("budgets: [paper, paper_start, smoke]",
                                                                    "budgets: [paper, paper_begin, smoke]"))
    with pytest.raises(ConfigError, match="artifacts.calibration.budgets: 'paper_begin' is not a budget"):
        load_study("lrn", root=tmp_path)


def hand_written_runs(model: str, first: list[float], second: list[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Metrics and two-epoch histories of one seed per value (hand-written: no run produced them)."""
    seeds = range(1111, 1111 + len(first))
    cells = pd.DataFrame([{"dataset": "ptb", "corpus": "ptb", "model": model, "budget": BUDGET, "params": 1,
                           "seed": seed, "val_ppl": b, "test_ppl": b - 5, "epochs": 2, "best_epoch": 2,
                           "train_seconds": 600.0} for seed, b in zip(seeds, second)])
    histories = pd.DataFrame([{"dataset": "ptb", "model": model, "seed": seed, "epoch": epoch, "val_ppl": value}
                              for seed, a, b in zip(seeds, first, second) for epoch, value in ((2, b), (1, a))])
    return cells, histories


def test_the_table_gives_every_seeds_first_epochs():
    study = load_study("lrn")
    table = calibration.calibration_table(*hand_written_runs("mos", [270.0, 280.0], [185.0, 190.0]), study)
    _, declared = declared_columns(study)["lrn_calibration"]
    assert set(table.columns) == set(declared)
    row = table.iloc[0]
    assert (row["val_ppl_epoch1"], row["val_ppl_epoch1_samples"]) == (275.0, "270.0;280.0")
    assert row["val_ppl_epoch2_samples"] == "185.0;190.0" and row["seeds"] == 2
    assert (row["paper_val_ppl_epoch1"], row["paper_val_ppl_epoch2"], row["paper_params"]) == (267.77, 183.90, 21675120)
    pru = load_study("pru")
    table = calibration.calibration_table(*hand_written_runs("awd_lstm", [300.0], [220.0]), pru)
    assert set(table.columns) == set(declared_columns(pru)["pru_calibration"][1])
    assert table.iloc[0]["paper_val_ppl_epoch1"] == 308.03 and pd.isna(table.iloc[0]["paper_val_ppl_epoch2"])


@pytest.mark.parametrize("study_name, claim, first, verdict", [
    ("pru", "awd_lstm_first_epoch_calibration", [300.0, 320.0], HELD),          # band 277.2-338.8
    ("pru", "awd_lstm_first_epoch_calibration", [270.0, 345.0], NOT_HELD),
    ("pru", "awd_lstm_first_epoch_calibration", [300.0, 345.0], INCONCLUSIVE),
    ("lrn", "mos_first_epoch_calibration", [250.0, 290.0], HELD),               # band 241.0-294.5
    ("lrn", "mos_first_epoch_calibration", [240.0, 296.0], NOT_HELD)])
def test_the_first_epoch_claims(study_name, claim, first, verdict):
    study = load_study(study_name)
    model = PUBLISHED[study_name][0]
    table = calibration.calibration_table(*hand_written_runs(model, first, [190.0] * len(first)), study)
    [row] = evaluate_study({**study, "claims": [c for c in study["claims"] if c["id"] == claim]},
                           run_config(BUDGET), {f"{study_name}_calibration": table})
    assert row["verdict"] == verdict, row["reason"]
    assert row["scale"] == "paper size"


@pytest.mark.parametrize("study_name", sorted(PUBLISHED))
def test_the_first_epoch_claims_read_not_tested_until_recorded(study_name):
    """No table yet (nothing recorded at paper_start), or a budget that does not train the model."""
    study = load_study(study_name)
    claims = [c for c in study["claims"] if c["id"].endswith("epoch_calibration")]
    for budget in (BUDGET, "cpu"):
        rows = evaluate_study({**study, "claims": claims}, run_config(budget), {}, unrendered={})
        assert {row["verdict"] for row in rows} == {NOT_TESTED}, budget


def test_the_figure_draws_the_authors_points_beside_ours(tmp_path):
    """Each seed's curve, our test perplexity at the scored epoch, and the log's points with their band."""
    import matplotlib

    matplotlib.use("Agg")
    cells, histories = hand_written_runs("mos", [270.0, 280.0], [185.0, 190.0])
    table = calibration.calibration_table(cells, histories, load_study("lrn"))
    fig = calibration.calibration_figure(table, histories, "title")
    [ax] = fig.axes
    labels = ax.get_legend_handles_labels()[1]
    assert sorted(labels) == ["authors' log after epoch 1: 267.77, 2: 183.9 (band ±10 %)",
                              "ours, seed 1111: validation", "ours, seed 1112: validation", "ours: test 182.5 (epoch 2)"]
    fig.savefig(tmp_path / "figure.png")


def test_a_one_epoch_run_keeps_the_panel_to_its_epoch_and_names_the_final_numbers(tmp_path):
    """The AWD-LSTM at paper_start: one epoch. The published final perplexities (61.2, 58.9), a fifth of
    the first epoch's, are named in the legend, not drawn, and the axis spans that epoch."""
    import matplotlib

    matplotlib.use("Agg")
    cells, histories = hand_written_runs("awd_lstm", [312.0], [0.0])
    histories = histories[histories["epoch"] == 1]
    cells = cells.assign(epochs=1, best_epoch=1, val_ppl=312.0, test_ppl=305.0)
    table = calibration.calibration_table(cells, histories, load_study("pru"))
    [ax] = calibration.calibration_figure(table, histories, "title").axes
    labels = ax.get_legend_handles_labels()[1]
    assert "published: final validation 61.2 (below this panel)" in labels
    assert ax.get_xlim() == (0.5, 1.5) and ax.get_ylim()[0] > 250


def test_a_claim_this_budget_cannot_test_says_so_while_the_table_waits_for_rows():
    """paper_start renders the pru calibration table in part (the AWD-LSTM, one seed of two): Zaremba's
    claims, testable at other budgets only, say that, not that their rows wait for records."""
    study = load_study("pru")
    table = calibration.calibration_table(*hand_written_runs("awd_lstm", [312.0], [220.0]), study)
    rows = {row["claim"]: row for row in evaluate_study(
        study, run_config(BUDGET), {"pru_calibration": table},
        unrendered={"pru_calibration": "rendered in part from records: seeds recorded so far: awd_lstm 1 of 2"})}
    assert rows["zaremba_small_lstm_calibration[dataset=ptb]"]["reason"].startswith(
        "not testable at this budget (paper_start)")
    assert rows["awd_lstm_first_epoch_calibration[dataset=ptb]"]["verdict"] == HELD
