"""Training speed of Table 1 models at the PRU paper's settings (a benchmark, not a test).

    python benchmarks/train_speed.py                       # LSTM M=1000 and PRU g=4 K=2 M=1400 on PTB, CPU
    python benchmarks/train_speed.py --device cuda --batches 300

Runs the real training step (AR/TAR, clipping, SGD; rnnrepro.train.loop.training_step) of the paper
budget's models on random tokens of the dataset's vocabulary size, with the recipe's batch size and a
fixed BPTT of `bptt`, and prints seconds per batch, tokens/s and the implied seconds per training epoch
(the dataset's training tokens / tokens per second; validation not included), plus each model's time
relative to the first one.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import yaml

from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.data.registry import DATASETS
from rnnrepro.train.language_model import build_model
from rnnrepro.train.loop import training_step


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["lstm_m1000", "pru_g4_k2_m1400"])
    parser.add_argument("--dataset", default="ptb", choices=["ptb", "wt2"])
    parser.add_argument("--batches", type=int, default=20, help="timed batches per model (after 3 warm-up)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    return parser.parse_args()


def time_model(model_id: str, args, study: dict, run_config: dict) -> dict:
    cfg = grid.resolve_cell(study, run_config, grid.Cell("pru", args.dataset, model_id, 100, 1111))
    expected = DATASETS[args.dataset].expected
    vocab_size, train_tokens = expected.vocab_size, expected.tokens[0]
    recipe = dict(cfg["recipe"])
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = build_model(cfg, vocab_size).to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])
    batch, bptt = recipe["batch_size"], recipe["bptt"]
    state = model.init_state(batch)
    seconds = []
    for i in range(3 + args.batches):
        tokens = torch.randint(vocab_size, (bptt + 1, batch), device=device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        _, state = training_step(model, optimizer, recipe, tokens[:-1], tokens[1:], state)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= 3:
            seconds.append(time.perf_counter() - started)
    per_batch = statistics.median(seconds)
    tokens_per_s = batch * bptt / per_batch
    return {"model": model_id, "params": sum(p.numel() for p in model.parameters()),
            "s_per_batch": per_batch, "tokens_per_s": tokens_per_s, "epoch_s": train_tokens / tokens_per_s}


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    study = load_study("pru")
    rows = [time_model(m, args, study, run_config) for m in args.models]
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu ({args.threads} threads)"
    print(f"{args.dataset}, paper settings, {args.batches} timed batches, {device}, torch {torch.__version__}")
    print(f"{'model':<22}{'params':>12}{'s/batch':>10}{'tokens/s':>11}{'s/epoch':>10}{'vs first':>10}")
    for row in rows:
        print(f"{row['model']:<22}{row['params']:>12,}{row['s_per_batch']:>10.3f}{row['tokens_per_s']:>11.0f}"
              f"{row['epoch_s']:>10.0f}{row['s_per_batch'] / rows[0]['s_per_batch']:>10.2f}")


if __name__ == "__main__":
    main()
