"""Config and study validation, and the resolution of training cells from them."""

import copy

import pytest
import yaml

from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_run_config, load_study, validate_cell_config


@pytest.fixture
def run_config():
    return yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def pru():
    return load_study("pru")


def test_shipped_config_is_valid(run_config):
    assert load_run_config(run_config)["budget"] == "paper"


def test_misspelled_key_is_named(run_config):
    run_config["budgett"] = run_config.pop("budget")
    with pytest.raises(ConfigError, match=r"unknown key 'budgett'"):
        load_run_config(run_config)


def test_wrong_type_is_named(run_config):
    run_config["threads"] = "two"
    with pytest.raises(ConfigError, match=r"key 'threads': 'two' is not of type 'integer'"):
        load_run_config(run_config)


def test_wrong_nested_type_is_named(run_config):
    run_config["seeds"] = [1, "x"]
    with pytest.raises(ConfigError, match=r"key 'seeds.1'"):
        load_run_config(run_config)


def test_study_recipe_key_misspelled(tmp_path, pru):
    broken = copy.deepcopy(pru)
    broken["recipes"]["standard"]["dropuot_input"] = 0.5
    (tmp_path / "config" / "studies").mkdir(parents=True)
    (tmp_path / "config" / "studies" / "pru.yaml").write_text(yaml.safe_dump(broken))
    with pytest.raises(ConfigError, match=r"unknown key 'dropuot_input' under recipes.standard"):
        load_study("pru", root=tmp_path)


def test_study_unknown_model_reference(tmp_path, pru):
    broken = copy.deepcopy(pru)
    broken["artifacts"]["table1"]["models"].append("lstm_m9999")
    (tmp_path / "config" / "studies").mkdir(parents=True)
    (tmp_path / "config" / "studies" / "pru.yaml").write_text(yaml.safe_dump(broken))
    with pytest.raises(ConfigError, match=r"artifacts.table1.models: unknown model 'lstm_m9999'"):
        load_study("pru", root=tmp_path)


def test_table1_grid_paper_budget(run_config, pru):
    cells = grid.artifact_cells(pru, run_config, "table1")
    assert len(cells) == 2 * 10
    assert {c.corpus for c in cells} == {"ptb", "wt2"}
    assert cells[0].run_dir == "results/runs/pru/ptb/lstm_m1000/frac100/seed1111"


def test_resolved_cell_follows_recipe_dataset_and_budget(run_config, pru):
    cell = grid.Cell("pru", "wt2", "awd_pru_g4_k2_m1400", 100, 1111)
    resolved = validate_cell_config(grid.resolve_cell(pru, run_config, cell), "test")
    assert resolved["recipe"]["batch_size"] == 80          # AWD-LSTM's WT-2 command
    assert resolved["recipe"]["dropout_input"] == 0.65
    assert resolved["architecture"]["hidden_size"] == 1400
    assert resolved["data"]["train_file"] == "data/processed/wt2/train.txt"

    smoke = dict(run_config, budget="smoke")
    cell = grid.Cell("pru", "synth_wt2", "awd_pru_g4_k2_m1400", 100, 1111)
    resolved = grid.resolve_cell(pru, smoke, cell)
    assert resolved["dataset"] == "wt2" and resolved["corpus"] == "synth_wt2"
    assert resolved["recipe"]["batch_size"] == 16             # the budget wins over the dataset
    assert resolved["architecture"]["hidden_size"] == 112     # 1400 x 0.08
    assert resolved["architecture"]["embedding_size"] == 32


def test_finetune_cell_points_at_its_parent(run_config, pru):
    cell = grid.Cell("pru", "ptb", "awd_pru_g4_k2_m1400_ft", 100, 7)
    resolved = grid.resolve_cell(pru, run_config, cell)
    assert resolved["init_from"] == "results/runs/pru/ptb/awd_pru_g4_k2_m1400/frac100/seed7/model.pt"
    assert resolved["recipe"]["optimizer"] == "asgd" and resolved["recipe"]["stop_on_nonmono"]


def test_fraction_files():
    assert grid.train_file("ptb", 100) == "data/processed/ptb/train.txt"
    assert grid.train_file("ptb", 20) == "data/processed/ptb/train.fraction20.txt"


def test_cell_config_rejects_bad_recipe(run_config, pru):
    resolved = grid.resolve_cell(pru, run_config, grid.Cell("pru", "ptb", "lstm_m1000", 100, 1))
    resolved["recipe"]["lr"] = -1
    with pytest.raises(ConfigError, match=r"recipe.key 'lr'"):
        validate_cell_config(resolved, "cell")


def test_unknown_study_is_named(run_config):
    with pytest.raises(ConfigError, match=r"unknown study 'nosuch'.*known studies: .*\bpru\b"):
        load_study("nosuch")
