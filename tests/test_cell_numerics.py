"""A cell's code is part of its identity (rnnrepro.cells.code_identity, rnnrepro.cell_identity): a built-in
cell's outputs on a fixed input are kept here per (cell, numerics version), so a change of what a cell
computes fails this file until its version is bumped (and its records go stale); a cell of your own is
known by the sha256 of its module file, so editing the file makes its records stale."""

from __future__ import annotations

import hashlib
import importlib
import json
import uuid

import pytest
import torch

from rnnrepro import grid
from rnnrepro.cell_identity import as_written_now, config_differences
from rnnrepro.cells import CELLS, NUMERICS_VERSION, build_layer
from rnnrepro.configuration import REPO_ROOT, load_run_config, load_yaml
from rnnrepro.grid import load_study  # the study with the run's cells of your own
from rnnrepro.custom_cell_checks import check_custom_cells
from rnnrepro.record_checks import record_problem

VERSIONS_FILE = "src/rnnrepro/cells/__init__.py"
# the options each cell is tried with: the studies' own (PRU's pyramid and grouped transforms, depths)
OPTIONS = {"pru": {"groups": 2, "levels": 2}, "rhn": {"recurrence_depth": 2}, "grid_lstm": {"depth": 2},
           "nested_lstm": {"depth": 2}}
# (cell, numerics version) -> sha256 of its outputs and final state on the fixed input, at 5 significant digits
EXPECTED = {
    ("atr", 1): "49ca3a1ebb7460e80ffaf954baba271e534cd057bc6c28b7b27becf8e3a2a57f",
    ("grid_lstm", 1): "c2ccaf55e52928037ddf65ad3744b558d1d6e80b00ba35cb6ac8386869f40221",
    ("gru", 1): "4b16413558e3c536f2a184e6e57415bc5213decf5b51f0e52e26b80004dbb007",
    ("gru_single_bias", 1): "9d33fc8a36d5dfa8193ce73f46d719b8455b4a51d4e77adafc6b9b3b6bb52b43",
    ("lrn", 1): "819fcc40532cf71d6b6daf5a3352d5953f31de55f640105f2ff73648b76c1a3f",
    ("lru", 1): "031355e8c3311ab2c93cc4198dd203087eb887b8a55e345486c1d36c696be47a",
    ("lstm", 1): "fcba8299097d4583bf724ec988fecbdd08bdc006ad8aa9438bf3ecdc591abd70",
    ("lstm_single_bias", 1): "43810fac4deb58c1291a69f08243802cbc3de2e104c38e09a26cfb81cce73ce3",
    ("nested_lstm", 1): "39cc146c4621f4a288a22adc7f8ba435f92ca4847f3a5c52cfd1588b8f522681",
    ("pru", 1): "1b35042d66da43467a13c04e290800ae7c46707695bdb8473c55334f3d9e78ce",
    ("ps_lru", 1): "6ae15a45c0a7f05c4fc81eb3480da002aeb59436313c2f6d7d1365a6b8920207",
    ("rg_lru", 1): "4ad5023e0a4989c33390bd74c8ed885cc4c3a4523c666bf0e9ce03faa1492d53",
    ("rhn", 1): "748f1df3e3339d6ba1bedd2a06296e581bedad47ebf1e83acc5187dc89a14b4c",
    ("sru", 1): "44dd19a92e61a9e54acfe0181d3f2d15cc9e20c4592fce4f3494634d7cefd91e",
}


def outputs(cell: str, perturb: float = 0.0) -> list[float]:
    """A cell's outputs and final state, in float64, for weights and an input drawn from seed 0 (eval mode:
    no dropout), every weight scaled by ``1 + perturb``."""
    torch.manual_seed(0)
    layer = build_layer(cell, 8, 8, **OPTIONS.get(cell, {})).double().eval()
    with torch.no_grad():
        for weight in layer.parameters():
            weight.mul_(1 + perturb)
        x = torch.randn(5, 3, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        out, state = layer(x, layer.init_state(3, dtype=torch.float64))
    parts = [out, *(state if isinstance(state, (tuple, list)) else [state])]
    return [value for part in parts for value in part.double().flatten().tolist()]


def digest(values: list[float]) -> str:
    """The sha256 of values written to 5 significant digits: the last bits a CPU's or torch release's
    kernels change fall far below them (outputs of order 0.1 differ there by ~1e-16); -0.0 is written 0."""
    return hashlib.sha256(" ".join(f"{v + 0.0:.5g}" for v in values).encode()).hexdigest()


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_a_cells_outputs_change_only_with_its_numerics_version(cell):
    version = NUMERICS_VERSION[cell]
    found = digest(outputs(cell))
    assert (cell, version) in EXPECTED, (
        f"cell {cell!r} at numerics version {version} has no expected outputs: add ({cell!r}, {version}): "
        f"{found!r} to EXPECTED in tests/test_cell_numerics.py")
    assert found == EXPECTED[(cell, version)], (
        f"the outputs of cell {cell!r} changed ({found}, expected {EXPECTED[(cell, version)]}) but its numerics "
        f"version is still {version}: bump the cell's numerics version in {VERSIONS_FILE} (NUMERICS_VERSION), "
        f"so its records go stale and train again, and add its new outputs to EXPECTED here; or undo the change")


def test_every_built_in_cell_has_a_version_and_the_digest_sees_changes_not_rounding():
    assert set(NUMERICS_VERSION) == set(CELLS)
    assert all(isinstance(v, int) and v >= 1 for v in NUMERICS_VERSION.values())
    assert digest(outputs("lstm", 1e-13)) == digest(outputs("lstm"))  # a last-bits difference, as between CPUs
    assert digest(outputs("lstm", 1e-3)) != digest(outputs("lstm"))   # a change of what the cell computes


def cpu_pru(custom: dict | None = None) -> tuple[dict, dict]:
    config = load_run_config({**load_yaml(REPO_ROOT / "config" / "config.yaml"), "budget": "cpu"})
    plain = {"pru": load_study("pru", custom_cells={})}
    if custom:
        check_custom_cells(custom, plain, "custom.yaml")
        return config, {"pru": load_study("pru", custom_cells=custom, custom_source="custom.yaml")}
    return config, plain


def write_record(root, config: dict, cell: grid.Cell, cfg: dict, git_sha: str = "") -> None:
    run = root / "records" / "cpu" / "runs" / cell.key
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(cfg))
    (run / "history.csv").write_text("epoch,train_loss,train_ppl,val_loss,val_ppl,lr,averaging,seconds,tokens_per_s\n"
                                     "1,5.8,330.3,5.7,298.9,30.0,False,60.0,1500.0\n")
    (run / "metrics.json").write_text(json.dumps({
        "study": cell.study, "dataset": cfg["dataset"], "corpus": cell.corpus, "model": cell.model, "fraction": cell.fraction,
        "seed": cell.seed, "budget": cell.budget, "params": 559568, "epochs": 1, "wall_seconds": 60.0,
        "val_loss": 5.7, "val_ppl": 298.9, "test_loss": 5.65, "test_ppl": 284.3,
        **({"git_sha": git_sha} if git_sha else {})}))


def test_a_record_made_before_numerics_versions_is_of_version_1(tmp_path, monkeypatch):
    config, studies = cpu_pru()
    cell = grid.Cell("pru", "ptb", "lstm_m1000__lrx1", 10, 1000, "cpu")
    resolved = grid.resolve_cell(studies["pru"], config, cell)
    assert resolved["architecture"]["cell_numerics"] == NUMERICS_VERSION["lstm"] == 1
    before = json.loads(json.dumps(resolved))
    del before["architecture"]["cell_numerics"]
    assert config_differences(before, resolved) == []
    assert as_written_now(before, resolved) == resolved  # the trainer resumes its checkpoint
    write_record(tmp_path, config, cell, before)
    assert record_problem(studies["pru"], config, cell, tmp_path / "records") is None
    # the LSTM's numbers change (its version goes to 2): the record of version 1 is stale, and says why
    monkeypatch.setitem(NUMERICS_VERSION, "lstm", 2)
    problem = record_problem(studies["pru"], config, cell, tmp_path / "records")
    assert problem and "stale record (the numerics version of cell lstm changed (1 -> 2" in problem, problem


def test_editing_a_cell_of_your_own_makes_its_records_stale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = f"own_mgu_{uuid.uuid4().hex[:8]}"  # a fresh name: no earlier import of it is cached
    source = tmp_path / f"{module}.py"
    source.write_text((REPO_ROOT / "examples" / "mgu.py").read_text())
    importlib.invalidate_caches()
    custom = {"mgu": {"cell": f"{module}:MGULayer", "cell_options": {},
                      "studies": {"pru": {"like": "lstm_m1000", "artifacts": ["table1"]}}}}
    config, studies = cpu_pru(custom)
    cell = grid.Cell("pru", "ptb", "mgu__lrx1", 10, 1000, "cpu")
    resolved = grid.resolve_cell(studies["pru"], config, cell)
    assert resolved["architecture"]["cell_source"] == source.name
    assert resolved["architecture"]["cell_source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    write_record(tmp_path, config, cell, resolved)
    assert record_problem(studies["pru"], config, cell, tmp_path / "records") is None
    source.write_text(source.read_text() + "\n# a changed line\n")
    edited = grid.resolve_cell(studies["pru"], config, cell)
    assert edited != resolved  # the train rule's params: Snakemake trains the cell again
    problem = record_problem(studies["pru"], config, cell, tmp_path / "records")
    assert problem and f"stale record (the code of mgu changed ({source.name})" in problem, problem


def test_a_record_of_your_own_cell_made_before_its_sha_is_checked_against_its_commit(tmp_path, monkeypatch):
    """A config recorded before ``cell_source_sha256`` was written: its module as the record's commit held it
    (examples/mgu.py at HEAD here) is what it was made from."""
    import subprocess

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()
    monkeypatch.chdir(REPO_ROOT)
    committed = subprocess.run(["git", "show", "HEAD:./examples/mgu.py"], capture_output=True).stdout
    custom = load_yaml(REPO_ROOT / "examples" / "mgu.yaml")["custom_cells"]
    custom["mgu"]["studies"] = {"pru": custom["mgu"]["studies"]["pru"]}
    config, studies = cpu_pru(custom)
    cell = grid.Cell("pru", "ptb", "mgu__lrx1", 10, 1000, "cpu")
    resolved = grid.resolve_cell(studies["pru"], config, cell)
    before = json.loads(json.dumps(resolved))
    del before["architecture"]["cell_source_sha256"], before["architecture"]["cell_source"]
    same = committed == (REPO_ROOT / "examples" / "mgu.py").read_bytes()
    assert (config_differences(before, resolved, head) == []) == same
    assert config_differences(before, resolved, "") != []  # no commit: the code that made it is unknown
