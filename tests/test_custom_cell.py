"""Cells of your own (docs/custom_cells.md): an outside ``module:Class`` cell through the config,
sizing by counting parameters, the generated claims, and the example (examples/mgu.py) end to end
through a cut-down smoke grid of one word-level and one character-level study."""

from __future__ import annotations

import re
import shutil
import sys

import pandas as pd
import pytest
import torch
import yaml
from conftest import copy_project, snakemake

from rnnrepro import configuration, grid
from rnnrepro.analysis.claims import HELD, NOT_HELD, NOT_TESTED, evaluate_study, scorecard
from rnnrepro.cells import build_layer
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_run_config, load_yaml
from rnnrepro.grid import load_study
from rnnrepro.custom_cell_checks import check_custom_cells
from rnnrepro.custom_cells import ENVIRONMENT_VARIABLE, export, trial_layer_sizes, try_cell
from rnnrepro.models.language_model import Dropouts, LanguageModel
from rnnrepro.models.regularisation import run_with_weight_drop
from rnnrepro.sizing import RECURRENT_PARAMS, counted_layer_params, hidden_size_for_budget

MGU = "examples.mgu:MGULayer"
EXAMPLE = REPO_ROOT / "examples" / "mgu.yaml"


@pytest.fixture(autouse=True)
def in_repository(monkeypatch):
    """Outside modules are found from the working directory, the project root (as under Snakemake)."""
    monkeypatch.chdir(REPO_ROOT)


@pytest.fixture
def custom() -> dict:
    return load_yaml(EXAMPLE)["custom_cells"]


def studies(names=("pru", "lru")) -> dict:
    return {name: load_study(name, custom_cells={}) for name in names}


# --- the example cell honours the layer contract ---------------------------------------------------

def test_mgu_layer_contract():
    torch.manual_seed(0)
    layer = build_layer(MGU, 5, 7)
    assert sum(p.numel() for p in layer.parameters()) == layer.parameter_count(5, 7) == 2 * (5 * 7 + 7 * 7 + 7)
    x = torch.randn(6, 3, 5)
    whole, last = layer(x, layer.init_state(3))
    assert whole.shape == (6, 3, 7) and torch.equal(last, whole[-1])
    # the state carried across two windows gives the same outputs as one window
    first, state = layer(x[:4], layer.init_state(3))
    second, carried = layer(x[4:], state)
    torch.testing.assert_close(torch.cat([first, second]), whole)
    torch.testing.assert_close(carried, last)
    # by hand, the paper's equations at t = 1 (h_0 = 0)
    m = 7
    f = torch.sigmoid(x[0] @ layer.weight_ih[:m].T + layer.bias[:m])
    h_tilde = torch.tanh(x[0] @ layer.weight_ih[m:].T + layer.bias[m:])
    torch.testing.assert_close(whole[0], f * h_tilde)


def test_mgu_weight_drop_acts_on_its_recurrent_weights():
    torch.manual_seed(0)
    layer = build_layer(MGU, 4, 6)
    x, state = torch.randn(5, 2, 4), layer.init_state(2)
    plain, _ = layer(x, state)
    torch.manual_seed(1)
    dropped, _ = run_with_weight_drop(layer, x, state, 0.5, training=True)
    assert not torch.allclose(plain, dropped)
    dropped.sum().backward()
    assert layer.weight_hf.grad is not None and layer.weight_hh.grad is not None


# --- sizing to a parameter budget by counting ------------------------------------------------------

BUILT_IN_OPTIONS = {"gru_single_bias": {}, "rhn": {"recurrence_depth": 2, "transform_bias": 0.0},
                    "grid_lstm": {"depth": 2}}


@pytest.mark.parametrize("cell", sorted(RECURRENT_PARAMS))
def test_built_in_formulas_equal_the_meta_device_count(cell):
    options = BUILT_IN_OPTIONS.get(cell, {})
    same = cell in ("ps_lru", "rg_lru", "lru", "grid_lstm")  # input size = hidden size
    for n, m in [(11, 11), (24, 40), (400, 1150)]:
        n = m if same else n
        assert counted_layer_params(cell, n, m, options) == RECURRENT_PARAMS[cell](n, m, **options), (cell, n, m)


@pytest.mark.parametrize("budget, vocab, tied, embedding", [(24_000_000, 50, False, None),
                                                             (24_000, 27, False, None),
                                                             (20_000_000, 10_000, True, 400)])
def test_cell_without_formula_sized_within_one_percent(budget, vocab, tied, embedding):
    assert MGU not in RECURRENT_PARAMS
    hidden, count = hidden_size_for_budget(budget, MGU, vocab, 2, tied, {}, embedding_size=embedding)
    assert abs(count - budget) <= 0.01 * budget
    # the count is the model's: the language model as training builds it, on the meta device
    with torch.device("meta"):
        model = LanguageModel(vocab, MGU, embedding or hidden, hidden, 2, tied, {},
                              Dropouts("locked", 0, 0, 0, 0, 0))
    assert sum(p.numel() for p in model.parameters()) == count


# --- the config file: checks naming the file and key, and the study it produces --------------------

@pytest.mark.parametrize("change, key, message", [
    (lambda c: c.update(cell="examples.nowhere:MGULayer"), "custom_cells.mgu.cell",
     "module examples.nowhere not found"),
    (lambda c: c.update(cell="examples.mgu:MGU"), "custom_cells.mgu.cell", "defines no class MGU"),
    (lambda c: c.update(cell_options={"levels": 2}), "custom_cells.mgu.cell_options", "unknown option 'levels'"),
    (lambda c: c["studies"]["pru"].update(like="lstm_m999"), "custom_cells.mgu.studies.pru.like", "unknown model"),
    (lambda c: c["studies"]["lru"].update(artifacts=["acuracy"]), "custom_cells.mgu.studies.lru.artifacts",
     "unknown artifact 'acuracy'"),
    (lambda c: c["studies"].update(nlstm={"like": "gru_2x600", "artifacts": ["test"]}),
     "custom_cells.mgu.studies.nlstm", "study 'nlstm' is not run"),
    (lambda c: c["studies"]["pru"].update(match="width", hidden_size=500), "custom_cells.mgu.studies.pru",
     "match and hidden_size both size the cell"),
    (lambda c: c["studies"]["pru"].update(recipe={"learning_rate": 10.0}), "custom_cells.mgu.studies.pru.recipe",
     "'learning_rate' not in lstm_m1000's recipe 'standard'"),
    (lambda c: c["studies"]["pru"].update(recipe={"lr": "ten"}), "custom_cells.mgu.studies.pru.recipe.key 'lr'",
     "'ten' is not of type 'number'"),
    (lambda c: c["studies"].update(lrn={"like": "lstm", "artifacts": ["lm"], "match": "parameters"}),
     "custom_cells.mgu.studies.lrn.match", "'lstm' has a mixture-of-softmaxes head, which rnnrepro.sizing does not count"),
])
def test_bad_custom_cell_names_file_and_key(custom, change, key, message):
    change(custom["mgu"])
    with pytest.raises(ConfigError, match=r"^my_cell\.yaml is invalid:") as error:
        check_custom_cells(custom, studies(("pru", "lru", "lrn")), "my_cell.yaml")
    assert f"{key}: " in str(error.value) and message in str(error.value), str(error.value)


# Cells that break the layer contract, each in a module of its own (an import is cached by its name).
BROKEN_CELLS = {
    "raises": ("    def __init__(self, input_size: int, hidden_size: int):\n"
               "        raise ValueError('no weights today')\n"),
    "transposed": ("    def forward(self, x, state):\n        outputs, last = super().forward(x, state)\n"
                   "        return outputs.transpose(0, 1), last\n"),
    "narrow": ("    def forward(self, x, state):\n        outputs, last = super().forward(x, state)\n"
               "        return outputs[..., :-1], last\n"),
    "state_lost": ("    def forward(self, x, state):\n        outputs, last = super().forward(x, state)\n"
                   "        return outputs, last[0]\n"),
    "long_windows": ("    def forward(self, x, state):\n        if x.size(0) > 10:\n"
                     "            raise IndexError('windows above 10 steps are not handled')\n"
                     "        return super().forward(x, state)\n"),
    "nan": ("    def forward(self, x, state):\n        outputs, last = super().forward(x, state)\n"
            "        return outputs * float('nan'), last\n"),
    "nan_gradient": ("    def forward(self, x, state):\n        outputs, last = super().forward(x, state)\n"
                     "        import torch\n        return outputs + torch.sqrt(0 * outputs), last\n"),
    "nan_in_eval": ("    def forward(self, x, state):\n        outputs, last = super().forward(x, state)\n"
                    "        return (outputs if self.training else outputs * float('nan')), last\n"),
}


def broken_cell(directory, kind: str, monkeypatch) -> str:
    """A module ``broken_<kind>`` in ``directory`` (put on sys.path): the MGU with one thing broken."""
    (directory / f"broken_{kind}.py").write_text(
        f"from examples.mgu import MGULayer\n\n\nclass BrokenMGU(MGULayer):\n{BROKEN_CELLS[kind]}")
    monkeypatch.syspath_prepend(str(directory))
    # a module of that name another test imported (test_training's broken cells) would be found instead
    monkeypatch.delitem(sys.modules, f"broken_{kind}", raising=False)
    return f"broken_{kind}:BrokenMGU"


@pytest.mark.parametrize("kind, message", [
    ("raises", "constructing broken_raises:BrokenMGU(input_size=32, hidden_size=64) raised ValueError: "
               "no weights today"),
    ("transposed", "forward returned (2, 3, 64), expected (3, 2, 64)"),
    ("narrow", "forward returned (3, 2, 63), expected (3, 2, 64)"),
    ("state_lost", "forward returned a state of shape (64,), expected (2, 64) (init_state's)"),
])
def test_a_cell_that_breaks_the_contract_is_named_at_config_check(custom, tmp_path, monkeypatch, kind, message):
    custom["mgu"]["cell"] = broken_cell(tmp_path, kind, monkeypatch)
    with pytest.raises(ConfigError) as error:
        check_custom_cells(custom, studies(), "my_cell.yaml")
    first, *rest = str(error.value).splitlines()
    assert first.startswith(f"my_cell.yaml: custom_cells.mgu: {message}"), first
    assert "docs/custom_cells.md" in rest[-1]


@pytest.mark.parametrize("kind, message", [
    ("long_windows", "broken_long_windows:BrokenMGU(input_size=32, hidden_size=64) forward on x of shape "
                     "(40, 2, 32) (as long as training's windows) from the state the second returned raised "
                     "IndexError: windows above 10 steps are not handled"),
    ("nan", "forward on x of shape (3, 2, 32) (finite, from torch.randn) returned outputs with NaN or infinite "
            "values"),
    ("nan_gradient", "the backward pass of broken_nan_gradient:BrokenMGU(input_size=32, hidden_size=64) on x of "
                     "shape (40, 2, 32) gave NaN or infinite gradients"),
    ("nan_in_eval", "broken_nan_in_eval:BrokenMGU(input_size=32, hidden_size=64) in evaluation mode (layer.eval(), "
                    "as validation and test run it) on x of shape (3, 2, 32) (finite, from torch.randn) returned "
                    "outputs with NaN or infinite values"),
])
def test_a_cell_failing_only_at_trainings_length_or_giving_nan_is_named_at_config_check(custom, tmp_path, monkeypatch,
                                                                                       kind, message):
    """The trial runs the cell on a window as long as its recipes give it at the run's budget (the smoke
    PRU recipe's: 40 steps) and wants every output, state and gradient finite: a cell that raises only
    for longer windows, or gives NaN, stops the dry run, not the first training job or its lr advice."""
    custom["mgu"]["cell"] = broken_cell(tmp_path, kind, monkeypatch)
    run_config = load_run_config({**load_yaml(REPO_ROOT / "config" / "config.yaml"), "budget": "smoke"})
    with pytest.raises(ConfigError) as error:
        check_custom_cells(custom, studies(), "my_cell.yaml", run_config)
    first = str(error.value).splitlines()[0]
    assert first.startswith("my_cell.yaml: custom_cells.mgu: ") and message in first, first


def test_trial_sizes_keep_the_models_equal_widths_equal():
    pru, lru = studies().values()
    # PRU Table 1: a 400-wide tied embedding into 1000-wide layers, the last back to 400
    assert trial_layer_sizes(pru, pru["models"]["lstm_m1000"]) == [(32, 64), (64, 64), (64, 32)]
    # the ablations write embedding = hidden = 600 as numbers; LRU: embedding_size: hidden_size
    assert trial_layer_sizes(pru, pru["models"]["abl_lstm_m600"]) == [(64, 64)]
    assert trial_layer_sizes(lru, lru["models"]["lru_24m"]) == [(64, 64)]


def test_every_built_in_model_passes_the_trial():
    """The trial cannot refuse a cell that trains: each model of every study, at its trial sizes, on a
    window as long as the longest recipe's (110 steps: the LRN recipe's cap)."""
    tried = set()
    for name in ("pru", "lru", "nlstm", "lrn"):
        study = load_study(name, custom_cells={})
        for model_id, model in study["models"].items():
            for sizes in trial_layer_sizes(study, model):
                key = (model["cell"], repr(model["cell_options"]), sizes)
                if key not in tried:
                    tried.add(key)
                    assert try_cell(model["cell"], model["cell_options"], *sizes, 110) is None, (name, model_id, sizes)


@pytest.mark.slow
def test_dry_run_stops_on_a_transposed_cell_naming_file_and_cell(tmp_path):
    project = copy_project(tmp_path)
    shutil.copytree(REPO_ROOT / "examples", project / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "examples" / "broken_transposed.py").write_text(
        "from examples.mgu import MGULayer\n\n\nclass BrokenMGU(MGULayer):\n" + BROKEN_CELLS["transposed"])
    (project / "bad.yaml").write_text(EXAMPLE.read_text().replace("examples.mgu:MGULayer",
                                                                  "examples.broken_transposed:BrokenMGU"))
    run = snakemake(project, "-n", "results/tables/pru_table1.csv", "--configfile", "bad.yaml")
    said = run.stdout + run.stderr
    assert run.returncode != 0
    assert "bad.yaml: custom_cells.mgu: forward returned (2, 3, 64), expected (3, 2, 64)" in said, said[-2000:]
    assert "train_cell" not in said


def test_schema_rejects_a_cell_that_is_not_module_class(custom):
    run_config = load_yaml(REPO_ROOT / "config" / "config.yaml")
    run_config["custom_cells"] = {"mgu": {**custom["mgu"], "cell": "mgu"}}
    with pytest.raises(ConfigError, match=r"custom_cells\.mgu\.cell"):
        load_run_config(run_config, source="my_cell.yaml")


def test_the_example_joins_each_study_at_the_baselines_footing(custom):
    from rnnrepro.sizing import language_model_params

    config = load_run_config({**load_yaml(REPO_ROOT / "config" / "config.yaml"), "budget": "smoke"})
    pru = load_study("pru", custom_cells=custom, custom_source="examples/mgu.yaml")
    lru = load_study("lru", custom_cells=custom, custom_source="examples/mgu.yaml")
    assert pru["artifacts"]["table1"]["models"][-1] == "mgu"
    assert pru["budgets"]["smoke"]["artifacts"]["table1"]["models"][-1] == "mgu"  # the budget's cut too
    # PRU: LSTM M=1000's layers, embedding and tie, sized to its parameter count at every budget
    for budget, corpus in (("smoke", "synth_ptb"), ("cpu", "ptb"), ("paper", "ptb")):
        at = {**config, "budget": budget}
        mgu, lstm = (grid.architecture(pru, at, m, corpus) for m in ("mgu", "lstm_m1000"))
        vocab = pru["vocab_sizes"][corpus]
        count = language_model_params(MGU, vocab, mgu["embedding_size"], mgu["hidden_size"], 3, True, {})
        assert mgu["param_budget"] == language_model_params("lstm", vocab, lstm["embedding_size"], lstm["hidden_size"],
                                                            3, True, {}), budget
        assert abs(count - mgu["param_budget"]) / mgu["param_budget"] < 0.002, budget
        assert mgu["param_budget_of"] == "lstm_m1000" and mgu["embedding_size"] == lstm["embedding_size"]
        assert mgu["hidden_size"] > lstm["hidden_size"]  # half an LSTM layer's weights at a width
    # its recipe is LSTM M=1000's but the learning rate the example asks for, which budgets still scale
    # (on the whole split, which the cpu budget does not tune: at 10 % each is tuned around its own rate)
    def recipe(study, model, budget, corpus="ptb", fraction=100):
        at = {**config, "budget": budget}
        return grid.resolve_cell(study, at, grid.Cell(study["study"], corpus, model, fraction, 1111, budget))["recipe"]
    assert recipe(pru, "mgu", "cpu") == {**recipe(pru, "lstm_m1000", "cpu"), "lr": 10.0}
    assert recipe(pru, "mgu", "smoke", "synth_ptb", 100) == recipe(pru, "lstm_m1000", "smoke", "synth_ptb", 100)
    # LRU: sized to the same parameter budget as its baselines, within 1 %
    arch = grid.architecture(lru, config, "mgu", "synth_char_small")
    assert arch["param_budget"] == grid.architecture(lru, config, "gru_24m", "synth_char_small")["param_budget"]
    assert grid.resolve_cell(lru, config, grid.Cell("lru", "synth_char_small-ptb_char", "mgu", 100, 1111, "smoke"))[
        "recipe"] == grid.resolve_cell(lru, config, grid.Cell("lru", "synth_char_small-ptb_char", "gru_24m", 100,
                                                               1111, "smoke"))["recipe"]
    # the study files themselves are untouched without the config file
    assert "mgu" not in load_study("lru", custom_cells={})["models"]


def test_the_words_say_how_the_cell_stands_beside_each_baseline(custom):
    pru = load_study("pru", custom_cells=custom, custom_source="examples/mgu.yaml")
    claims = {c["id"]: c["statement"] for c in pru["claims"]}
    assert claims["mgu_vs_lstm_m1000"] == (
        "The added cell mgu reaches a lower test perplexity than lstm_m1000 (mgu is sized to lstm_m1000's parameter count, "
        "trained in lstm_m1000's recipe (standard) but lr 10, as examples/mgu.yaml asks).")
    assert "sized to lstm_m1000's parameter count, not to pru_g4_k2_m1400's" in claims["mgu_vs_pru_g4_k2_m1400"]
    # at the baseline's width, as a config may ask: said in the claim, and the model keeps that width
    custom["mgu"]["studies"]["pru"] = {"like": "lstm_m1000", "artifacts": ["table1"], "match": "width"}
    wide = load_study("pru", custom_cells=custom, custom_source="my_cell.yaml")
    statement = next(c["statement"] for c in wide["claims"] if c["id"] == "mgu_vs_lstm_m1000")
    assert ("mgu is at lstm_m1000's width with a parameter count of its own, not sized to its parameters "
            "(my_cell.yaml asks for match: width), trained in lstm_m1000's recipe (standard)") in statement
    config = load_run_config({**load_yaml(REPO_ROOT / "config" / "config.yaml"), "budget": "cpu"})
    mgu, lstm = (grid.architecture(wide, config, m, "ptb") for m in ("mgu", "lstm_m1000"))
    # the code of each cell is its own: the LSTM's numerics version, the MGU's module and its sha256
    assert lstm.pop("cell_numerics") == 1 and mgu.pop("cell_source") == "examples/mgu.py"
    assert len(mgu.pop("cell_source_sha256")) == 64 and mgu == {**lstm, "cell": MGU}
    # a baseline whose head the sizing cannot count: its width, said so
    custom["mgu"]["studies"] = {"lrn": {"like": "lstm", "artifacts": ["lm"]}}
    lrn = load_study("lrn", custom_cells=custom, custom_source="my_cell.yaml")
    assert "lstm has a mixture-of-softmaxes head, which the sizing does not count" in next(
        c["statement"] for c in lrn["claims"] if c["id"].startswith("mgu_vs_"))


def test_the_footing_column_gives_the_numbers_of_the_budget(custom, tmp_path):
    import json

    from rnnrepro.analysis.footing import add_footing

    pru = load_study("pru", custom_cells=custom, custom_source="examples/mgu.yaml")
    config = load_run_config({**load_yaml(REPO_ROOT / "config" / "config.yaml"), "budget": "cpu"})
    metrics_files = []
    for model, params in (("lstm_m1000", 559568), ("mgu", 559552)):
        run = tmp_path / model
        run.mkdir()
        (run / "config.json").write_text(json.dumps(grid.resolve_cell(pru, config, grid.Cell(
            "pru", "ptb", model, 100, 1111, "cpu"))))  # the whole split: cells the cpu budget does not tune
        (run / "metrics.json").write_text(json.dumps({
            "study": "pru", "dataset": "ptb", "corpus": "ptb", "model": model, "fraction": 100, "seed": 1111,
            "budget": "cpu", "params": params, "epochs": 3, "wall_seconds": 1.0, "val_loss": 6.0, "val_ppl": 400.0,
            "test_loss": 6.0, "test_ppl": 400.0}))
        metrics_files.append(str(run / "metrics.json"))
    table = tmp_path / "pru_table1.csv"
    pd.DataFrame({"dataset": ["ptb", "ptb"], "model": ["lstm_m1000", "mgu"], "test_ppl": [400.0, 400.0]}).to_csv(
        table, index=False)
    add_footing(pru, "table1", metrics_files, [str(table)])
    footing = pd.read_csv(table, keep_default_na=False).set_index("model")["footing"]
    assert footing["lstm_m1000"] == ""
    assert footing["mgu"].endswith("; here 559,552 parameters against lstm_m1000's 559,568 (1.00x), recipe as "
                                   "lstm_m1000's but lr 10 (lstm_m1000: 30)"), footing["mgu"]
    assert "footing" in pru["artifacts"]["table1"]["columns"]["pru_table1"]


def test_jobs_see_the_cells_the_workflow_exported(custom, monkeypatch):
    """Notebooks and the scorecard call load_study(study) in the jobs Snakemake starts: they inherit
    the environment the Snakefile exported the custom cells into."""
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "")  # restored after the test, whatever export() did
    assert "mgu" not in load_study("pru")["models"]
    export(custom, "examples/mgu.yaml")
    assert load_study("pru")["models"]["mgu"]["cell"] == MGU
    assert "mgu" in load_study("lru")["artifacts"]["accuracy"]["models"]
    # the study files as written: the configuration knows nothing of a run's cells
    assert "mgu" not in configuration.load_study("pru")["models"]
    export({}, "config/config.yaml")
    assert "mgu" not in load_study("pru")["models"]


# --- the claims "the new cell against each baseline" ------------------------------------------------

def test_generated_claims_on_a_fixture(custom):
    pru = load_study("pru", custom_cells=custom, custom_source="examples/mgu.yaml")
    baselines = load_study("pru", custom_cells={})["artifacts"]["table1"]["models"]
    generated = [c for c in pru["claims"] if c["id"].startswith("mgu_vs_")]
    assert [c["rows"][1]["model"] for c in generated] == baselines
    assert all(c["table"] == "pru_table1" and c["value"] == "test_ppl" and c["check"] == "less_than"
               and c["per"] == {"dataset": ["ptb", "wt2"]} for c in generated)
    # a paper-budget table: MGU between LSTM M=1000 and PRU g=4 on PTB, no WT-2 row for it
    nan = float("nan")
    columns = ["dataset", "model", "cell", "g", "test_ppl", "paper_test_ppl"]
    rows = [dict(zip(columns, values), recipe="standard") for values in [
        ("ptb", "lstm_m1000", "lstm", nan, 66.0, 66.29),
        ("ptb", "pru_g4_k2_m1400", "pru", 4, 62.0, 62.42),
        ("ptb", "mgu", MGU, nan, 64.0, nan),
        ("wt2", "lstm_m1000", "lstm", nan, 75.0, 75.08)]]
    config = {"budget": "paper", "seeds": [1111]}
    card = pd.DataFrame(evaluate_study(pru, config, {"pru_table1": pd.DataFrame(rows)})).set_index("claim")
    assert card.loc["mgu_vs_lstm_m1000[dataset=ptb]", "verdict"] == HELD
    assert card.loc["mgu_vs_pru_g4_k2_m1400[dataset=ptb]", "verdict"] == NOT_HELD
    assert card.loc["mgu_vs_lstm_m1000[dataset=wt2]", "verdict"] == NOT_TESTED
    assert "no result for mgu" in card.loc["mgu_vs_lstm_m1000[dataset=wt2]", "reason"]
    assert card.loc["mgu_vs_lstm_m1000[dataset=ptb]", "paper_check"].startswith("n/a")
    # the study's own claims are unchanged beside them
    assert card.loc["pru_g4_beats_lstm_standard[dataset=ptb]", "verdict"] == HELD


# --- end to end: the example through a cut-down smoke grid of two studies ---------------------------

def cut_smoke_grid(project):
    """The smoke grid of pru Table 1 and lru accuracy cut to a few baselines, one dataset, one seed, and
    the other artifacts of the two studies left out (the scorecard then reads those two tables and the
    PRU counts, which train nothing)."""
    for name, artifact, cut in [("pru", "table1", {"datasets": ["ptb"], "models": ["lstm_m1000"]}),
                                ("lru", "accuracy", {"datasets": ["ptb_char"], "models": ["gru_24m", "lru_24m"],
                                                     "seeds": [1111]})]:
        path = project / "config" / "studies" / f"{name}.yaml"
        study = yaml.safe_load(path.read_text())
        study["budgets"]["smoke"]["artifacts"][artifact] = cut
        study["budgets"]["smoke"]["omit"] = [a for a in study["artifacts"] if a not in (artifact, "counts")]
        path.write_text(yaml.safe_dump(study, sort_keys=False))


def make_example_arguments() -> list[str]:
    """What `make example` gives `snakemake --profile profiles/smoke` (the Makefile's EXAMPLE)."""
    import shlex

    text = (REPO_ROOT / "Makefile").read_text()
    definition = text[text.index("EXAMPLE :="):].split("\nexample:")[0]
    return shlex.split(definition.removeprefix("EXAMPLE :=").replace("\\\n", " "))


def test_the_docs_give_what_make_example_runs():
    words = " ".join(f"'{w}'" if "[" in w else w for w in make_example_arguments())
    docs = (REPO_ROOT / "docs" / "custom_cells.md").read_text()
    assert f"snakemake --profile profiles/smoke {words}\n" in docs
    assert f"snakemake --profile profiles/smoke --report results/smoke/report.html {words}\n" in docs


def baselines_of_the_smoke_run(smoke_project, project, models: dict[str, list[str]]) -> list[str]:
    """Copy the shared smoke run's synthetic corpora and the run folders of ``models`` (study -> model
    names) into ``project``, times kept, as if that project had trained them; returns their run folders."""
    shutil.copytree(smoke_project / "data", project / "data")
    copied = []
    for study, names in models.items():
        for name in names:
            for run in (smoke_project / grid.runs_dir("smoke") / study).glob(f"*/{name}/frac100/seed1111"):
                shutil.copytree(run, project / run.relative_to(smoke_project))
                copied.append(str(run.relative_to(smoke_project)))
    return copied


@pytest.mark.slow
def test_example_through_two_studies_end_to_end(tmp_path, smoke_project):
    """`make example` on a cut-down grid: the two tables with the MGU's rows and their footing, its claims
    against each baseline in the scorecard, and the report of them built by the command the docs give.
    The baselines are those of the shared smoke run (the same cells): only the MGU trains here."""
    project = copy_project(tmp_path)
    shutil.copytree(REPO_ROOT / "examples", project / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    cut_smoke_grid(project)
    baselines = baselines_of_the_smoke_run(smoke_project, project, {"pru": ["lstm_m1000"],
                                                                    "lru": ["gru_24m", "lru_24m"]})
    assert len(baselines) == 3, baselines
    example = make_example_arguments()
    targets = [word for word in example if word.startswith("results/")]

    bad = project / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("examples.mgu:MGULayer", "examples.mgu:NoSuchLayer"))
    run = snakemake(project, "--profile", "profiles/smoke", *targets, "-n", "--configfile",
                    "profiles/smoke/run-config.yaml", "bad.yaml")
    assert run.returncode != 0
    said = run.stdout + run.stderr
    assert "profiles/smoke/run-config.yaml bad.yaml is invalid:\n  custom_cells.mgu.cell: " in said, said[-2000:]

    before = {run: (project / run / "metrics.json").stat().st_mtime_ns for run in baselines}
    run = snakemake(project, "--profile", "profiles/smoke", *example)
    assert run.returncode == 0, run.stderr[-3000:]
    # the MGU trained beside each baseline; the baselines were not trained again
    assert len(list(project.glob("results/smoke/runs/*/*/mgu/frac100/seed1111/metrics.json"))) == 2
    assert {run: (project / run / "metrics.json").stat().st_mtime_ns for run in baselines} == before
    pru = pd.read_csv(project / "results/smoke/tables/pru_table1.csv", keep_default_na=False)
    assert list(pru["model"]) == ["lstm_m1000", "mgu"]
    assert pru.set_index("model").loc["mgu", "cell"] == MGU and list(pru["paper_test_ppl"] == "") == [False, True]
    footing = pru.set_index("model")["footing"]
    assert footing["lstm_m1000"] == "" and "sized to lstm_m1000's parameter count" in footing["mgu"], footing["mgu"]
    lru = pd.read_csv(project / "results/smoke/tables/lru_accuracy.csv")
    assert list(lru["model"]) == ["gru_24m", "lru_24m", "mgu"] and lru["unit"].iloc[-1] == "mgu"
    params = lru.set_index("model")["params"]
    assert abs(params["mgu"] - 24_000) <= 240 and abs(params["gru_24m"] - 24_000) <= 240

    # the scorecard of the two studies holds the MGU's claims (smoke: not tested, synthetic data)
    card = pd.read_csv(project / "results/smoke/tables/claims.csv")
    assert set(card["study"]) == {"pru", "lru"}
    generated = card[card["claim"].str.startswith("mgu_vs_")].set_index("claim")
    assert {"mgu_vs_lstm_m1000[dataset=ptb]", "mgu_vs_gru_24m[dataset=ptb_char]"} <= set(generated.index)
    assert set(generated["verdict"]) == {NOT_TESTED} and generated["reason"].str.startswith("synthetic").all()
    assert generated.loc["mgu_vs_gru_24m[dataset=ptb_char]", "ours"] == (
        f"mgu {lru.set_index('model').loc['mgu', 'test_loss']:.4g}; "
        f"gru_24m {lru.set_index('model').loc['gru_24m', 'test_loss']:.4g}")

    # the report, as the docs and `make example` build it: the tables, the scorecard, the MGU's caption
    run = snakemake(project, "--profile", "profiles/smoke", "--report", "results/smoke/report.html", *example)
    assert run.returncode == 0, run.stderr[-3000:]
    report = (project / "results/smoke/report.html").read_text()
    assert "Cells of your own added beside the baselines" in report and "Claims scorecard" in report

    # without the config file nothing retrains: only the notebooks rerun, without the MGU row
    run = snakemake(project, "--profile", "profiles/smoke", *targets, "-n", "--config", "studies=[pru,lru]")
    assert run.returncode == 0, run.stderr[-2000:]
    planned = re.findall(r"^rule (\w+):", run.stdout, re.M)
    assert "train_cell" not in planned and "notebook_pru_table1" in planned, run.stdout[-3000:]
