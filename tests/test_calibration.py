"""Calibration against Zaremba et al. (2014)'s non-regularized small LSTM on PTB (artifact `calibration`
of the pru study): the recipe's translation into this trainer, the plain-SGD schedule's place in the
schema, a model trained as published at every real-data budget, the table and its claim."""

import copy

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from rnnrepro import grid
from rnnrepro.analysis import pru
from rnnrepro.analysis.claims import HELD, NOT_HELD, NOT_TESTED, declared_columns, evaluate_study
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_run_config, load_study, load_yaml, validate_cell_config
from rnnrepro.models.language_model import Dropouts, LanguageModel
from rnnrepro.train.language_model import make_optimizer, training_step

CLAIM = "zaremba_small_lstm_calibration"


@pytest.fixture(scope="module")
def study():
    return load_study("pru")


def run_config(budget: str) -> dict:
    return load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": budget})


def resolved(study: dict, budget: str, model: str = "zaremba_small") -> dict:
    config = run_config(budget)
    dataset = "ptb"
    return grid.resolve_cell(study, config, grid.Cell("pru", grid.data_key(study, config, dataset), model, 100,
                                                      1111, budget))


def test_the_summed_loss_step_of_the_authors_code_is_our_recipe_step():
    """Their step: the batch-mean cross entropy summed over the unrolled steps, its gradient's global
    norm clipped at 5, lr 1. Ours: the mean over the steps, clipped at 0.25, lr 20. The same update,
    whether the clip acts (a decoder scaled up: a steep loss) or not."""
    dropouts = Dropouts("elementwise", 0.0, 0.0, 0.0, 0.0, 0.0)
    torch.manual_seed(0)
    tokens = torch.randint(0, 50, (21, 4))
    x, y = tokens[:-1], tokens[1:]
    for decoder_scale in (30.0, 1.0):
        torch.manual_seed(1)
        theirs = LanguageModel(50, "lstm", 8, 8, 2, False, {}, dropouts, init="uniform_all")
        ours = copy.deepcopy(theirs)
        with torch.no_grad():
            for model in (theirs, ours):
                model.decoder.weight.mul_(decoder_scale)
        out = theirs(x, theirs.init_state(4))
        per_step = F.cross_entropy(out.logits.reshape(-1, 50), y.reshape(-1), reduction="none").view(20, 4)
        per_step.mean(dim=1).sum().backward()
        norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 5.0)
        with torch.no_grad():
            for p in theirs.parameters():
                p -= 1.0 * p.grad
        recipe = {"optimizer": "sgd", "lr": 20.0, "lr_decay": 0.5, "lr_decay_start": 6, "weight_decay": 0.0,
                  "bptt": 20, "clip": 0.25, "ar_alpha": 0.0, "tar_beta": 0.0}
        training_step(ours, make_optimizer(ours, recipe), recipe, x, y, ours.init_state(4))
        assert (norm > 5.0) == (decoder_scale > 1.0)  # the clip acts in the first case only
        for (name, a), b in zip(theirs.named_parameters(), ours.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


def test_the_step_schedule_belongs_to_plain_sgd(study):
    """sgd needs lr_decay and lr_decay_start; every other optimizer refuses them."""
    cfg = resolved(study, "paper")
    validate_cell_config(cfg, "zaremba")
    without = copy.deepcopy(cfg)
    del without["recipe"]["lr_decay"]
    with pytest.raises(ConfigError, match="'lr_decay' is a required property"):
        validate_cell_config(without, "zaremba")
    standard = resolved(study, "paper", "lstm_m1000")
    standard["recipe"]["lr_decay_start"] = 6
    with pytest.raises(ConfigError, match="key 'optimizer': 'sgd' was expected"):
        validate_cell_config(standard, "lstm_m1000")


def test_a_published_model_keeps_its_size_and_recipe_on_real_data(study):
    """A budget that scales every model's widths and recipe (as a CPU budget would) leaves the
    calibration model as published on PTB, while the smoke budget still makes it tiny on its
    synthetic stand-in."""
    scaling = copy.deepcopy(study)
    scaling["budgets"]["reduced"].update(width_scale=0.25, recipe={"epochs": 3, "lr": 1.0},
                                         recipes={"zaremba": {"bptt": 35}})
    published = resolved(study, "paper")
    for budget_study, budget in ((study, "reduced"), (scaling, "reduced")):
        cfg = resolved(budget_study, budget)
        assert cfg["architecture"] == published["architecture"]
        assert cfg["recipe"] == published["recipe"]
    assert published["architecture"]["hidden_size"] == published["architecture"]["embedding_size"] == 200
    assert published["recipe"]["epochs"] == 13
    assert resolved(scaling, "reduced", "lstm_m1000")["architecture"]["hidden_size"] == 250  # the budget acts
    smoke = resolved(study, "smoke")
    assert smoke["corpus"] == "synth_ptb" and smoke["architecture"]["hidden_size"] == 16
    assert smoke["recipe"]["epochs"] == 2


def hand_written_runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two seeds' metrics and per-epoch histories, hand-written (no run produced them)."""
    cells = pd.DataFrame([
        {"dataset": "ptb", "corpus": "ptb", "model": "zaremba_small", "budget": "cpu", "params": 4653200,
         "seed": seed, "val_ppl": val, "test_ppl": test, "epochs": 13, "best_epoch": 7, "train_seconds": seconds}
        for seed, val, test, seconds in ((1111, 121.0, 115.5, 3000.0), (1112, 123.0, 117.5, 3600.0))])
    histories = pd.DataFrame([
        {"dataset": "ptb", "model": "zaremba_small", "seed": seed, "epoch": epoch, "val_ppl": val}
        for seed, last in ((1111, 122.0), (1112, 124.0))
        for epoch, val in ((1, 180.0), (13, last), (2, 150.0))])
    return cells, histories


def test_calibration_table(study):
    cells, histories = hand_written_runs()
    table = pru.calibration_table(cells, histories, study)
    _, declared = declared_columns(study)["pru_calibration"]
    assert set(table.columns) == set(declared)
    row = table.iloc[0]
    assert row["test_ppl"] == 116.5 and row["test_ppl_samples"] == "115.5;117.5" and row["seeds"] == 2
    assert row["last_epoch_val_ppl"] == 123.0  # the last epoch's, not the last row's
    assert row["train_minutes"] == 55.0 and row["epochs"] == 13
    assert row["scored_epoch"] == 7  # a run from before `score` existed scored its best epoch
    # a recipe with `score: final` scores its last epoch, and says so
    table = pru.calibration_table(cells.assign(scored_epoch=13), histories, study)
    assert table.iloc[0]["scored_epoch"] == 13
    assert (row["paper_val_ppl"], row["paper_test_ppl"]) == (120.7, 114.5)


@pytest.mark.parametrize("budget, test_ppl, verdict", [
    ("cpu", [115.5, 117.5], HELD), ("paper", [118.0], NOT_HELD), ("smoke", [114.5], NOT_TESTED)])
def test_the_calibration_claim(study, budget, test_ppl, verdict):
    cells, histories = hand_written_runs()
    cells = cells.head(len(test_ppl)).assign(test_ppl=test_ppl, budget=budget)
    table = pru.calibration_table(cells, histories, study)
    claim = next(c for c in study["claims"] if c["id"] == CLAIM)
    config = run_config(budget)
    if budget == "cpu" and "cpu" not in study["budgets"]:  # the scorecard needs the budget to exist
        study = {**study, "budgets": {**study["budgets"], "cpu": {"cpu_hours": 2}}}
    [row] = evaluate_study({**study, "claims": [claim]}, config, {"pru_calibration": table})
    assert row["verdict"] == verdict, row["reason"]
    assert row["paper"] == "zaremba_small 114.5"
    if verdict != NOT_TESTED:
        assert row["paper_check"] == "n/a (compares ours with the paper's number)"
        assert row["scale"] == "paper size"
