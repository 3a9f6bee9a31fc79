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
"""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("fp32", "tf32", "bf16")
DEFAULT = "fp32"


def _check(name: str) -> str:
    if name not in PRECISIONS:
        raise ValueError(
            f"precision {name!r} is not one of {', '.join(PRECISIONS)}; set `precision:` in the run "
            f"config to one of them (fp32 is the default: the same full-FP32 products for every cell)"
        )
    return name


def _has_new_api() -> bool:
    cudnn = torch.backends.cudnn
    return (
        hasattr(torch.backends.cuda.matmul, "fp32_precision")
        and hasattr(getattr(cudnn, "rnn", None), "fp32_precision")
        and hasattr(getattr(cudnn, "conv", None), "fp32_precision")
    )


def apply(name: str = DEFAULT) -> None:
    """Set cuBLAS matmul and cuDNN RNN/conv float32 precision for ``name`` (process-wide)."""
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
    _check(name)
    if name != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


def describe(name: str) -> dict:
    """What a run records in metrics.json: the setting and the backend flags actually in force."""
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
