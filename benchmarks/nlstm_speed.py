"""Training speed of the nlstm study's models at the published sizes (a benchmark, not a test).

    python benchmarks/nlstm_speed.py                       # GRU, LSTM, Nested LSTM; CPU, all threads
    python benchmarks/nlstm_speed.py --device cuda --batches 50

Runs the real training step (rnnrepro.train.autocomplete.training_step: forward, masked cross entropy,
Adam) of the paper budget's models -- 600 units, 28 input symbols, 16,386 classes, batch 64 -- on
random observations of the full 200 characters with every target a known word (the dense layer then
runs at every position: the upper end of the real cost, where observations average just under 200
characters and <unk> targets skip it). Prints seconds per batch, seconds per 1,000 training sequences
and the implied hours for the published pass over 508,583 sequences (validation not included). On a
shared machine wall time depends on the other jobs; the CPU seconds this process used (all its
threads) per 1,000 sequences do much less, and divided by the threads they estimate an idle machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import yaml

from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.data.autocomplete import AUTOCOMPLETE_DATASETS, INPUT_SYMBOLS, UNK_ID
from rnnrepro.train.autocomplete import build_model, make_optimizer, training_step

DATASET = "text8_autocomplete"
TRAIN_SEQUENCES = AUTOCOMPLETE_DATASETS[DATASET].expected_train_observations
STEPS = AUTOCOMPLETE_DATASETS[DATASET].max_chars


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["gru_2x600", "lstm_2x600", "nlstm_1x600_d2"])
    parser.add_argument("--batches", type=int, default=3, help="timed batches per model (after 1 warm-up)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    return parser.parse_args()


def time_model(model_id: str, args, study: dict, run_config: dict) -> dict:
    cfg = grid.resolve_cell(study, run_config, grid.Cell("nlstm", DATASET, model_id, 100, 1111, run_config["budget"]))
    recipe, device = cfg["recipe"], torch.device(args.device)
    classes = AUTOCOMPLETE_DATASETS[DATASET].classes
    torch.manual_seed(0)
    model = build_model(cfg, classes).to(device).train()
    optimizer = make_optimizer(model, recipe)
    batch = recipe["batch_size"]
    seconds, cpu_seconds = [], []
    for i in range(1 + args.batches):
        inputs = torch.randint(1, len(INPUT_SYMBOLS), (STEPS, batch), device=device)
        targets = torch.randint(UNK_ID + 1, classes, (STEPS, batch), device=device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        started, cpu_started = time.perf_counter(), time.process_time()
        training_step(model, optimizer, inputs, targets)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= 1:
            seconds.append(time.perf_counter() - started)
            cpu_seconds.append(time.process_time() - cpu_started)
    per_batch = statistics.median(seconds)
    per_1000 = 1000 * per_batch / batch
    return {"model": model_id, "params": sum(p.numel() for p in model.parameters()), "s_per_batch": per_batch,
            "s_per_1000": per_1000, "cpu_s_per_1000": 1000 * statistics.median(cpu_seconds) / batch,
            "pass_hours": TRAIN_SEQUENCES * per_1000 / 1000 / 3600}


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    run_config["budget"] = "paper"
    study = load_study("nlstm")
    rows = [time_model(m, args, study, run_config) for m in args.models]
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu ({args.threads} threads)"
    print(f"{DATASET}, paper sizes, batch 64 x {STEPS} characters, {args.batches} timed batches, {device}, "
          f"torch {torch.__version__}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'model':<18}{'params':>12}{'s/batch':>10}{'s/1000 seq':>12}{'cpu s/1000 seq':>16}{'h/pass':>9}")
    for row in rows:
        print(f"{row['model']:<18}{row['params']:>12,}{row['s_per_batch']:>10.2f}{row['s_per_1000']:>12.1f}"
              f"{row['cpu_s_per_1000']:>16.1f}{row['pass_hours']:>9.1f}")


if __name__ == "__main__":
    main()
