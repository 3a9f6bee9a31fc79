"""The precision setting: every backend the cells use gets the same float32 arithmetic; which cells run
bf16 on which device (the table, the config check, the start-up check)."""

import json
import os
import platform
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import copy_project, snakemake

from rnnrepro import grid, precision
from rnnrepro.cells import CELLS, build_layer
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_study


@pytest.fixture(autouse=True)
def restore_backend_flags():
    """apply() is process-wide: put torch's flags back so later tests see the defaults."""
    saved = {
        "matmul": torch.backends.cuda.matmul.fp32_precision,
        "rnn": torch.backends.cudnn.rnn.fp32_precision,
        "conv": torch.backends.cudnn.conv.fp32_precision,
    }
    yield
    torch.backends.cuda.matmul.fp32_precision = saved["matmul"]
    torch.backends.cudnn.rnn.fp32_precision = saved["rnn"]
    torch.backends.cudnn.conv.fp32_precision = saved["conv"]


def test_fp32_sets_every_backend_to_ieee():
    precision.apply("fp32")
    record = precision.describe("fp32")
    assert record == {
        "precision": "fp32",
        "autocast_dtype": None,
        "cuda_matmul_fp32": "ieee",
        "cudnn_rnn_fp32": "ieee",
        "cudnn_conv_fp32": "ieee",
    }


def test_tf32_sets_every_backend_to_tf32():
    precision.apply("tf32")
    record = precision.describe("tf32")
    assert {record[k] for k in ("cuda_matmul_fp32", "cudnn_rnn_fp32", "cudnn_conv_fp32")} == {"tf32"}


def test_bf16_keeps_fp32_backends_and_autocasts():
    precision.apply("bf16")
    record = precision.describe("bf16")
    assert record["autocast_dtype"] == "bfloat16" and record["cudnn_rnn_fp32"] == "ieee"
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with precision.autocast("bf16", "cpu"):
        assert (a @ b).dtype == torch.bfloat16
    with precision.autocast("fp32", "cpu"):
        assert (a @ b).dtype == torch.float32


def test_unknown_precision_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"'fp16'.*fp32, tf32, bf16"):
        precision.apply("fp16")


@pytest.mark.parametrize("name", ["fp32", "tf32"])
def test_cpu_numbers_do_not_change(name):
    torch.manual_seed(0)
    cell = build_layer("pru", 16, 24, groups=2, levels=2)
    x = torch.randn(5, 3, 16)
    state = cell.init_state(3)
    before = cell(x, state)[0]
    precision.apply(name)
    assert torch.equal(cell(x, state)[0], before)


# ---- which cells run bf16 where ----------------------------------------------------------------

def cell_options_from_the_studies() -> dict[str, dict]:
    """For every built-in cell, the options of the first study model that uses it."""
    options = {}
    for study in ("pru", "nlstm", "lru", "lrn"):
        for model in load_study(study)["models"].values():
            options.setdefault(model["cell"], model["cell_options"])
    return options


def test_every_built_in_cell_has_a_bf16_entry():
    assert set(precision.BF16) == set(CELLS)
    assert all(set(by_device) == set(precision.DEVICE_TYPES) for by_device in precision.BF16.values())


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_bf16_table_matches_this_cpu(cell):
    """What the table says of a cell on a CPU is what happens on this one: RUNS runs, a refusal fails,
    a machine-dependent cell either runs or fails naming what it needs."""
    support = precision.BF16[cell]["cpu"]
    options = cell_options_from_the_studies()[cell]
    try:
        precision.check_runs(cell, options, 8, 8, "bf16", torch.device("cpu"))
    except precision.PrecisionUnsupported as e:
        assert support.runs is not True, f"{cell}: listed as running bf16 on every CPU, but: {e}"
        assert support.why in str(e) and "`precision: fp32`" in str(e) and "\n" not in str(e)
        return
    assert support.runs is not False, f"{cell}: listed as never running bf16 on a CPU, but it runs here"


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="ONEDNN_MAX_CPU_ISA=AVX2 caps x86-64 CPUs")
def test_bf16_table_on_an_avx2_only_cpu():
    """Capped at AVX2 (what a CPU without AVX-512 offers), the cells listed as running on every CPU run,
    and oneDNN's bfloat16 LSTM does not."""
    options = cell_options_from_the_studies()
    script = (
        "import json, sys, torch\n"
        "from rnnrepro import precision\n"
        "failed = []\n"
        "for cell, options in json.loads(sys.argv[1]).items():\n"
        "    try:\n"
        "        precision.check_runs(cell, options, 8, 8, 'bf16', torch.device('cpu'))\n"
        "    except precision.PrecisionUnsupported:\n"
        "        failed.append(cell)\n"
        "print(json.dumps(failed))\n")
    result = subprocess.run([sys.executable, "-c", script, json.dumps(options)], capture_output=True, text=True,
                            env={**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}, timeout=300)
    assert result.returncode == 0, result.stderr
    failed = set(json.loads(result.stdout))
    assert {cell for cell, by_device in precision.BF16.items() if by_device["cpu"].runs} & failed == set()
    assert {cell for cell, by_device in precision.BF16.items() if by_device["cpu"] is precision.ONEDNN_LSTM} <= failed


def test_precision_failing_without_autocast_too_is_left_to_training():
    """A cell that fails in float32 as well is not reported as a precision problem."""
    with pytest.raises(precision.PrecisionUnsupported):
        precision.check_runs("lru", {}, 8, 8, "bf16", torch.device("cpu"))
    precision.check_runs("lru", {}, 8, 6, "bf16", torch.device("cpu"))  # unequal sizes: the LRU cannot be built
    precision.check_runs("lru", {}, 8, 8, "fp32", torch.device("cpu"))


def test_probe_leaves_the_random_numbers_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    precision.check_runs("pru", {"groups": 2, "levels": 2}, 8, 8, "bf16", torch.device("cpu"))
    assert torch.equal(torch.rand(3), expected)


def test_config_check_refuses_a_cell_that_cannot_run_bf16():
    """Resolving a cell (what the train rule does, in a dry run too) refuses bf16 for a cell with a
    hand-written backward on any device, naming it, the device and the fix; a cell whose support
    depends on the machine is left to the job's start-up check."""
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    lru = load_study("lru")
    for device in ("cpu", "cuda", "auto"):
        with pytest.raises(ConfigError) as refused:
            grid.resolve_cell(lru, dict(run_config, precision="bf16", device=device),
                              grid.Cell("lru", "ptb_char", "lru_24m", 100, 1111, "paper"))
        message = str(refused.value)
        assert "'lru_24m'" in message and "cell 'lru'" in message and "`precision: fp32`" in message
        assert ("any device" if device == "auto" else f"on {device}") in message
    for name in ("fp32", "tf32"):
        grid.resolve_cell(lru, dict(run_config, precision=name), grid.Cell("lru", "ptb_char", "lru_24m", 100, 1111, "paper"))
    pru = load_study("pru")
    cfg = grid.resolve_cell(pru, dict(run_config, precision="bf16", device="cpu"),
                            grid.Cell("pru", "ptb", "lstm_m1000", 100, 1111, "paper"))
    assert cfg["precision"] == "bf16"


@pytest.mark.slow
def test_dry_run_refuses_bf16_for_the_lru(tmp_path):
    project = copy_project(tmp_path)
    result = snakemake(project, "-n", "--profile", "profiles/smoke", "--config", "precision=bf16", "--",
                       "results/smoke/tables/lru_accuracy.csv")
    assert result.returncode != 0
    assert "cannot run `precision: bf16` on cpu" in result.stdout + result.stderr
    assert "`precision: fp32`" in result.stdout + result.stderr


def test_the_table_is_read_without_torch():
    """The Snakefile imports rnnrepro.precision through rnnrepro.grid, and must not import torch."""
    script = ("import sys\nfrom rnnrepro import grid, precision\n"
              "assert precision.config_problem('lru', 'bf16', 'cpu')\nprint('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr
