"""Total training throughput of N processes sharing one GPU (a benchmark, not a test).

    python benchmarks/gpu_sharing.py --device cuda --jobs 1 2 3 4 6
    python benchmarks/gpu_sharing.py --device cuda --models pru:pru_g4_k2_m1400 lrn:lrn_ft --variable-bptt
    python benchmarks/gpu_sharing.py --jobs 1 2 --seconds 5 --models pru:lstm_m1000 --budget smoke   # CPU check

What ``RNNREPRO_JOBS_PER_GPU`` (rnnrepro.gpus) should be. For each model (``study:model``, built as the
budget's training cell builds it, default the reduced budget's) and each N of ``--jobs``, N worker
processes (this file, ``--worker``) each build the model on the device, take ``--warmup`` training steps
(cuDNN's plans, the fast paths' CUDA-graph captures: one per BPTT length a process meets), wait until
every worker has warmed up, then all take training steps (rnnrepro.train.language_model.training_step: dropouts,
AR/TAR, clipping, the optimizer) on random tokens for ``--seconds`` and count them. The table gives the
N processes' total tokens/s and its ratio to one process's: below 1.00, N jobs on one GPU finish a grid
later than the same jobs one after another. Each worker runs ``--threads`` CPU threads (N x threads
against the machine's cores is one of the limits). ``--variable-bptt`` draws each batch's length
as the trainer does for recipes with variable BPTT (so a worker meets, and captures, many lengths).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["pru:lstm_m1000", "pru:pru_g4_k2_m1400"],
                        help="study:model pairs (language models), each timed at every --jobs value")
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2, 3, 4, 6])
    parser.add_argument("--budget", default="reduced", help="whose widths and recipe (default reduced)")
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per worker (the run config's default)")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per measurement")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per worker first")
    parser.add_argument("--variable-bptt", action="store_true", help="draw BPTT lengths as the trainer does")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--go", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.jobs):
        parser.error(f"--jobs {args.jobs}: every value must be a whole number >= 1")
    if args.threads < 1 or args.seconds <= 0 or args.warmup < 1:
        parser.error("--threads and --warmup must be at least 1 and --seconds above 0")
    return args


def worker(args: argparse.Namespace) -> None:
    """One process: build, warm up, wait for the common start, count steps for --seconds."""
    import numpy as np
    import torch
    import yaml

    from rnnrepro import grid
    from rnnrepro.configuration import load_study
    from rnnrepro.data.registry import DATASETS
    from rnnrepro.runtime import start_runtime
    from rnnrepro.train.language_model import build_model, make_optimizer, training_step

    start_runtime(argparse.Namespace(device=args.device, threads=args.threads))
    study_name, model_id = args.model.split(":")
    study = load_study(study_name)
    run_config = {**yaml.safe_load((REPO / "config" / "config.yaml").read_text()), "budget": args.budget}
    dataset = study["artifacts"][next(a for a in grid.artifacts(study, run_config)
                                      if model_id in grid.artifact_spec(study, run_config, a)["models"])]["datasets"][0]
    cell = grid.Cell(study_name, grid.data_key(study, run_config, dataset), model_id, 100, 1111, args.budget)
    cfg = grid.resolve_cell(study, run_config, cell)
    recipe = cfg["recipe"]
    expected = DATASETS[cfg["corpus"]].expected   # None for a synthetic corpus: PTB's size then
    vocab = study.get("vocab_sizes", {}).get(cfg["corpus"]) or (expected.vocab_size if expected else 10_000)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = build_model(cfg, vocab).to(device).train()
    optimizer = make_optimizer(model, recipe)
    batch, bptt = recipe["batch_size"], recipe["bptt"]
    longest = bptt + 50
    tokens = torch.randint(vocab, (longest + 1, batch), device=device)
    rng = np.random.default_rng(os.getpid())
    state = [model.init_state(batch)]

    def length() -> int:
        if not args.variable_bptt:
            return bptt
        base = bptt if rng.random() < 0.95 else bptt / 2
        return min(longest, max(5, int(rng.normal(base, 5))))

    def step() -> int:
        n = length()
        _, state[0] = training_step(model, optimizer, recipe, tokens[:n], tokens[1:n + 1], state[0])
        return n * batch

    for _ in range(args.warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    Path(args.out + ".ready").touch()
    go = Path(args.go)
    while not go.exists():
        time.sleep(0.01)
    while time.time() < float(go.read_text() or 0):
        time.sleep(0.001)
    began, counted = time.time(), 0
    while time.time() < began + args.seconds:
        counted += step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.time() - began
    Path(args.out).write_text(json.dumps({"tokens": counted, "seconds": seconds}))


def measure(args: argparse.Namespace, model: str, jobs: int, folder: Path) -> dict:
    """N workers side by side on one device; their total tokens/s."""
    name = f"{model.replace(':', '_')}-{jobs}"
    outs, go = [folder / f"{name}-{k}.json" for k in range(jobs)], folder / f"{name}.go"
    command = [sys.executable, __file__, "--worker", "--model", model, "--budget", args.budget, "--device",
               args.device, "--threads", str(args.threads), "--seconds", str(args.seconds), "--warmup",
               str(args.warmup), "--go", str(go), *(["--variable-bptt"] if args.variable_bptt else [])]
    processes = [subprocess.Popen([*command, "--out", str(out)]) for out in outs]
    while not all(Path(f"{out}.ready").exists() for out in outs):
        if any(p.poll() not in (None, 0) for p in processes):
            break
        time.sleep(0.05)
    go.write_text(str(time.time() + 0.2))   # every worker starts counting at the same moment
    codes = [p.wait() for p in processes]
    if any(codes):
        raise SystemExit(f"{model} at {jobs} jobs: a worker failed (exit codes {codes})")
    results = [json.loads(out.read_text()) for out in outs]
    return {"tokens_per_s": sum(r["tokens"] / r["seconds"] for r in results)}


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return
    import torch

    device = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU ({os.cpu_count()} cores)"
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {device}, torch {torch.__version__}, budget {args.budget}, "
          f"{args.threads} thread(s) per job, {args.seconds:g} s timed after {args.warmup} warm-up steps, "
          f"{'variable' if args.variable_bptt else 'fixed'} BPTT")
    print(f"{'model':<28}{'jobs':>5}{'tokens/s':>12}{'x one job':>11}")
    with tempfile.TemporaryDirectory() as folder:
        for model in args.models:
            single = None
            for jobs in args.jobs:
                result = measure(args, model, jobs, Path(folder))
                single = single or result["tokens_per_s"]
                print(f"{model:<28}{jobs:>5}{result['tokens_per_s']:>12,.0f}{result['tokens_per_s'] / single:>11.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
