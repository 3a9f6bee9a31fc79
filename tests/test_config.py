"""Config and study validation, and the resolution of training cells from them."""

import copy
import inspect
import re
import subprocess
import sys

import jsonschema
import pytest
import yaml
from conftest import copy_project, snakemake

from rnnrepro import grid
from rnnrepro.cells import CELLS, cell_class, cell_options
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_run_config, load_study, validate, validate_cell_config


@pytest.fixture
def run_config():
    return yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def pru():
    return load_study("pru")


def write_study(root, study: dict) -> None:
    """``study`` as root's config/studies/pru.yaml, for load_study(..., root=root)."""
    (root / "config" / "studies").mkdir(parents=True)
    (root / "config" / "studies" / "pru.yaml").write_text(yaml.safe_dump(study))


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
    write_study(tmp_path, broken)
    with pytest.raises(ConfigError, match=r"unknown key 'dropuot_input' under recipes.standard"):
        load_study("pru", root=tmp_path)


def test_study_schema_file_is_the_whole_schema(tmp_path, pru):
    """The schema as any YAML reader sees it (an editor, snakemake.utils.validate) accepts every study
    file: a recipe and a change to one share their fields by a YAML anchor, nothing is added in Python."""
    schema = yaml.safe_load((REPO_ROOT / "workflow" / "schemas" / "study.schema.yaml").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in sorted((REPO_ROOT / "config" / "studies").glob("*.yaml")):
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(path.read_text())))
        assert not errors, f"{path.name}: {errors[0].message}"
    broken = copy.deepcopy(pru)
    broken["budgets"]["smoke"]["recipe"] = {"dropuot_input": 0.5}
    write_study(tmp_path, broken)
    with pytest.raises(ConfigError, match=r"unknown key 'dropuot_input' under budgets.smoke.recipe; "
                                          r"allowed keys: ar_alpha, batch_size, bptt, clip, dropout_embedding"):
        load_study("pru", root=tmp_path)


def test_artifact_with_paper_values_names_their_source(tmp_path, pru):
    """The report's caption quotes an artifact's paper_source: an artifact with paper values needs one."""
    broken = copy.deepcopy(pru)
    del broken["artifacts"]["table4"]["paper_source"]
    write_study(tmp_path, broken)
    with pytest.raises(ConfigError, match=r"artifacts.table4: no paper_source; say where in the paper the values "
                                          r"under paper.table4 come from"):
        load_study("pru", root=tmp_path)


def test_study_unknown_model_reference(tmp_path, pru):
    broken = copy.deepcopy(pru)
    broken["artifacts"]["table1"]["models"].append("lstm_m9999")
    write_study(tmp_path, broken)
    with pytest.raises(ConfigError, match=r"artifacts.table1.models: unknown model 'lstm_m9999'"):
        load_study("pru", root=tmp_path)


@pytest.mark.parametrize("where", ["artifact", "budget"])
def test_a_model_listed_twice_in_an_artifact_is_named(tmp_path, pru, where):
    """Listed twice, a model's seeds would count twice ("3 v 6"), narrowing its interval."""
    broken = copy.deepcopy(pru)
    if where == "artifact":
        broken["artifacts"]["table1"]["models"].append("lstm_m1000")
        key = "artifacts.table1.models"
    else:
        budget = next(name for name, spec in broken["budgets"].items() if "table1" in spec.get("artifacts", {}))
        cut = broken["budgets"][budget]["artifacts"]["table1"]
        cut["models"] = cut["models"] + cut["models"][:1]
        key = f"budgets.{budget}.artifacts.table1.models"
    write_study(tmp_path, broken)
    with pytest.raises(ConfigError, match=rf"{re.escape(key)}: \w+ listed twice \(each cell counts once"):
        load_study("pru", root=tmp_path)


def test_table1_grid_paper_budget(run_config, pru):
    cells = grid.artifact_cells(pru, run_config, "table1")
    assert len(cells) == 2 * 10
    assert {c.corpus for c in cells} == {"ptb", "wt2"}
    assert cells[0].run_dir == "results/runs/pru/ptb/lstm_m1000/frac100/seed1111"


def test_resolved_cell_follows_recipe_dataset_and_budget(run_config, pru):
    cell = grid.Cell("pru", "wt2", "awd_pru_g4_k2_m1400", 100, 1111, run_config["budget"])
    resolved = validate_cell_config(grid.resolve_cell(pru, run_config, cell), "test")
    assert resolved["recipe"]["batch_size"] == 80          # AWD-LSTM's WT-2 command
    assert resolved["recipe"]["dropout_input"] == 0.65
    assert resolved["architecture"]["hidden_size"] == 1400
    assert resolved["data"]["train_file"] == "data/processed/wt2/train.txt"

    smoke = dict(run_config, budget="smoke")
    cell = grid.Cell("pru", "synth_wt2", "awd_pru_g4_k2_m1400", 100, 1111, "smoke")
    resolved = grid.resolve_cell(pru, smoke, cell)
    assert resolved["dataset"] == "wt2" and resolved["corpus"] == "synth_wt2"
    assert resolved["recipe"]["batch_size"] == 16             # the budget wins over the dataset
    assert resolved["architecture"]["hidden_size"] == 112     # 1400 x 0.08
    assert resolved["architecture"]["embedding_size"] == 32


def test_budget_head_sizes_or_replaces_the_mixture_of_softmaxes(run_config):
    lrn = load_study("lrn")
    cell = grid.Cell("lrn", "ptb", "lstm", 100, 1111, "cpu")  # the whole split: a cell the cpu budget does not tune
    paper = grid.resolve_cell(lrn, run_config, grid.Cell("lrn", "ptb", "lstm", 100, 1111, "paper"))["architecture"]
    assert paper["head"] == {"type": "mixture_of_softmaxes", "experts": 15, "latent_dropout": 0.29}
    assert paper["last_hidden_size"] == 620

    def under(head: dict) -> dict:
        study = copy.deepcopy(lrn)
        study["budgets"]["cpu"]["head"] = head
        return grid.resolve_cell(study, dict(run_config, budget="cpu"), cell)["architecture"]

    fewer = under({"experts": 3})
    assert fewer["head"] == {"type": "mixture_of_softmaxes", "experts": 3, "latent_dropout": 0.29}
    assert fewer["last_hidden_size"] == 62                      # 620 x 0.1
    plain = under({"type": "softmax"})
    assert plain["head"] == {"type": "softmax"} and "last_hidden_size" not in plain
    model = grid.resolve_cell(lrn, dict(run_config, budget="cpu"), cell)
    validate_cell_config(model, "test")                         # as shipped: a config the trainer takes
    both = copy.deepcopy(lrn)
    both["budgets"]["cpu"]["head"] = {"type": "softmax", "experts": 3}   # a softmax has no experts
    with pytest.raises(ConfigError, match="head"):
        validate(both, "study", "lrn.yaml")


def test_finetune_cell_points_at_its_parent(run_config, pru):
    cell = grid.Cell("pru", "ptb", "awd_pru_g4_k2_m1400_ft", 100, 7, run_config["budget"])
    resolved = grid.resolve_cell(pru, run_config, cell)
    assert resolved["init_from"] == "results/runs/pru/ptb/awd_pru_g4_k2_m1400/frac100/seed7/model.pt"
    assert resolved["recipe"]["optimizer"] == "asgd" and resolved["recipe"]["stop_on_nonmono"]


def test_fraction_files():
    assert grid.train_file("ptb", 100) == "data/processed/ptb/train.txt"
    assert grid.train_file("ptb", 20) == "data/processed/ptb/train.fraction20.txt"


def test_cell_config_rejects_bad_recipe(run_config, pru):
    resolved = grid.resolve_cell(pru, run_config, grid.Cell("pru", "ptb", "lstm_m1000", 100, 1, run_config["budget"]))
    resolved["recipe"]["lr"] = -1
    with pytest.raises(ConfigError, match=r"recipe.key 'lr'"):
        validate_cell_config(resolved, "cell")


def test_unknown_study_is_named(run_config):
    with pytest.raises(ConfigError, match=r"unknown study 'nosuch'.*known studies: .*\bpru\b"):
        load_study("nosuch")


# ---- the command line ---------------------------------------------------------------------------

def test_command_line_values_take_the_schema_types(run_config):
    # what Snakemake hands over for: trust_unverified_downloads=true seeds=[1111,1112] data_mirror= studies=pru
    command_line = {"trust_unverified_downloads": "true", "seeds": ["1111", "1112"], "data_mirror": None,
                    "studies": "pru", "threads": 3}
    run_config.update(command_line)
    loaded = load_run_config(run_config, command_line=command_line)
    assert loaded["trust_unverified_downloads"] is True
    assert loaded["seeds"] == [1111, 1112]
    assert loaded["data_mirror"] == "" and loaded["studies"] == ["pru"] and loaded["threads"] == 3
    run_config.update(seeds="7,8", trust_unverified_downloads="off")
    loaded = load_run_config(run_config, command_line={"seeds": "7,8", "trust_unverified_downloads": "off"})
    assert loaded["seeds"] == [7, 8] and loaded["trust_unverified_downloads"] is False


def test_bad_command_line_value_names_the_command_line(run_config):
    run_config["seeds"] = ["1111", "x"]
    with pytest.raises(ConfigError, match=r"^the command line \(--config seeds=.*\) is invalid:\n  key 'seeds.1'"):
        load_run_config(run_config, command_line={"seeds": ["1111", "x"]})
    run_config["seeds"] = [1111]
    run_config["budgett"] = "smoke"
    with pytest.raises(ConfigError, match=r"(?s)^the command line \(--config budgett=smoke\).*unknown key 'budgett'"):
        load_run_config(run_config, command_line={"budgett": "smoke"})


def test_bad_config_file_value_still_names_the_file(run_config):
    run_config["threads"] = "two"
    with pytest.raises(ConfigError, match=r"^config/config.yaml is invalid"):
        load_run_config(run_config, command_line={"budget": "smoke"})


@pytest.mark.slow
def test_snakemake_reads_command_line_values_and_keeps_the_smoke_profile(tmp_path):
    project = copy_project(tmp_path)
    planned = snakemake(project, "-n", "results/smoke/tables/pru_table1.csv",
                        "--config", "budget=smoke", "trust_unverified_downloads=true", "seeds=[1111,1112]")
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "seed1112/metrics.json" in planned.stdout
    # an extra --config adds to the profile's settings (smoke budget: synthetic corpora only)
    planned = snakemake(project, "-n", "--profile", "profiles/smoke", "results/smoke/tables/pru_table1.csv",
                        "--config", f"data_mirror={tmp_path}")
    assert planned.returncode == 0, planned.stderr[-3000:]
    raw = set(re.findall(r"output: (data/raw/[^/\s]+)/", planned.stdout))
    assert raw and all(path.startswith("data/raw/synth_") for path in raw), raw
    refused = snakemake(project, "-n", "results/tables/pru_table1.csv", "--config", "seeds=[1111,x]")
    assert refused.returncode != 0 and "the command line (--config seeds=" in refused.stdout + refused.stderr


# ---- cells, options and datasets of a study, checked when it is loaded -----------------------------

def broken_study(tmp_path, name, study, edit):
    broken = copy.deepcopy(study)
    edit(broken)
    (tmp_path / "config" / "studies").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config" / "studies" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(broken))
    return path


def test_unknown_cell_is_named_with_the_file_and_key(tmp_path, pru):
    path = broken_study(tmp_path, "pru", pru, lambda s: s["models"]["pru_g4_k2_m1400"].update(cell="pruu"))
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))} is invalid:\n  models.pru_g4_k2_m1400.cell: "
                                          r"unknown cell 'pruu'; known cells: .*\bpru\b"):
        load_study("pru", root=tmp_path)


def test_misspelled_or_mistyped_cell_option_is_named(tmp_path, pru):
    options = {"groups": 4, "levles": 2}
    broken_study(tmp_path, "pru", pru, lambda s: s["models"]["pru_g4_k2_m1400"].update(cell_options=options))
    with pytest.raises(ConfigError, match=r"models.pru_g4_k2_m1400.cell_options: cell 'pru': unknown option "
                                          r"'levles'; missing option 'levels' \(its options: levels: int, groups"):
        load_study("pru", root=tmp_path)
    options = {"groups": "4", "levels": 2}
    broken_study(tmp_path, "pru", pru, lambda s: s["models"]["pru_g4_k2_m1400"].update(cell_options=options))
    with pytest.raises(ConfigError, match=r"option 'groups' must be int, not '4'"):
        load_study("pru", root=tmp_path)


def test_option_of_a_model_sized_to_a_parameter_budget_is_named(tmp_path):
    lru = load_study("lru")
    model = next(name for name, m in lru["models"].items() if m["cell"] == "rhn" and "param_budget" in m)
    broken_study(tmp_path, "lru", lru, lambda s: s["models"][model]["cell_options"].update(depth=3))
    with pytest.raises(ConfigError, match=rf"models.{model}.cell_options: cell 'rhn': unknown option 'depth'"):
        load_study("lru", root=tmp_path)


def test_cell_options_read_from_source_match_the_constructors():
    """validate_cell reads signatures without torch; they must be the classes' real signatures."""
    for cell in CELLS:
        signature = inspect.signature(cell_class(cell).__init__)
        expected = {name: p.default is inspect.Parameter.empty for name, p in signature.parameters.items()
                    if name not in ("self", "input_size", "hidden_size")}
        options, _ = cell_options(cell)
        assert {name: option.required for name, option in options.items()} == expected, cell


def test_validate_cell_imports_no_torch():
    code = ("import sys; from rnnrepro.cells import validate_cell\n"
            "validate_cell('pru', {'groups': 4, 'levels': 2})\n"
            "try:\n    validate_cell('pru', {'groups': 4})\nexcept ValueError as e:\n    print(e)\n"
            "assert 'torch' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "missing option 'levels'" in out.stdout


def test_unknown_dataset_in_grid_or_budget_is_named(tmp_path, pru):
    broken_study(tmp_path, "pru", pru, lambda s: s["artifacts"]["table1"]["datasets"].append("ptbb"))
    with pytest.raises(ConfigError, match=r"artifacts.table1.datasets: unknown dataset 'ptbb'; known datasets: .*\bwt2\b"):
        load_study("pru", root=tmp_path)
    broken_study(tmp_path, "pru", pru, lambda s: s["budgets"]["smoke"]["datasets"].update(ptb="synth_ptbb"))
    with pytest.raises(ConfigError, match=r"budgets.smoke.datasets.ptb: unknown dataset 'synth_ptbb'"):
        load_study("pru", root=tmp_path)


def test_snakemake_stops_on_a_bad_cell_option_before_any_job(tmp_path):
    project = copy_project(tmp_path)
    study = project / "config" / "studies" / "pru.yaml"
    text = study.read_text()
    assert "cell_options: {groups: 4, levels: 2}" in text
    study.write_text(text.replace("cell_options: {groups: 4, levels: 2}", "cell_options: {groups: 4, levles: 2}", 1))
    planned = snakemake(project, "-n", "results/tables/pru_table1.csv")
    output = planned.stdout + planned.stderr
    assert planned.returncode != 0
    assert f"{study} is invalid" in output and "unknown option 'levles'" in output


def test_a_second_clone_reads_its_own_study_files_or_refuses_the_first_ones_code(tmp_path, monkeypatch):
    """One environment shared by two clones (the first one's editable install): a command run in the
    second reads the second's study files, and where the second's code differs from the first's, a
    command that would read them with the first's code (records, status, training, evaluation,
    notebooks) refuses, saying how to use the second's code. A copy of the same code runs."""
    import os

    from rnnrepro.configuration import project_root

    clone = copy_project(tmp_path)
    study_file = clone / "config/studies/pru.yaml"
    study_file.write_text(study_file.read_text().replace("title: ", "title: second clone's ", 1))
    monkeypatch.chdir(clone / "notebooks")  # anywhere inside the clone
    assert project_root() == clone.resolve()
    assert load_study("pru")["title"].startswith("second clone's ")
    monkeypatch.chdir(tmp_path.parent)  # outside any checkout: the package's own
    assert project_root() == REPO_ROOT

    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    same_code = subprocess.run([sys.executable, "-m", "rnnrepro.records", "list", "--budget", "cpu", "--study", "nlstm"],
                               cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert same_code.returncode == 0, same_code.stderr
    grid_module = clone / "src/rnnrepro/grid.py"
    grid_module.write_text(grid_module.read_text() + "\n# the second clone's own change\n")
    for command in (["rnnrepro.records", "list", "--budget", "cpu", "--study", "nlstm"], ["rnnrepro.status"]):
        refused = subprocess.run([sys.executable, "-m", *command], cwd=clone, env=env, capture_output=True,
                                 text=True, timeout=300)
        assert refused.returncode == 1, refused.stdout
        assert f"this command runs in {clone.resolve()}, but imports rnnrepro from {REPO_ROOT / 'src' / 'rnnrepro'}" \
            in refused.stderr and "PYTHONPATH=src" in refused.stderr, refused.stderr
    listed = subprocess.run([sys.executable, "-m", "rnnrepro.records", "list", "--budget", "cpu", "--study", "nlstm"],
                            cwd=clone, env=dict(env, PYTHONPATH=str(clone / "src")), capture_output=True, text=True,
                            timeout=300)
    assert listed.returncode == 0, listed.stderr


def test_a_key_given_twice_in_a_yaml_file_is_named_with_its_lines(tmp_path):
    """YAML keeps the last of two equal keys silently: a model pasted twice into a study file would
    replace the first. The project's loader refuses it, naming the key and both lines."""
    from rnnrepro.configuration import load_yaml

    path = tmp_path / "study.yaml"
    path.write_text("models:\n  lstm: {cell: lstm}\n  gru: {cell: gru}\n  lstm: {cell: lru}\n")
    with pytest.raises(ConfigError, match=r"study.yaml, line 4, column 3: .*key 'lstm' appears twice \(first on line 2\)"):
        load_yaml(path)
    path.write_text("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n")  # a merge key is not a duplicate
    assert load_yaml(path)["other"] == {"x": 1, "y": 2}
