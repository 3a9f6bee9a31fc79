"""The commands a user types and what they answer: where each budget's results live, a target of another
budget or a misspelt one, the run config's budget against the profile's, the rules' shell commands, a
YAML mistake in the config file, and the messages of `status` and `records grow` / `records list`.
Dry runs and in-process calls; the one real job (a folder and an interpreter whose paths have spaces,
without the environment on PATH) is in tests/test_make.py."""

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import copy_project, run_here, snakemake

from rnnrepro import command_line, grid, layout, records, status, targets
from rnnrepro.configuration import REPO_ROOT, ConfigError, budgets, load_run_config, load_study, load_yaml

STUDY_NAMES = ["pru", "nlstm", "lru", "lrn"]


@pytest.fixture(scope="module")
def studies():
    return {name: load_study(name) for name in STUDY_NAMES}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project copy with examples/ (for dry runs; none of them writes a file)."""
    folder = copy_project(tmp_path_factory.mktemp("commands"))
    shutil.copytree(REPO_ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


# --- where each budget's results live ---------------------------------------------------------------

def test_the_config_files_budget_owns_results_and_every_other_budget_its_own_folder():
    """The commands the docs give (`snakemake results/tables/pru_table1.csv`) build the default
    configuration's budget; budgets never share a tree, and none is named like a part of another's."""
    assert layout.DEFAULT_BUDGET == load_yaml(REPO_ROOT / "config/config.yaml")["budget"]
    assert grid.results_dir(layout.DEFAULT_BUDGET) == "results" and grid.logs_dir(layout.DEFAULT_BUDGET) == "logs"
    others = [b for b in budgets() if b != layout.DEFAULT_BUDGET]
    assert "smoke" in others and "cpu_wide" in others
    assert [grid.results_dir(b) for b in others] == [f"results/{b}" for b in others]
    assert [grid.logs_dir(b) for b in others] == [f"logs/{b}" for b in others]
    assert not set(budgets()) & layout.RESERVED_NAMES
    assert grid.Cell("pru", "ptb", "lstm_m1000", 100, 1, "paper").run_dir == "results/runs/pru/ptb/lstm_m1000/frac100/seed1"


def test_budgets_with_results_and_what_an_earlier_layout_left(tmp_path):
    for folder in ("results/runs/pru/synth_ptb", "results/smoke/runs", "results/cpu/speed", "results/tables",
                   "results/paper/runs", "results/notes"):
        (tmp_path / folder).mkdir(parents=True)
    assert grid.budgets_with_results(tmp_path) == ["paper", "cpu", "smoke"]
    lines = grid.earlier_layout(tmp_path)
    assert len(lines) == 2
    assert "holds smoke runs on synthetic corpora" in lines[0] and "results/smoke/runs/<study>/" in lines[0]
    assert f"mv {tmp_path}/results/paper/* {tmp_path}/results/" in lines[1]


# --- targets ------------------------------------------------------------------------------------------

def asked(targets_: list[str], studies: dict, budget: str = "paper") -> list[str]:
    rules = ["all", "claims", "train_cell", "notebook_pru_table1"]
    return targets.problems(targets_, studies, budget, budgets(), rules,
                            lambda paths, owner: f"<command for {' '.join(paths)} at {owner}>", STUDY_NAMES)


def test_targets_the_workflow_makes_pass(studies):
    assert asked(["results/tables/pru_table1.csv", "results/figures/pru_fig1.png", "./results/tables/claims.csv",
                  "results/notebooks/lrn_lm.ipynb", "results/speed/lrn.json", "all", "notebook_pru_table1",
                  "results/runs/pru/ptb/lstm_m1000/frac100/seed1111/metrics.json",
                  "results/runs/pru/ptb/pru_g4_k2_m1400/frac100/seed7/dynamic_eval.json",
                  "data/processed/ptb/train.txt", "logs/x.log"], studies) == []
    assert asked(["results/smoke/tables/pru_table1.csv", "results/smoke/runs/lru/synth_char_small-ptb_char/"
                  "lru_24m/frac100/seed1111/metrics.json"], studies, "smoke") == []
    assert asked(["results/cpu_wide/tables/pru_table1.csv"], studies, "cpu_wide") == []


@pytest.mark.parametrize("target, budget, said", [
    ("results/cpu/tables/pru_table1.csv", "paper",
     "results/cpu/tables/pru_table1.csv is budget cpu's (results/cpu/), but this run's budget is paper (whose "
     "results are in results/). Build it with: <command for results/cpu/tables/pru_table1.csv at cpu>"),
    ("results/tables/pru_table1.csv", "smoke", "is budget paper's (results/), but this run's budget is smoke"),
    ("results/tables/pru_tabel1.csv", "paper", "results/tables/pru_tabel1.csv: no rule makes it; the nearest: "
                                               "results/tables/pru_table1.csv"),
    ("results/smok/tables/pru_table1.csv", "smoke", "the nearest: results/smoke/tables/pru_table1.csv"),
    ("results/smoke/figures/lru_curve.png", "smoke", "the nearest: results/smoke/figures/lru_curves.png"),
    ("results/runs/pru/ptb/lstm_m1001/frac100/seed1111/metrics.json", "paper",
     "study pru has no model 'lstm_m1001'; the nearest: "),
    ("results/runs/pru/ptbb/lstm_m1000/frac100/seed1111/metrics.json", "paper",
     "study pru has no corpus 'ptbb' at budget paper; did you mean 'ptb'?"),
    ("results/runs/pru/ptb/lstm_m1000/frac100/seed1111/metric.json", "paper", "no rule makes 'metric.json'"),
    ("results/runs/prx/ptb/lstm_m1000/frac100/seed1111/metrics.json", "paper", "no study 'prx' at budget paper"),
    ("results/cpu/tables/pru_table3.csv", "cpu", "artifact pru_table3 is not built at budget cpu (its `omit:`"),
    ("results/cpu/tables/lrn_calibration.csv", "cpu",
     "artifact lrn_calibration is not built at budget cpu (config/studies/lrn.yaml builds it at budgets paper, "
     "paper_start, smoke only)"),
    ("alll", "paper", "alll: no rule and no file of that name; the nearest rules: all"),
    ("results/claims_by_budget.png", "paper", "drawn by `python -m rnnrepro.records render --budget <budget>"),
    ("results/cpu_wide/tables/nlstm_test.csv", "cpu_wide", "study nlstm has no budget cpu_wide (its budgets: "),
    ("results/cpu_wide/runs/nlstm/x/m/frac100/seed1/metrics.json", "cpu_wide", "study nlstm has no budget cpu_wide"),
    (f"{Path.cwd()}/results/tables/pru_table1.csv", "paper", "give the target relative to the project folder"),
])
def test_a_target_the_workflow_cannot_make_is_named_with_the_fix(studies, target, budget, said):
    found = asked([target], studies, budget)
    assert len(found) == 1 and said in found[0], found


def test_a_target_of_a_study_the_run_leaves_out_names_the_setting(studies):
    found = asked(["results/tables/lru_accuracy.csv", "results/runs/lru/ptb_char/gru_24m/frac100/seed1/metrics.json"],
                  {"pru": studies["pru"]})
    assert len(found) == 2 and all("study lru is not among this run's studies (pru); add it to `studies` "
                                   "(config/config.yaml, or --config studies=[pru,lru])" in line for line in found)


def test_a_target_of_another_budget_gets_the_command_that_builds_it(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the profiles are read from the project folder
    argv = ["snakemake", "-n", "--cores", "8", "results/cpu/tables/pru_table1.csv", "--config", "budget=paper",
            "data_mirror=/m"]
    assert command_line.command_for(["results/cpu/tables/pru_table1.csv"], "cpu", argv) == (
        "snakemake results/cpu/tables/pru_table1.csv -n --cores 8 --config data_mirror=/m budget=cpu")
    assert command_line.command_for(["results/smoke/tables/x.csv"], "smoke", argv) == (
        "snakemake results/smoke/tables/x.csv --profile profiles/smoke -n --config data_mirror=/m")
    smoke = ["snakemake", "--profile", "profiles/smoke", "--forcerun", "claims", "--", "results/cpu/tables/x.csv"]
    assert command_line.command_for(["results/cpu/tables/x.csv"], "cpu", smoke) == (
        "snakemake results/cpu/tables/x.csv --profile profiles/smoke --forcerun claims --config budget=cpu")
    assert command_line.command_for(["a b.csv"], "cpu", ["python"]) == "snakemake 'a b.csv' --cores 2 --config budget=cpu"
    assert command_line.named_jobs(["snakemake", "--forcerun", "a", "b", "--until", "c", "--", "t"]) == {
        "--forcerun": ["a", "b"], "--until": ["c"]}


def test_snakemake_names_a_wrong_target_before_it_plans(project):
    wrong = snakemake(project, "-n", "--forcerun", "notebook_pru_tabel1", "--", "results/tables/pru_tabel1.csv",
                      "results/smoke/tables/pru_table1.csv")
    said = wrong.stdout + wrong.stderr
    assert wrong.returncode != 0
    assert "results/tables/pru_tabel1.csv: no rule makes it; the nearest: results/tables/pru_table1.csv" in said
    assert ("results/smoke/tables/pru_table1.csv is budget smoke's (results/smoke/), but this run's budget is paper "
            "(whose results are in results/). Build it with: snakemake results/smoke/tables/pru_table1.csv "
            "--profile profiles/smoke -n --forcerun notebook_pru_tabel1") in said
    assert "--forcerun notebook_pru_tabel1: no rule and no file of that name; the nearest rules: notebook_pru_table1" in said
    assert "MissingRuleException" not in said and "Building DAG" not in said


def test_training_cells_a_command_needs(studies):
    config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": "smoke"})
    smoke = grid.studies_with_budget(studies, "smoke")
    table1 = targets.training_cells(smoke, config, ["results/smoke/tables/pru_table1.csv"])
    assert table1 == grid.artifact_cells(smoke["pru"], config, "table1")
    every = targets.training_cells(smoke, config, [])
    assert set(table1) < set(every) and targets.training_cells(smoke, config, ["all"]) == every
    finetuned = targets.training_cells(smoke, config, ["results/smoke/tables/lrn_lm.csv"])
    assert len(finetuned) == len(set(finetuned))
    assert any(grid.parent_cell(smoke["lrn"], cell) in finetuned for cell in finetuned)  # parents come along


# --- the run config's budget against the profile's -------------------------------------------------------

@pytest.mark.parametrize("arguments, said", [
    (["--profile", "profiles/smoke", "all", "--configfile", "examples/mgu.yaml"],
     "not smoke as profiles/smoke sets (--configfile examples/mgu.yaml replaced the profile's "
     "profiles/smoke/run-config.yaml; to keep smoke, give both: --configfile profiles/smoke/run-config.yaml "
     "examples/mgu.yaml)"),
    (["--profile", "profiles/smoke", "all", "--config", "budget=cpu"], "not smoke as profiles/smoke sets (--config budget=cpu)"),
    (["--profile", "profiles/smoke", "all", "--configfile", "profiles/smoke/run-config.yaml", "examples/mgu.yaml"], None),
    (["--profile", "profiles/smoke", "all"], None),
    (["--cores", "2", "all", "--configfile", "examples/mgu.yaml"], None),
])
def test_a_profiles_budget_replaced_is_named(monkeypatch, arguments, said):
    monkeypatch.chdir(REPO_ROOT)
    budget = "cpu" if "budget=cpu" in arguments else ("smoke" if said is None and "profiles/smoke" in arguments
                                                       else "paper")
    assert command_line.replaced_budget(budget, "config/config.yaml", ["snakemake", *arguments]) == said


@pytest.mark.slow
def test_the_replaced_budget_is_said_in_one_line_with_the_jobs_it_plans(project):
    run = snakemake(project, "-n", "--profile", "profiles/smoke", "results/tables/pru_table1.csv",
                    "--configfile", "examples/mgu.yaml")
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("[rnnrepro] budget")]
    assert run.returncode == 0 and len(lines) == 1, run.stderr[-2000:]
    cells = re.search(r"the targets need (\d+) training cells, (\d+) of them not trained yet", lines[0])
    planned = re.search(r"^train_cell\s+(\d+)$", run.stdout, re.M)
    assert cells and planned and cells.group(2) == planned.group(1) != "0", lines[0]
    assert lines[0].startswith("[rnnrepro] budget paper, not smoke as profiles/smoke sets")
    # the default configuration's budget builds results/tables/pru_table1.csv, as the docs say
    assert "results/runs/pru/ptb/lstm_m1000/frac100/seed1111/metrics.json" in run.stdout


# --- the rules' shell commands ---------------------------------------------------------------------------

# Placeholders left unquoted: ids (wildcards, names), numbers, JSON-free words, and the data rules' paths,
# which are relative and made of ids (their commands are kept as they were: a changed command reruns the
# job and every cell trained on its output).
UNQUOTED = {"wildcards.dataset", "wildcards.fraction", "wildcards.evaluation", "params.study", "params.artifact",
            "params.tokenizer", "threads"}
DATA_RULES = {"prepare_dataset": {"input", "log"}, "fraction_subset": {"input", "output", "log"},
              "prepare_text8style": {"input", "log"}, "prepare_autocomplete": {"params.source", "log"}}


def placeholders(literal: str) -> str:
    """A string literal of a shell command as Snakemake sees it: an f-string's {{x}} is Snakemake's {x},
    its {x} a value Python puts in when the file is read."""
    text = literal[2:-1] if literal.startswith("f") else literal[1:-1]
    if literal.startswith("f"):
        text = re.sub(r"(?<!\{)\{[^{}]*\}(?!\})", "", text.replace("{{", "\0").replace("}}", "\1"))
        text = text.replace("\0", "{").replace("\1", "}")
    return text


def shell_commands() -> dict[str, str]:
    """Each rule's shell command, as written in workflow/rules/*.smk (string literals joined)."""
    found = {}
    for smk in sorted((REPO_ROOT / "workflow/rules").glob("*.smk")):
        for block in re.split(r"^\s*rule\b", smk.read_text(), flags=re.M)[1:]:
            name = re.match(r"\s*(\w+)?:", block).group(1) or re.search(r'name:\s*\n\s*f?"([^"{]+)', block).group(1)
            shell = re.search(r"^\s+shell:\n((?:\s+f?\".*\"\n)+)", block, re.M)
            if shell:
                found[name] = "".join(placeholders(m) for m in re.findall(r'f?".*"', shell.group(1)))
    return found


def test_every_path_in_the_rules_commands_is_quoted():
    commands = shell_commands()
    assert {"fetch_dataset", "train_cell", "evaluate_cell", "speed", "claims", "notebook_"} <= set(commands), commands
    for rule, command in commands.items():
        for placeholder in re.findall(r"\{([^{}:]+)(:q)?\}", command):
            name, quoted = placeholder
            allowed = UNQUOTED | DATA_RULES.get(rule, set())
            assert quoted or name in allowed, f"rule {rule}: {{{name}}} is not quoted (write {{{name}:q}})"


def test_fetch_takes_the_trust_switch_from_the_environment_the_workflow_sets(monkeypatch):
    """The workflow hands trust_unverified_downloads to the fetch job through RNNREPRO_TRUST_UNVERIFIED
    (a changed command or param would refetch and retrain)."""
    from rnnrepro.data.__main__ import _parser

    monkeypatch.delenv("RNNREPRO_TRUST_UNVERIFIED", raising=False)
    assert not _parser().parse_args(["fetch", "ptb", "--dest", "d"]).trust_unverified
    monkeypatch.setenv("RNNREPRO_TRUST_UNVERIFIED", "1")
    assert _parser().parse_args(["fetch", "ptb", "--dest", "d"]).trust_unverified
    common = (REPO_ROOT / "workflow/rules/common.smk").read_text()
    source = common[common.index("DATA_SOURCE = "):common.index("shell.prefix(")]
    assert "TRUST_ENV}=1" in source and 'config["trust_unverified_downloads"]' in source


# --- a YAML mistake ------------------------------------------------------------------------------------------

def test_a_yaml_mistake_in_the_config_file_is_named_with_its_line(tmp_path):
    project = copy_project(tmp_path)
    config = project / "config/config.yaml"
    lines = config.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("seeds:"))
    lines[at] = "seeds: [1111"
    config.write_text("\n".join(lines) + "\n")
    run = snakemake(project, "-n")
    said = run.stdout + run.stderr
    assert run.returncode != 0
    assert re.search(r"config/config.yaml, line \d+, column \d+: not valid YAML \(.*flow sequence at line "
                     rf"{at + 1}, column 8\)", said), said[-2000:]
    # the project's own commands read it with the same loader
    result = run_here_in(project, status.main, [])
    assert result.returncode == 1 and "config/config.yaml, line" in result.stderr and "Traceback" not in result.stderr


def test_a_config_file_of_the_command_line_that_cannot_be_read_is_named(project):
    (project / "mine.yaml").write_text("custom_cells:\n  mgu:\n    cell: examples.mgu:MGULayer\n   studies: {}\n")
    run = snakemake(project, "-n", "--configfile", "mine.yaml", "missing.yaml", "all")
    assert run.returncode == 1
    assert run.stderr.splitlines()[-3:] == [
        "[rnnrepro] error: mine.yaml, line 4, column 4: not valid YAML (did not find expected key; while parsing a "
        "block mapping at line 2, column 3). Fix the file there (mind the indentation and the brackets)",
        f"[rnnrepro] error: config file missing.yaml does not exist (paths are read from {project}; --configfile "
        "takes every word up to the next option: put targets before it)",
        f"[rnnrepro] error: config file all does not exist (paths are read from {project}; --configfile "
        "takes every word up to the next option: put targets before it)"]


def test_a_config_file_that_is_a_list_or_empty_is_named(tmp_path, monkeypatch, capsys):
    """Snakemake says only "Config file must be given as JSON or YAML with keys at top level"; records'
    commands met a TypeError."""
    monkeypatch.chdir(tmp_path)
    Path("list.yaml").write_text("- custom_cells\n- mgu\n")
    Path("empty.yaml").write_text("")
    with pytest.raises(SystemExit) as stopped:
        command_line.stop_on_unreadable_config_files(["snakemake", "-n", "--configfile", "list.yaml", "empty.yaml"])
    assert str(stopped.value).splitlines() == [
        "[rnnrepro] error: list.yaml: the config file is a list, not keys and values: a config file holds keys at "
        "its top level, e.g. `custom_cells:` (docs/custom_cells.md) or `budget: cpu`",
        "[rnnrepro] error: empty.yaml: the config file is empty: a config file holds keys at its top level, e.g. "
        "`custom_cells:` (docs/custom_cells.md) or `budget: cpu`"]
    monkeypatch.chdir(REPO_ROOT)
    result = run_here(records.main, ["list", "--budget", "cpu", "--configfile", str(tmp_path / "list.yaml")])
    assert result.returncode == 1 and f"{tmp_path}/list.yaml: the config file is a list" in result.stderr, result.stderr


def test_the_config_files_a_command_line_names(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    assert command_line.named_config_files(["snakemake", "-n", "--configfile", "a.yaml", "b.yaml", "-p", "t",
                                            "--configfile=c.yaml", "--profile", "profiles/smoke"]) == [
        Path("a.yaml"), Path("b.yaml"), Path("c.yaml"), Path("profiles/smoke/run-config.yaml")]
    assert command_line.named_config_files(["snakemake", "--cores", "2", "all"]) == []


def run_here_in(folder: Path, main, args: list[str]):
    import os

    here = os.getcwd()
    os.chdir(folder)
    try:
        return run_here(main, args)
    finally:
        os.chdir(here)


def test_every_yaml_file_the_project_reads_names_the_line_of_a_mistake(tmp_path):
    broken = tmp_path / "study.yaml"
    broken.write_text("study: x\nmodels:\n  a: {cell: lstm\n  b: 1\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(broken))}, line 4, column \d+: not valid YAML"):
        load_yaml(broken)


# --- status ---------------------------------------------------------------------------------------------------

@pytest.fixture
def status_tree(tmp_path, monkeypatch):
    shutil.copytree(REPO_ROOT / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def progress_of(tree: Path, **record) -> Path:
    run_dir = tree / grid.Cell("pru", "synth_ptb", "lstm_m1000", 100, 1111, "smoke").run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "progress.json").write_text(json.dumps({"state": "running", "updated_at": "2026-01-01T00:00:00+00:00",
                                                      **record}))
    return run_dir


@pytest.mark.parametrize("record, named", [
    ({"eta_seconds": "600"}, "key 'eta_seconds' is '600', not a finite number"),
    ({"epoch": "2", "epochs": "6"}, "key 'epoch' is '2'"),
    ({"best_val_ppl": float("inf")}, "key 'best_val_ppl' is inf"),
    ({"seconds": True}, "key 'seconds' is True"),
    ({"pid": "4242", "host": "here"}, "key 'pid' is '4242', not a process id"),
    ({"updated_at": 5}, "key 'updated_at' is 5, not text"),
])
def test_status_names_a_progress_file_whose_values_have_the_wrong_type(status_tree, record, named):
    progress_of(status_tree, **record)
    result = run_here(status.main, ["--budget", "smoke", "--study", "pru", "--format", "csv"])
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if ",lstm_m1000,100,1111," in line and "synth_ptb" in line)
    assert ",failed," in row and named in row and "progress.json is damaged" in row


def test_status_names_an_unknown_budget_and_artifact(status_tree):
    result = run_here(status.main, ["--budget", "smok"])
    assert result.returncode == 1
    assert "--budget smok: no such budget; did you mean smoke? (the budgets are paper, reduced, cpu" in result.stderr
    assert "config/config.yaml" not in result.stderr
    result = run_here(status.main, ["--artifact", "foo_bar"])
    assert result.returncode == 1 and "--artifact foo_bar: no such artifact" in result.stderr
    assert "--study" not in result.stderr and "pru_table1" in result.stderr  # the artifacts there are
    result = run_here(status.main, ["--artifact", "pru_tabel1", "--budget", "smoke"])
    assert "--artifact pru_tabel1: no such artifact; the nearest: pru_table1" in result.stderr
    result = run_here(status.main, ["--artifact", "nlstm_test", "--budget", "cpu_wide"])
    assert result.returncode == 1 and "--artifact nlstm_test: study nlstm has no budget cpu_wide" in result.stderr
    result = run_here(status.main, ["--artifact", "pru_table1", "--budget", "smoke", "--format", "csv"])
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 1 + len(
        grid.artifact_cells(load_study("pru"), {"budget": "smoke", "seeds": [1111]}, "table1"))


def test_status_without_a_budget_shows_the_budgets_that_have_results(status_tree):
    result = run_here(status.main, ["--study", "nlstm"])
    assert result.returncode == 0
    assert "no budget has results here yet: the grid of budget paper (config/config.yaml); --budget B" in result.stderr
    progress_of(status_tree, epoch=1)
    (status_tree / "results/cpu/runs").mkdir(parents=True)
    result = run_here(status.main, ["--study", "pru"])
    assert result.returncode == 0 and "no budget has results" not in result.stderr
    headings = [line for line in result.stdout.splitlines() if line.startswith("budget ")]
    assert headings == ["budget cpu (results/cpu/runs/):", "budget smoke (results/smoke/runs/):"]
    table = run_here(status.main, ["--study", "pru", "--format", "csv"]).stdout.splitlines()
    assert table[0].startswith("budget,study,") and {line.split(",")[0] for line in table[1:]} == {"cpu", "smoke"}


def test_status_passes_over_a_results_folder_named_like_no_budget(status_tree):
    (status_tree / "results/old_copy/runs").mkdir(parents=True)
    (status_tree / "results/smoke/runs").mkdir(parents=True)
    result = run_here(status.main, ["--study", "nlstm"])
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("budget ")] == [
        "budget smoke (results/smoke/runs/):"]


def test_status_read_by_a_reader_that_stops_early_ends_quietly(status_tree):
    """`python -m rnnrepro.status | head`: the reader goes away before the table is written."""
    import subprocess

    reader = subprocess.Popen([sys.executable, "-m", "rnnrepro.status", "--budget", "paper"], cwd=status_tree,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader.stdout.close()
    _, err = reader.communicate(timeout=120)
    assert reader.returncode == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


# --- records grow and records list ----------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, said", [
    (["--threads", "0"], "argument --threads: 0: give a number above 0"),
    (["--jobs", "0"], "argument --jobs: 0: give a number above 0"),
    (["--minutes", "0"], "argument --minutes: 0: give a number above 0"),
    (["--minutes", "-5"], "argument --minutes: -5: give a number above 0"),
    (["--minutes", "nan"], "argument --minutes: nan: give a number above 0"),
    (["--jobs", "two"], "argument --jobs: 'two' is not a number"),
])
def test_grow_refuses_counts_and_times_that_do_nothing(capsys, arguments, said):
    with pytest.raises(SystemExit) as stopped:
        records.main(["grow", "--budget", "cpu", "--minutes", "10", *arguments])
    assert stopped.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize("setting, said", [
    ("foo=1", "the command line (--config foo=1) is invalid:\n  unknown key 'foo'"),
    ("precision=bf17", "the command line (--config precision=bf17) is invalid:\n  key 'precision': 'bf17'"),
    ("threads=2", "--config threads=2: give the threads with --threads"),
    ("budget=paper", "--config budget=paper: give the budget with --budget"),
    ("data_mirror", "--config data_mirror: write KEY=VALUE"),
])
def test_grow_checks_its_config_settings_before_any_run(monkeypatch, setting, said):
    monkeypatch.chdir(REPO_ROOT)  # reads config/config.yaml; stops before anything is run or written
    result = run_here(records.main, ["grow", "--budget", "cpu", "--minutes", "10", "--config", setting])
    assert result.returncode == 1 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_records_commands_name_an_unknown_budget(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    for command in (["list", "--budget", "smok"], ["grow", "--budget", "smok", "--minutes", "1"],
                    ["render", "--budget", "smok"], ["pack", "--budget", "smok"]):
        result = run_here(records.main, command)
        assert result.returncode == 1 and "--budget smok: no such budget; did you mean smoke?" in result.stderr


def test_a_failed_unit_shows_the_error_of_the_job_that_failed(tmp_path):
    """grow reports a unit's failure with the failing job's own last lines (they were two logs deep: the
    unit's Snakemake log names the job's log), or the Snakemake log's where it stopped before any job."""
    job_log = tmp_path / "logs/data/fetch_ptb.log"
    job_log.parent.mkdir(parents=True)
    job_log.write_text("fetching ptb\n[rnnrepro] error: data mirror '/nowhere' is neither a directory nor a URL\n")
    unit_log = tmp_path / "unit.log"
    unit_log.write_text(f"Error in rule fetch_dataset:\n    jobid: 3\n    log: {job_log} (check log file(s) for error "
                        "details)\n    shell:\n        python -m rnnrepro.data fetch ptb\nWorkflowError:\nAt least one "
                        "job did not complete successfully.\n")
    said = records.why_it_failed(unit_log)
    assert said == f"\n  {job_log}:\n    fetching ptb\n    [rnnrepro] error: data mirror '/nowhere' is neither a " \
                   "directory nor a URL"
    unit_log.write_text('WorkflowError in file x:\nthe command line (--config foo=1) is invalid:\n  File "x", line 3\n')
    assert records.why_it_failed(unit_log).endswith("the command line (--config foo=1) is invalid:")
    assert records.why_it_failed(tmp_path / "no.log") == ""


def test_records_list_advises_a_damaged_record_in_records_own_terms(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    config, studies = records._load("cpu", Path("config/config.yaml"), ["pru"])
    cell = records.units(studies, config)[0].cells[0]
    record = tmp_path / "cpu/runs" / cell.key
    record.mkdir(parents=True)
    (record / "config.json").write_text(json.dumps(grid.resolve_cell(studies["pru"], config, cell)))
    (record / "history.csv").write_text("epoch\n1\n")
    (record / "metrics.json").write_text('{"study": "pru", "val_ppl": ')
    result = run_here(records.main, ["--records", str(tmp_path), "list", "--budget", "cpu", "--study", "pru"])
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if cell.key in line)
    assert line.startswith("damaged") and "damaged record" in line and "metrics.json is not valid JSON" in line
    assert f"git checkout -- {record}" in line and "records grow" in line
    assert "--force" not in result.stdout and "snakemake" not in line
