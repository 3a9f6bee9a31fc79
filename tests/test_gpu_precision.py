"""The precision setting: every backend the cells use gets the same float32 arithmetic."""

import pytest
import torch

from rnnrepro import precision
from rnnrepro.cells import build_layer


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
