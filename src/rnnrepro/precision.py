"""The float32 arithmetic of a run's matrix products: one explicit setting, the same for every cell.

Why: since torch 2.9 cuDNN's RNN and convolutions default to TF32 on Ampere and later GPUs
(``torch.backends.cudnn.rnn.fp32_precision == "tf32"``), while plain matrix products
(``torch.mm``, which the custom cells use) default to full FP32. Left alone, the ``nn.LSTM`` rows of a
table would be trained with 10-bit-mantissa products and the PRU rows with 23-bit ones. ``apply``
sets every backend the cells touch to the same precision, and ``describe`` is what a run records in
``metrics.json`` so a table can show which arithmetic produced it.

Settings (``precision:`` of the run config):

- ``fp32`` (default): IEEE float32 products everywhere: cuBLAS matmul, cuDNN RNN and cuDNN conv.
- ``tf32``: TF32 tensor-core products for cuBLAS matmul and cuDNN RNN/conv (faster on Ampere+;
  ~1e-3 relative error per product). Ignored by CPUs (oneDNN keeps FP32).
- ``bf16``: full-FP32 backends as ``fp32``, plus ``torch.autocast(dtype=torch.bfloat16)`` around the
  model's forward pass (``autocast``): products in bfloat16, accumulation and the optimiser in FP32.

On a CPU, ``fp32`` and ``tf32`` give the same numbers (no TF32 there) and ``apply`` does not touch
oneDNN's own setting, so CPU results are bit-identical to runs made before this setting existed.

Torch >= 2.9 has per-backend ``fp32_precision`` attributes ("ieee" / "tf32"); older versions only the
``allow_tf32`` booleans. Mixing the two APIs makes torch raise, so ``apply`` uses the new one wherever
it exists (torch 2.11 and 2.13 both have it) and the booleans only otherwise.

Which cells run ``bf16`` where (``BF16``): ``fp32`` and ``tf32`` run every cell on every device, but
bfloat16 autocast does not. What is known without running anything is data here, so the Snakefile
(which imports no torch) refuses a cell that cannot run ``bf16`` on the configured device when it
resolves the cell (rnnrepro.grid, in a dry run too). What depends on the machine (oneDNN's bfloat16
LSTM needs AVX-512) is tried when a training job starts (``check_runs``): a forward and backward pass
of the cell, two steps of two sequences, under autocast on the job's device; a cell that cannot run
stops the job with one line naming the cell, the device and ``precision: fp32``. The workflow runs the
same trial on the machine that runs the jobs when it plans them (``machine_problem``; a dry run too),
so such a run is refused before any job starts or any file is touched.

Which cells a precision makes (rnnrepro.grid.runs_dir): a precision whose numbers differ from fp32's
(``bf16``; ``tf32`` on a GPU) trains cells of its own, in ``runs-<precision>/`` beside ``runs/``, so it
never replaces a finished fp32 cell. ``tf32`` where the jobs run on a CPU computes exactly what ``fp32``
does, so its cells are fp32's (``same_numbers_as``): asking for it retrains nothing.

This module imports torch only inside the functions that need it: the Snakefile imports the table.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

PRECISIONS = ("fp32", "tf32", "bf16")
DEFAULT = "fp32"
DEVICE_TYPES = ("cpu", "cuda")
FIX = "set `precision: fp32` (config/config.yaml, or --config precision=fp32) and rerun"


class PrecisionUnsupported(RuntimeError):
    """A cell cannot run the asked precision on the job's device; the message names both and the fix."""


@dataclass(frozen=True)
class Support:
    """How a cell fares under a precision on one device type."""

    runs: bool | None  # True: on every machine of that type; False: on none; None: on some (tried at job start)
    why: str = ""  # what it depends on, or what stops it


RUNS = Support(True)
# The cause is in the cell's code, not the device: on a GPU under autocast the fused kernels and CUDA
# graphs step aside (rnnrepro.cells.gpu) and the same eager loop runs.
HAND_WRITTEN_BACKWARD = Support(
    False, "its time loop is an autograd Function with a hand-written backward, which mixes autocast's bfloat16 "
           "products with its float32 weights and states")
ONEDNN_LSTM = Support(
    None, "it runs oneDNN's bfloat16 LSTM, which needs a CPU with AVX-512 (avx512_core or later); AVX2-only "
          "CPUs lack it")
NOT_MEASURED_ON_GPU = Support(None, "not yet measured on a GPU")

# bfloat16 autocast by built-in cell and device type, measured on CPUs with torch 2.13 (AVX-512 with
# bf16 instructions, AVX-512 without, AVX2 only, the latter two through ONEDNN_MAX_CPU_ISA);
# tests/test_gpu_precision.py checks the CPU column against the machine it runs on. A cell of your
# own (module:Class) is not listed: the job's start-up check decides.
BF16: dict[str, dict[str, Support]] = {
    **{cell: {"cpu": ONEDNN_LSTM, "cuda": NOT_MEASURED_ON_GPU} for cell in ("lstm", "lstm_single_bias", "grid_lstm")},
    **{cell: {"cpu": RUNS, "cuda": NOT_MEASURED_ON_GPU} for cell in ("gru", "pru", "lrn")},
    **{cell: {"cpu": HAND_WRITTEN_BACKWARD, "cuda": HAND_WRITTEN_BACKWARD}
       for cell in ("gru_single_bias", "lru", "ps_lru", "rg_lru", "nested_lstm", "rhn", "atr", "sru")},
}


def _check(name: str) -> str:
    if name not in PRECISIONS:
        raise ValueError(
            f"precision {name!r} is not one of {', '.join(PRECISIONS)}; set `precision:` in the run "
            f"config to one of them (fp32 is the default: the same full-FP32 products for every cell)"
        )
    return name


def _has_new_api() -> bool:
    import torch

    cudnn = torch.backends.cudnn
    return (
        hasattr(torch.backends.cuda.matmul, "fp32_precision")
        and hasattr(getattr(cudnn, "rnn", None), "fp32_precision")
        and hasattr(getattr(cudnn, "conv", None), "fp32_precision")
    )


def apply(name: str = DEFAULT) -> None:
    """Set cuBLAS matmul and cuDNN RNN/conv float32 precision for ``name`` (process-wide)."""
    import torch

    _check(name)
    tf32 = name == "tf32"
    if _has_new_api():
        value = "tf32" if tf32 else "ieee"
        torch.backends.cuda.matmul.fp32_precision = value
        torch.backends.cudnn.rnn.fp32_precision = value
        torch.backends.cudnn.conv.fp32_precision = value
    else:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


def autocast(name: str, device: torch.device | str):
    """The context to run a model's forward pass in: bfloat16 autocast for ``bf16``, else nothing."""
    import torch

    _check(name)
    if name != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


def describe(name: str) -> dict:
    """What a run records in metrics.json: the setting and the backend flags actually in force."""
    import torch

    _check(name)
    record = {"precision": name, "autocast_dtype": "bfloat16" if name == "bf16" else None}
    if _has_new_api():
        record["cuda_matmul_fp32"] = torch.backends.cuda.matmul.fp32_precision
        record["cudnn_rnn_fp32"] = torch.backends.cudnn.rnn.fp32_precision
        record["cudnn_conv_fp32"] = torch.backends.cudnn.conv.fp32_precision
    else:
        record["cuda_matmul_fp32"] = "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"
        cudnn_tf32 = "tf32" if torch.backends.cudnn.allow_tf32 else "ieee"
        record["cudnn_rnn_fp32"] = record["cudnn_conv_fp32"] = cudnn_tf32
    return record


def _refusal(cell: str, name: str, device: str, why: str) -> str:
    return f"the recurrent cell {cell!r} cannot run `precision: {name}` on {device}: {why}; {FIX}"


def config_problem(cell: str, name: str, device: str) -> str | None:
    """Why ``cell`` cannot run precision ``name`` on ``device`` (``cpu``, ``cuda`` or ``auto``), where that
    is known without running it; None where it runs, or where only the machine can tell."""
    _check(name)
    if name != "bf16" or cell not in BF16:
        return None
    device_types = DEVICE_TYPES if device == "auto" else (device,)
    if all(BF16[cell][device_type].runs is False for device_type in device_types):
        return _refusal(cell, name, "any device" if device == "auto" else device, BF16[cell][device_types[0]].why)
    return None


def same_numbers_as(name: str, device_type: str) -> str:
    """The precision whose numbers ``name`` gives on a ``device_type`` (``cpu``, ``cuda``) device, and so whose
    cells it shares: ``name`` itself, but fp32 for tf32 on a CPU (no TF32 there; oneDNN keeps FP32)."""
    _check(name)
    return DEFAULT if name == "tf32" and device_type == "cpu" else name


def device_type_of(device: str) -> str:
    """The device type that ``device`` (the run config's ``cpu``, ``cuda`` or ``auto``) gives on this machine
    (imports torch for ``auto``)."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def machine_problem(architecture: dict, name: str, device: str) -> str | None:
    """Why this machine cannot run one layer of ``architecture`` (a resolved cell's) at precision ``name``
    on ``device`` (``cpu``, ``cuda``, ``auto``), by the trial of ``check_runs``; None where it can. For the
    workflow, before it runs any job: the trial a training job starts with, made once per distinct layer.
    Only bf16 needs the trial, so only then is torch imported (seconds in every Snakemake run)."""
    _check(name)
    if name != "bf16":
        return None
    import torch

    device_type = device_type_of(device)
    if device_type == "cuda" and not torch.cuda.is_available():
        return None  # `device: cuda` without CUDA is refused on its own, before any job
    key = (architecture["cell"], repr(sorted(architecture["cell_options"].items())), architecture["embedding_size"],
           architecture["hidden_size"], name, device_type)
    if key not in _TRIED:
        try:
            check_runs(architecture["cell"], architecture["cell_options"], architecture["embedding_size"],
                       architecture["hidden_size"], name, torch.device(device_type))
            _TRIED[key] = None
        except PrecisionUnsupported as e:
            _TRIED[key] = str(e)
    return _TRIED[key]


_TRIED: dict[tuple, str | None] = {}  # machine_problem's trials, by layer: a grid repeats its layers


def _device_name(device: torch.device) -> str:
    import torch

    return f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)


def check_runs(cell: str, cell_options: dict, input_size: int, hidden_size: int, name: str,
               device: torch.device) -> None:
    """Raise PrecisionUnsupported if one layer of ``cell`` cannot run precision ``name`` on ``device``.

    Tried, not looked up: a forward pass of two steps of two sequences under ``autocast(name)`` and the
    backward pass to the input, at the layer's own sizes (a cell may constrain them). If the same pass
    fails without autocast too, the precision is not the cause: nothing is raised, and training reports
    the error itself. The random number generators are left as they were.
    """
    import torch

    from .cells import build_layer

    _check(name)
    if name != "bf16":
        return

    def one_pass(precision_name: str) -> None:
        layer = build_layer(cell, input_size, hidden_size, **cell_options).to(device)
        x = torch.randn(2, 2, input_size, device=device, requires_grad=True)
        with autocast(precision_name, device):
            out, _ = layer(x, layer.init_state(2, device=device))
        torch.autograd.grad(out.float().sum(), x)

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else [], device_type=device.type):
        try:
            one_pass(name)
        except Exception as error:  # noqa: BLE001 -- oneDNN, cuDNN and dtype checks raise different types
            try:
                one_pass(DEFAULT)
            except Exception:  # noqa: BLE001 -- not the precision's doing
                return
            known = BF16.get(cell, {}).get(device.type)
            said = str(error).strip().splitlines()[0].split(". ")[0] if str(error).strip() else type(error).__name__
            why = f"{known.why} ({said})" if known and known.why else said
            raise PrecisionUnsupported(_refusal(cell, name, _device_name(device), why)) from None
