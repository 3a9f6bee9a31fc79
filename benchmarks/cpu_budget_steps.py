"""The ``cpu`` shape of benchmarks/cells.py: one whole training step of every study's cpu-budget models.

At the cpu budget's sizes a recurrent layer is a small part of a step (PTB's 10,000-word softmax, the
autocomplete model's 16,386-way dense layer), so the cells are compared inside their real models:
each model is built from its study file's cpu budget (rnnrepro.grid.resolve_cell), on random tokens of
its corpus's vocabulary at the recipe's batch size and BPTT (autocomplete: 64 observations of 200
characters, the corpus's cut, every target a known word), and one optimizer step is timed as the
trainer takes it (rnnrepro.train.language_model.training_step / rnnrepro.train.autocomplete.training_step:
dropouts, AR/TAR, clipping, the recipe's optimizer). The process starts as a training job does
(rnnrepro.runtime.start_runtime and the trainer's memory setting), with ``--threads`` threads (default 1: the cpu grid runs one thread
per job, two jobs side by side). Models run round-robin, one step of each per repeat, and the table
gives medians. "x LSTM" is a step's time over that of the LSTM of the same study and size in the same
run (rows marked "baseline"; lstm_m1200, abl_lstm_m600 and lstm_10m are not in the cpu grid and are
timed as the baseline of its models of their size).

``--breakdown`` splits a step: "head" is the output head alone (decoder and softmax and cross
entropy, the mixture of softmaxes, or the autocomplete dense layer), forward and backward on an input
of its shape; "recurrence" the recurrent layers alone, forward and backward; "rest" what is left of the
step (embedding, dropouts, AR/TAR, clipping, the optimizer, Python); "operators" the ATen operator
calls of one step, nested ones included (torch.profiler), a measure of per-operator overhead.

``--against DIR`` times another checkout (DIR/src, e.g. ``git worktree add --detach ../before main``)
as "before" and this one as "after", each in its own processes, alternating (before, after, after,
before, ...) for ``--rounds`` rounds so that a drift in the machine's speed hits both alike; the table
gives the medians over all rounds of the wall time and of the CPU time (process time: on a shared
machine it moves less than the wall time), and the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml

REPO = Path(__file__).resolve().parents[1]

# study -> paper dataset of its cpu cells -> the LSTM of a size -> the models compared with it
CPU_MODELS: dict[str, dict[str, dict[str, list[str]]]] = {
    "pru": {"ptb": {
        "lstm_m1000": ["pru_g1_k2_m1000"],
        "lstm_m1200": ["pru_g2_k2_m1200"],
        "lstm_m1400": ["pru_g4_k2_m1400"],
        "abl_lstm_m600": ["abl_r1_lt_lt", "abl_r2_glt_glt", "abl_pru_g4_k4_m600", "abl_r4_lt_pt", "abl_r5_pt_pt",
                          "abl_r6_lt_pt_nores", "abl_pru_g1_k4_m600", "abl_skip_g1_k4", "abl_maxpool_g1_k4",
                          "abl_conv_g1_k4"],
    }},
    "lru": {
        "warpeace": {"lstm_24m": ["gru_24m", "lru_24m", "ps_lru_24m", "rg_lru_24m", "rhn_24m", "grid_lstm_24m"]},
        "ptb_char": {"lstm_10m": ["gru_10m", "lru_10m"]},
    },
    "nlstm": {"text8_autocomplete": {"lstm_2x600": ["gru_2x600", "nlstm_1x600_d2"]}},
    "lrn": {"ptb": {"lstm_ft": ["gru_ft", "atr_ft", "sru_ft", "lrn"]}},
}
NOT_IN_GRID = {"lstm_m1200", "abl_lstm_m600", "lstm_10m"}


@dataclass
class StepRun:
    """One model's training step, and (for --breakdown) its head and its recurrent layers alone."""
    study: str
    model: str
    baseline: str
    cell: str
    width: int
    tokens: int
    step: Callable[[], None]
    head: Callable[[], None]
    recurrence: Callable[[], None]


def build_run(study: dict, run_config: dict, dataset: str, model_id: str, baseline: str) -> StepRun:
    from rnnrepro import grid

    cell = grid.Cell(study["study"], grid.data_key(study, run_config, dataset), model_id, 100, 1111,
                     run_config["budget"])
    cfg = grid.resolve_cell(study, run_config, cell)
    arch, recipe = cfg["architecture"], cfg["recipe"]
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    if study["task"] == "autocomplete":
        steps, batch, step, head_input, model = _autocomplete_step(cfg, generator)
        loss_of_head = lambda h: F.cross_entropy(model.dense(h.flatten(0, 1)),  # noqa: E731
                                                 torch.randint(2, model.dense.out_features, (h.shape[0] * h.shape[1],),
                                                               generator=generator))
    else:
        steps, batch, step, head_input, model = _language_model_step(cfg, study, generator)
        targets = torch.randint(model.decoder.out_features, (steps * batch,), generator=generator)
        loss_of_head = lambda h: F.cross_entropy(_head_output(model, h).flatten(0, 1), targets)  # noqa: E731
    hidden = torch.randn(steps, batch, head_input, generator=generator, requires_grad=True)
    embedded = torch.randn(steps, batch, arch["embedding_size"], generator=generator, requires_grad=True)

    def head() -> None:
        hidden.grad = None
        loss_of_head(hidden).backward()

    def recurrence() -> None:
        embedded.grad = None
        x = embedded
        for layer in model.layers:
            x, _ = layer(x, layer.init_state(batch))
        x.sum().backward()

    return StepRun(study["study"], model_id, baseline, arch["cell"], arch["hidden_size"], steps * batch, step, head,
                   recurrence)


def _language_model_step(cfg: dict, study: dict, generator: torch.Generator):
    from rnnrepro.data.registry import DATASETS
    from rnnrepro.train import language_model

    recipe = cfg["recipe"]
    vocab = study.get("vocab_sizes", {}).get(cfg["corpus"]) or DATASETS[cfg["corpus"]].expected.vocab_size
    model = language_model.build_model(cfg, vocab).train()
    optimizer = language_model.make_optimizer(model, recipe)
    steps, batch = recipe["bptt"], recipe["batch_size"]
    tokens = torch.randint(vocab, (steps + 1, batch), generator=generator)
    carried = {"state": model.init_state(batch)}

    def step() -> None:
        _, carried["state"] = language_model.training_step(model, optimizer, recipe, tokens[:-1], tokens[1:],
                                                            carried["state"])

    head_input = model.head.prior.in_features if model.head is not None else model.decoder.in_features
    return steps, batch, step, head_input, model


def _head_output(model, hidden: torch.Tensor) -> torch.Tensor:
    if model.head is None:
        return model.decoder(hidden)
    return model.head(hidden, model.decoder, model.dropouts.kind)


AUTOCOMPLETE_BATCH_LENGTH = 200  # the corpus's cut; most observations are 190-200 characters


def _autocomplete_step(cfg: dict, generator: torch.Generator):
    from rnnrepro.data.autocomplete import INPUT_SYMBOLS, get_spec
    from rnnrepro.train import autocomplete

    recipe = cfg["recipe"]
    classes = get_spec(cfg["corpus"]).classes
    model = autocomplete.build_model(cfg, classes).train()
    optimizer = autocomplete.make_optimizer(model, recipe)
    steps, batch = AUTOCOMPLETE_BATCH_LENGTH, recipe["batch_size"]
    inputs = torch.randint(1, len(INPUT_SYMBOLS), (steps, batch), generator=generator)
    targets = torch.randint(2, classes, (steps, batch), generator=generator)  # known words: 0 and 1 are pad, unk

    def step() -> None:
        autocomplete.training_step(model, optimizer, inputs, targets)

    return steps, batch, step, model.dense.in_features, model


def build_runs(studies: list[str], budget: str = "cpu") -> list[StepRun]:
    from rnnrepro.configuration import load_study

    run_config = {**yaml.safe_load((REPO / "config" / "config.yaml").read_text()), "budget": budget}
    runs = []
    for name in studies:
        study = load_study(name)
        for dataset, by_baseline in CPU_MODELS[name].items():
            for baseline, models in by_baseline.items():
                runs += [build_run(study, run_config, dataset, model, baseline) for model in [baseline, *models]]
    return runs


def count_operators(run: StepRun) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        run.step()
    return sum(1 for event in profiler.events() if event.name.startswith("aten::"))


def measure(studies: list[str], warmup: int, repeats: int, breakdown: bool, budget: str = "cpu") -> dict:
    """Per model: the seconds of every timed step (and with ``breakdown`` of its parts), round-robin.

    Not rnnrepro.timing: its Timer runs one step in blocks, one model after the other, while the x LSTM
    ratios on a shared machine whose speed drifts need every model's steps taken in turn."""
    runs = build_runs(studies, budget)
    parts = ("step", "head", "recurrence") if breakdown else ("step",)
    seconds = {run.model: {part: [] for part in (*parts, "step_cpu")} for run in runs}
    for repeat in range(warmup + repeats):
        for run in runs:
            for part in parts:
                started, started_cpu = time.perf_counter(), time.process_time()
                getattr(run, part)()
                if repeat >= warmup:
                    seconds[run.model][part].append(time.perf_counter() - started)
                    if part == "step":   # CPU time: what another process on the machine takes least from
                        seconds[run.model]["step_cpu"].append(time.process_time() - started_cpu)
    return {run.model: {"study": run.study, "baseline": run.baseline, "cell": run.cell, "width": run.width,
                        "tokens": run.tokens, "seconds": seconds[run.model],
                        **({"operators": count_operators(run)} if breakdown else {})} for run in runs}


def start_like_a_job(threads: int) -> None:
    """Threads and memory as a training job of the checkout being timed sets them (start_runtime, and
    start_run's keep_freed_memory where the checkout has it)."""
    from rnnrepro.runtime import start_runtime

    start_runtime(argparse.Namespace(device="cpu", threads=threads))
    try:
        from rnnrepro.train.common import keep_freed_memory
    except ImportError:  # a checkout from before training jobs kept freed memory for reuse
        return
    keep_freed_memory()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


def header(args: argparse.Namespace, rounds: str) -> str:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (f"{time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, {cpu_name()} ({os.cpu_count()} cores), "
            f"{args.threads} thread(s), load average {load} (1, 5, 15 min), {rounds}")


def median_ms(values: list[float]) -> float:
    return 1000 * statistics.median(values)


def print_single(results: dict, breakdown: bool, budget: str = "cpu") -> None:
    for study in dict.fromkeys(r["study"] for r in results.values()):
        rows = {model: r for model, r in results.items() if r["study"] == study}
        print(f"\n### {study}: one training step, {budget} budget\n")
        columns = "| model | cell | width | ms / step | tokens / s | x LSTM |"
        if breakdown:
            columns += " head | recurrence | rest | operators |"
        print(columns)
        print("|---|---|---:|---:|---:|---:|" + ("---:|" * 4 if breakdown else ""))
        for model, r in rows.items():
            step = median_ms(r["seconds"]["step"])
            line = (f"| {model}{_mark(model, r)} | {r['cell']} | {r['width']} | {step:,.1f} "
                    f"| {r['tokens'] / step * 1000:,.0f} | {step / median_ms(rows[r['baseline']]['seconds']['step']):.2f} |")
            if breakdown:
                head, recurrence = median_ms(r["seconds"]["head"]), median_ms(r["seconds"]["recurrence"])
                line += (f" {head / step:.0%} | {recurrence / step:.0%} | {max(0.0, step - head - recurrence) / step:.0%} "
                         f"| {r['operators']:,} |")
            print(line)


def _mark(model: str, result: dict) -> str:
    if model != result["baseline"]:
        return ""
    return " (baseline, not in the grid)" if model in NOT_IN_GRID else " (baseline)"


def print_before_after(before_rounds: list[dict], after_rounds: list[dict]) -> None:
    """Medians over all rounds; the CPU-time speedup also as its range over the rounds (each round's
    before and after medians), which shows how far the machine's load moved it."""
    before, after = merge(before_rounds), merge(after_rounds)
    for study in dict.fromkeys(r["study"] for r in after.values()):
        print(f"\n### {study}: one training step, cpu budget, before and after\n")
        print("| model | cell | width | before ms | after ms | speedup | before x LSTM | after x LSTM "
              "| CPU: before ms | after ms | speedup | range over rounds | before x LSTM | after x LSTM |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for model, r in after.items():
            if r["study"] != study:
                continue
            line = f"| {model}{_mark(model, r)} | {r['cell']} | {r['width']} |"
            for part in ("step", "step_cpu"):
                old, new = median_ms(before[model]["seconds"][part]), median_ms(r["seconds"][part])
                old_base = median_ms(before[r["baseline"]]["seconds"][part])
                new_base = median_ms(after[r["baseline"]]["seconds"][part])
                line += f" {old:,.1f} | {new:,.1f} | {old / new:.2f}x |"
                if part == "step_cpu":
                    speedups = [median_ms(b[model]["seconds"][part]) / median_ms(a[model]["seconds"][part])
                                for b, a in zip(before_rounds, after_rounds)]
                    line += f" {min(speedups):.2f}–{max(speedups):.2f}x |"
                line += f" {old / old_base:.2f} | {new / new_base:.2f} |"
            print(line)


def child_command(args: argparse.Namespace, output: Path, breakdown: bool) -> list[str]:
    """This file as a script: it imports nothing of rnnrepro before it measures, so it runs against any
    checkout, older ones included."""
    return [sys.executable, __file__, "--studies", *args.studies, "--budget", args.budget, "--threads", str(args.threads),
            "--repeats", str(args.repeats), "--json", str(output), *(["--breakdown"] if breakdown else [])]


def run_child(args: argparse.Namespace, source: Path, breakdown: bool) -> dict:
    """One measuring process with ``source`` (a checkout's src folder) first on the import path."""
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "result.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")])}
        subprocess.run(child_command(args, output, breakdown), env=env, check=True)
        return json.loads(output.read_text())


def merge(rounds: list[dict]) -> dict:
    merged = {model: {**r, "seconds": {part: [] for part in r["seconds"]}} for model, r in rounds[0].items()}
    for result in rounds:
        for model, r in result.items():
            for part, values in r["seconds"].items():
                merged[model]["seconds"][part] += values
    return merged


def main(args: argparse.Namespace) -> None:
    """``--shapes cpu`` of benchmarks/cells.py."""
    if args.json:   # a measuring process of --against, or a run that keeps its raw numbers
        start_like_a_job(args.threads)
        Path(args.json).write_text(json.dumps(measure(args.studies, 1, args.repeats, args.breakdown, args.budget)))
        return
    if args.against is None:
        start_like_a_job(args.threads)
        print(header(args, f"median of {args.repeats} round-robin repeats after 1 warm-up"))
        print_single(measure(args.studies, 1, args.repeats, args.breakdown, args.budget), args.breakdown, args.budget)
        return
    before_source, after_source = Path(args.against).resolve() / "src", REPO / "src"
    if not (before_source / "rnnrepro").is_dir():
        raise SystemExit(f"--against {args.against}: no src/rnnrepro there; give the root of another checkout")
    start = header(args, f"{args.rounds} alternating rounds of {args.repeats} round-robin repeats after 1 warm-up")
    before, after = [], []
    for round_ in range(args.rounds):
        order = [(before, before_source), (after, after_source)]
        for results, source in order if round_ % 2 == 0 else order[::-1]:
            results.append(run_child(args, source, breakdown=False))
    print(f"start: {start}\nend:   {header(args, 'before = ' + str(before_source.parent))}")
    print_before_after(before, after)
    if args.breakdown:
        print("\nWhere the step's time goes, after:")
        print_single(run_child(args, after_source, breakdown=True), breakdown=True)


if __name__ == "__main__":   # a measuring process of --against (child_command)
    parser = argparse.ArgumentParser(description="one measuring process of benchmarks/cells.py --shapes cpu --against")
    parser.add_argument("--studies", nargs="+", required=True, choices=list(CPU_MODELS))
    parser.add_argument("--budget", default="cpu")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--breakdown", action="store_true")
    main(parser.parse_args())
