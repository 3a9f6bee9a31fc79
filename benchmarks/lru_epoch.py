"""Seconds per text8 epoch of the LRU study's 24 M models, and what the paper grid costs (a benchmark).

    python benchmarks/lru_epoch.py                    # 7 units at 24 M, about 3 timed batches each, CPU
    python benchmarks/lru_epoch.py --device cuda --batches 50

Runs the real training step (rnnrepro.train.language_model.training_step with the study's Adam recipe: batch
100 x 50 characters) of each unit sized to 24 M parameters for text8 (vocabulary 27), on random
characters, timed by rnnrepro.timing (torch.utils.benchmark.Timer), and prints the
median seconds per batch and the implied seconds per text8 epoch (90 M training characters; validation
not included). It also counts the operators one batch calls (torch.profiler) and its FLOPs (6 per
weight per character: every non-embedding weight is used once per character forward, twice backward).

The paper grid's cost is then estimated for the measured device and, from CPU measurements, for a GPU
by a stated model, not a measurement: a batch takes FLOPs / `--gpu-tflops` plus `--gpu-op-us` per
operator (the LRU family and RHN run their recurrence as a loop of small operators, so on a GPU they are
bound by per-operator latency, not arithmetic). Every run is taken to train `--epochs` epochs.
"""

from __future__ import annotations

import argparse

import torch
import yaml
from torch.profiler import ProfilerActivity, profile

from rnnrepro import console, grid
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.timing import seconds_per_call
from rnnrepro.train.language_model import build_model, make_optimizer, training_step

UNITS = ["lstm", "gru", "grid_lstm", "rhn", "ps_lru", "rg_lru", "lru"]
# training characters (90 % of each corpus): ptb_char from the three PTB files' 5,951,345 characters,
# warpeace from the prepared mirror copy, text8 and enwik8 by definition
TRAIN_CHARS = {"ptb_char": 5_356_210, "warpeace": 2_876_592, "enwik8": 90_000_000, "text8": 90_000_000}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="24m", choices=["24m", "10m"], help="the models' parameter budget")
    parser.add_argument("--units", nargs="+", default=UNITS, choices=UNITS)
    parser.add_argument("--batches", type=int, default=3,
                        help="about this many timed batches per unit (after 1 warm-up)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--epochs", type=float, default=20, help="epochs per run, for the grid estimate")
    parser.add_argument("--gpu-tflops", type=float, default=25, help="achieved FP32 matrix-product TFLOP/s")
    parser.add_argument("--gpu-op-us", type=float, default=8, help="microseconds per operator on a GPU")
    return parser.parse_args()


class Unit:
    """One model of a resolved cell config, with its optimizer and carried state, ready to train."""

    def __init__(self, cfg: dict, vocab: int, device: torch.device):
        self.cfg, self.recipe, self.vocab, self.device = cfg, cfg["recipe"], vocab, device
        torch.manual_seed(0)
        self.model = build_model(cfg, vocab).to(device).train()
        self.optimizer = make_optimizer(self.model, self.recipe)
        self.state = self.model.init_state(self.recipe["batch_size"])
        self.chars = torch.randint(vocab, (self.recipe["bptt"] + 1, self.recipe["batch_size"]), device=device)

    def step(self) -> None:
        _, self.state = training_step(self.model, self.optimizer, self.recipe, self.chars[:-1], self.chars[1:],
                                      self.state)


def text8_config(study: dict, run_config: dict, model_id: str) -> dict:
    return grid.resolve_cell(study, run_config, grid.Cell("lru", "text8", model_id, 100, 1111, run_config["budget"]))


def operators_per_batch(cfg: dict, vocab: int) -> int:
    """Operators one training step calls (not those inside another operator), counted on a copy of
    the model 32 wide: the count depends on the architecture and the batch shape, not on the width."""
    narrow = Unit({**cfg, "architecture": {**cfg["architecture"], "embedding_size": 32, "hidden_size": 32}},
                  vocab, torch.device("cpu"))
    narrow.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        narrow.step()
    return sum(1 for e in prof.events() if e.name.startswith("aten::")
               and not (e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::")))


def flops_per_batch(cfg: dict, params: int, vocab: int) -> float:
    embedding = vocab * cfg["architecture"]["embedding_size"]
    return 6 * (params - embedding) * cfg["recipe"]["batch_size"] * cfg["recipe"]["bptt"]


def grid_batches(study: dict, run_config: dict, size: str) -> dict[str, float]:
    """Training batches per epoch, summed over the paper grid's runs of each unit at one size."""
    per_unit: dict[str, float] = {}
    for artifact in ("accuracy", "stat_efficiency"):  # convergence reads the accuracy runs
        for cell in grid.artifact_cells(study, run_config, artifact):
            unit, model_size = cell.model.rsplit("_", 1)
            if model_size == size:
                chars = TRAIN_CHARS[cell.corpus] * cell.fraction / 100
                per_unit[unit] = per_unit.get(unit, 0.0) + chars / (100 * 50)
    return per_unit


def main() -> None:
    args = parse_args()
    console.setup_logging()
    torch.set_num_threads(args.threads)
    run_config = {**yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text()), "budget": "paper"}
    study = load_study("lru")
    vocab = study["vocab_sizes"]["text8"]
    device = torch.device(args.device)
    units = [Unit(text8_config(study, run_config, f"{unit}_{args.size}"), vocab, device) for unit in args.units]
    seconds = {unit.cfg["model"]: seconds_per_call(unit.step, 1, args.batches, unit.cfg["model"]) for unit in units}
    name = torch.cuda.get_device_name() if device.type == "cuda" else f"cpu ({args.threads} threads)"
    print(f"text8, {args.size} models, batch 100 x 50, Adam; about {args.batches} timed batches; {name}; "
          f"torch {torch.__version__}")
    print(f"{'model':<16}{'hidden':>7}{'params':>12}{'s/batch':>9}{'s/epoch':>10}{'ops/batch':>11}"
          f"{'GFLOP/batch':>13}{'GPU s/batch (model)':>21}")
    runs = grid_batches(study, run_config, args.size)
    measured_hours = modelled_hours = 0.0
    for unit in units:
        cell = unit.cfg["architecture"]["cell"]
        # The CPU build of nn.GRU loops over the time steps in small operators; cuDNN runs it as one
        # call per layer and direction, as nn.LSTM, so on a GPU both call as many operators.
        counted = text8_config(study, run_config, f"lstm_{args.size}") if cell == "gru" else unit.cfg
        ops = operators_per_batch(counted, vocab)
        per_batch = seconds[unit.cfg["model"]]
        params = sum(p.numel() for p in unit.model.parameters())
        flops = flops_per_batch(unit.cfg, params, vocab)
        gpu_per_batch = flops / (args.gpu_tflops * 1e12) + ops * args.gpu_op_us * 1e-6
        batches = TRAIN_CHARS["text8"] / (unit.recipe["batch_size"] * unit.recipe["bptt"])
        print(f"{unit.cfg['model']:<16}{unit.cfg['architecture']['hidden_size']:>7}{params:>12,}{per_batch:>9.2f}"
              f"{per_batch * batches:>10.0f}{ops:>11,}{flops / 1e9:>13.0f}{gpu_per_batch:>21.3f}")
        measured_hours += per_batch * runs[cell] * args.epochs / 3600
        modelled_hours += gpu_per_batch * runs[cell] * args.epochs / 3600
    print(f"paper grid, the {args.size} runs of these units, {args.epochs:g} epochs a run: "
          f"{measured_hours:,.0f} h on this device; {modelled_hours:,.0f} GPU-hours by the model "
          f"({args.gpu_tflops:g} TFLOP/s, {args.gpu_op_us:g} us/operator)")


if __name__ == "__main__":
    main()
