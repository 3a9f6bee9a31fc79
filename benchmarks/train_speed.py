"""Training speed of Table 1 models at the PRU paper's settings (a benchmark, not a test).

    python benchmarks/train_speed.py                       # LSTM M=1000 and PRU g=4 K=2 M=1400 on PTB, CPU
    python benchmarks/train_speed.py --device cuda --batches 300
    python benchmarks/train_speed.py --device cuda --models lstm_m1000 pru_g4_k2_m1400 awd_pru_g4_k2_m1400
    python benchmarks/train_speed.py --budget paper_start --models awd_lstm --weight-drop recipe --batches 5
    python benchmarks/train_speed.py --study lrn --budget paper_start --models mos --weight-drop recipe --batches 5

Runs the real training step (dropouts, AR/TAR, clipping, SGD; rnnrepro.train.language_model.training_step)
of a budget's models (default: the paper budget's; ``--study`` picks the study file) on random tokens of the dataset's vocabulary size, with the recipe's batch
size and a fixed BPTT of `bptt`, and prints seconds per batch, tokens/s and the implied seconds per
training epoch (the dataset's training tokens / tokens per second; validation not included), plus each
row's time relative to the first model's row with the same weight drop, and the process's CPU seconds per
batch (all threads; on a shared machine the wall time depends on the load, the CPU time much less).

``--weight-drop`` times every model with weight drop "off" (0), "on" (0.5 on the recurrent weights, the
AWD recipe's value: the AWD regime, a dropped copy of every recurrent weight per batch) and/or as its
"recipe" says; default: off and on, the regimes of Table 1's standard and AWD rows. Each step is timed by
rnnrepro.timing (torch.utils.benchmark.Timer, which synchronises the GPU around it; "s/batch" is the
median) and ``--precision`` (default fp32) sets every cell's float32 arithmetic.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import yaml

from rnnrepro import console, grid, precision
from rnnrepro.cells import gpu
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.data.registry import DATASETS
from rnnrepro.timing import seconds_per_call
from rnnrepro.train.language_model import build_model, training_step
from rnnrepro.train.optimizers import SGD

AWD_WEIGHT_DROP = 0.5
WEIGHT_DROPS = {"off": 0.0, "on": AWD_WEIGHT_DROP, "recipe": None}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", default="pru", help="the study file whose models are timed")
    parser.add_argument("--budget", default="paper", help="the budget whose sizes and recipe they take")
    parser.add_argument("--models", nargs="+", default=["lstm_m1000", "pru_g4_k2_m1400"])
    parser.add_argument("--dataset", default="ptb", choices=["ptb", "wt2"])
    parser.add_argument("--batches", type=int, default=20,
                        help="about this many timed batches per model (after 3 warm-up)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--weight-drop", nargs="+", default=["off", "on"], choices=list(WEIGHT_DROPS))
    parser.add_argument("--precision", default=precision.DEFAULT, choices=precision.PRECISIONS)
    parser.add_argument("--eager", action="store_true", help="switch the GPU fast paths off (before/after)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA GPU (torch.cuda.is_available() is False)")
    return args


def time_model(model_id: str, weight_drop: str, args, study: dict, run_config: dict) -> dict:
    cfg = grid.resolve_cell(study, run_config, grid.Cell(args.study, args.dataset, model_id, 100, 1111, run_config["budget"]))
    if WEIGHT_DROPS[weight_drop] is not None:
        cfg["recipe"]["weight_drop"] = WEIGHT_DROPS[weight_drop]
    expected = DATASETS[args.dataset].expected
    vocab_size, train_tokens = expected.vocab_size, expected.tokens[0]
    recipe = dict(cfg["recipe"])
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = build_model(cfg, vocab_size).to(device).train()
    optimizer = SGD(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])
    batch, bptt = recipe["batch_size"], recipe["bptt"]
    tokens = torch.randint(vocab_size, (bptt + 1, batch), device=device)
    state = [model.init_state(batch)]

    cpu = {"seconds": 0.0, "calls": 0}

    def step():
        start = time.process_time()
        _, state[0] = training_step(model, optimizer, recipe, tokens[:-1], tokens[1:], state[0], args.precision)
        cpu["seconds"] += time.process_time() - start
        cpu["calls"] += 1

    per_batch = seconds_per_call(step, 3, args.batches, f"{model_id}, weight drop {recipe['weight_drop']}")
    tokens_per_s = batch * bptt / per_batch
    return {"model": model_id, "weight_drop": recipe["weight_drop"], "params": sum(p.numel() for p in model.parameters()),
            "s_per_batch": per_batch, "tokens_per_s": tokens_per_s, "epoch_s": train_tokens / tokens_per_s,
            "cpu_s_per_batch": cpu["seconds"] / cpu["calls"]}


def main() -> None:
    args = parse_args()
    console.setup_logging()
    torch.set_num_threads(args.threads)
    precision.apply(args.precision)
    run_config = {**yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text()), "budget": args.budget}
    study = load_study(args.study)
    before = os.getloadavg()
    with gpu.settings(kernels=not args.eager, graphs=not args.eager):
        rows = [time_model(m, wd, args, study, run_config) for wd in args.weight_drop for m in args.models]
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu ({args.threads} threads)"
    print(f"load average before: {' '.join(f'{x:.2f}' for x in before)}, after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{time.strftime('%Y-%m-%d')}, {args.dataset}, {args.study} study at budget {args.budget}, about {args.batches} timed batches, {device}, "
          f"torch {torch.__version__}, precision {args.precision}"
          + (", GPU fast paths off" if args.eager and args.device == "cuda" else ""))
    print(f"{'model':<26}{'wdrop':>6}{'params':>12}{'s/batch':>10}{'tokens/s':>11}{'s/epoch':>10}{'vs first':>10}"
          f"{'CPU s/batch':>13}")
    for row in rows:
        first = next(r for r in rows if r["weight_drop"] == row["weight_drop"])
        print(f"{row['model']:<26}{row['weight_drop']:>6.2f}{row['params']:>12,}{row['s_per_batch']:>10.3f}"
              f"{row['tokens_per_s']:>11.0f}{row['epoch_s']:>10.0f}{row['s_per_batch'] / first['s_per_batch']:>10.2f}"
              f"{row['cpu_s_per_batch']:>13.3f}")


if __name__ == "__main__":
    main()
