"""Forward + backward speed of every recurrent cell beside nn.LSTM (a benchmark, not a test).

    python benchmarks/cells.py            # both shapes, 2 warm-up + about 9 timed runs per cell
    python benchmarks/cells.py --quick    # 1 warm-up + about 3 timed runs
    python benchmarks/cells.py --cells lrn sru --shapes small
    python benchmarks/cells.py --device cuda            # on a GPU: cuDNN's LSTM is the reference row
    python benchmarks/cells.py --device cuda --eager    # the same without the GPU fast paths (before/after)
    python benchmarks/cells.py --device cuda --cells nested_lstm --split-k-products   # split-K step products
    python benchmarks/cells.py --shapes cpu --breakdown               # the cpu budget's models, a whole step
    python benchmarks/cells.py --shapes cpu --against ../before --rounds 3   # ... before (another checkout) and after

``--shapes cpu`` times whole training steps of every study's cpu-budget models instead of single
layers, one thread, relative to the LSTM of the same study and size (benchmarks/cpu_budget_steps.py
says how).

One layer per cell, on random input that requires a gradient (as an embedding's output does); a
timed run is forward, sum of the outputs, backward, timed by rnnrepro.timing (torch.utils.benchmark.Timer);
the table reports the median. Each cell is timed in turn, so on a shared machine compare only rows of
one run and rerun when the baseline moved.
"x nn.LSTM" is the cell's time per token over nn.LSTM's at the same input and hidden size, measured
in the same run; "target" is the project's bound for that ratio on the device (CPU: 3x, LRN and SRU 1x;
GPU: 1.5x at the AWD shape and 2x at the small one, LRN and SRU 0.33x; docs/benchmarks.md says why),
with "ok" or "MISSED".
On a GPU the Timer synchronises the GPU around every timed run, the float32 precision is
``--precision`` (default fp32: cuDNN's LSTM and the custom cells' products both in full FP32; see
rnnrepro.precision), and the warm-up runs capture the CUDA graphs and compile the Triton kernels. The LRU family needs input size = hidden size; its baseline is nn.LSTM at
hidden -> hidden, marked in the table.

``--floor`` adds a row "nested_lstm products only": the matrix products a depth-2 Nested LSTM cannot
avoid (its input projection and both of its gradients, the two step products forward and backward
at every step, the recurrent weight gradients), run through the same library calls as the cell and
nothing else -- the least its forward + backward can take on this machine.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass

import torch

import cpu_budget_steps
from rnnrepro import console, precision
from rnnrepro.cells import CELLS, build_layer, gpu
from rnnrepro.cells.recurrence import StepProduct, weight_grad
from rnnrepro.timing import seconds_per_call


@dataclass(frozen=True)
class Shape:
    batch: int
    steps: int
    input_size: int
    hidden_size: int


SHAPES = {
    "awd": Shape(batch=20, steps=70, input_size=400, hidden_size=1150),   # AWD-LSTM PTB, middle layer sizes
    "small": Shape(batch=32, steps=100, input_size=256, hidden_size=256),
}
# options of the cells that need them (PRU: g must divide 1150); the studies' settings may differ
CELL_OPTIONS = {"pru": {"groups": 2, "levels": 2}, "nested_lstm": {"depth": 2}, "rhn": {"recurrence_depth": 2},
                "grid_lstm": {"depth": 1}}
CPU_SHAPE = "cpu"  # whole training steps of the cpu budget's models (cpu_budget_steps.py)
SQUARE_ONLY = {"ps_lru", "rg_lru", "lru"}
BASELINE = "lstm"
FLOOR = "nested_lstm products only"
FAST_CELLS = {"lrn", "sru"}  # their papers' point is speed: at least 1/ratio times as fast as the LSTM
# (device, shape) -> bound on "x nn.LSTM" for every other cell; FAST_CELLS have FAST_TARGET[device]
TARGET = {("cpu", "awd"): 3.0, ("cpu", "small"): 3.0, ("cuda", "awd"): 1.5, ("cuda", "small"): 2.0}
FAST_TARGET = {"cpu": 1.0, "cuda": 0.33}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=[cell for cell in CELLS if cell != BASELINE],
                        choices=sorted(CELLS))
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=[*SHAPES, CPU_SHAPE],
                        help=f"layer shapes (default: {' '.join(SHAPES)}); {CPU_SHAPE!r}: whole training steps of "
                             f"the cpu budget's models")
    parser.add_argument("--quick", action="store_true", help="1 warm-up and about 3 timed runs instead of 2 and 9")
    parser.add_argument("--threads", type=int, help="default: 1 with --shapes cpu (the cpu grid runs one thread "
                                                    "per job), else torch's default")
    cpu = parser.add_argument_group(f"--shapes {CPU_SHAPE}")
    cpu.add_argument("--studies", nargs="+", default=list(cpu_budget_steps.CPU_MODELS),
                     choices=list(cpu_budget_steps.CPU_MODELS))
    cpu.add_argument("--budget", default="cpu", choices=["cpu", "cpu_wide"],
                     help="whose models: the cpu budget's (default) or its second scale's")
    cpu.add_argument("--repeats", type=int, default=5, help="timed round-robin repeats after 1 warm-up (default 5)")
    cpu.add_argument("--breakdown", action="store_true", help="split each step: head, recurrence, rest, operators")
    cpu.add_argument("--against", metavar="DIR", help="another checkout to time as 'before' (this one is 'after')")
    cpu.add_argument("--rounds", type=int, default=3, help="alternating before/after rounds of --against (default 3)")
    cpu.add_argument("--json", metavar="FILE", help="write the raw step times to FILE instead of a table")
    parser.add_argument("--floor", action="store_true", help="add the nested_lstm products-only row")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default=precision.DEFAULT, choices=precision.PRECISIONS,
                        help="float32 arithmetic of every cell and of cuDNN (default fp32)")
    parser.add_argument("--eager", action="store_true",
                        help="switch the GPU fast paths (Triton kernels, CUDA graphs) off, to measure their gain")
    parser.add_argument("--split-k-products", action="store_true",
                        help="the Nested LSTM's fused steps with Triton's split-K step products instead of cuBLAS's")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA GPU (torch.cuda.is_available() is False)")
    if CPU_SHAPE in args.shapes and args.device != "cpu":
        parser.error(f"--shapes {CPU_SHAPE} times the cpu budget's training steps on a CPU; drop --device")
    if args.threads is None:
        args.threads = 1 if args.shapes == [CPU_SHAPE] else torch.get_num_threads()
    return args


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def input_size_for(cell: str, shape: Shape) -> int:
    return shape.hidden_size if cell in SQUARE_ONLY else shape.input_size


def device_name(device: str, threads: int) -> str:
    if device == "cuda":
        return f"{torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
    return f"{cpu_name()}, {threads} threads"


def forward_backward(layer: torch.nn.Module, x: torch.Tensor, autocast) -> None:
    layer.zero_grad(set_to_none=True)
    x.grad = None
    with autocast():
        y, _ = layer(x, layer.init_state(x.size(1), device=x.device))
    y.float().sum().backward()


class NestedLSTMProducts(torch.nn.Module):
    """The unavoidable matrix products of a depth-2 Nested LSTM layer, in its own calls (see --floor)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        m = hidden_size
        self.weight_ih = torch.nn.Parameter(torch.randn(4 * m, input_size))
        self.weight_hh = torch.nn.Parameter(torch.randn(4 * m, m))
        self.weight_inner = torch.nn.Parameter(torch.randn(4 * m, 2 * m))
        self.hidden_size = m

    def init_state(self, batch: int, device=None) -> None:
        return None

    def forward(self, x: torch.Tensor, state=None):
        steps, batch, m = x.size(0), x.size(1), self.hidden_size
        with torch.no_grad():
            projected = torch.nn.functional.linear(x, self.weight_ih)
            outer, inner = StepProduct(self.weight_hh, batch), StepProduct(self.weight_inner, batch)
            h, joined, grad = x.new_zeros(batch, m), x.new_zeros(batch, 2 * m), x.new_zeros(batch, 4 * m)
            for t in range(steps):
                outer(h, add=projected[t])
                inner(joined)
            outer_t = StepProduct(self.weight_hh.t().contiguous(), batch)
            inner_t = StepProduct(self.weight_inner.t().contiguous(), batch)
            for t in range(steps):
                inner_t(grad)
                outer_t(grad)
            grads = projected.new_zeros(projected.shape)
            for inputs in (x.new_zeros(steps, batch, m), x.new_zeros(steps, batch, 2 * m), x):
                weight_grad(grads, inputs)   # W_hh^0, [W_ih W_hh]^1, W_ih^0
            torch.matmul(grads, self.weight_ih)   # the input's gradient
        return x.new_zeros(steps, batch, m, requires_grad=True), None


def build_runs(cells: list[str], shape: Shape, floor: bool = False, device: str = "cpu") -> dict[tuple[str, int], tuple]:
    """(cell, input size) -> (layer, input) for every cell and the nn.LSTM baseline(s) it needs."""
    torch.manual_seed(0)
    runs = {}
    if floor:
        runs[FLOOR, shape.input_size] = (NestedLSTMProducts(shape.input_size, shape.hidden_size).to(device),
                                         torch.randn(shape.steps, shape.batch, shape.input_size, device=device))
        cells = [*cells, BASELINE]
    for cell in cells:
        for name in (cell, BASELINE):
            key = (name, input_size_for(cell, shape))
            if key not in runs:
                layer = build_layer(name, key[1], shape.hidden_size, **CELL_OPTIONS.get(name, {})).to(device)
                runs[key] = (layer, torch.randn(shape.steps, shape.batch, key[1], device=device, requires_grad=True))
    return runs


def median_seconds(runs: dict, warmup: int, repeats: int, autocast) -> dict[tuple[str, int], float]:
    return {key: seconds_per_call(lambda: forward_backward(layer, x, autocast), warmup, repeats,
                                  f"{key[0]}, input {key[1]}") for key, (layer, x) in runs.items()}


def target_for(cell: str, shape_name: str, device: str) -> float | None:
    if cell in (BASELINE, FLOOR):
        return None
    return FAST_TARGET[device] if cell in FAST_CELLS else TARGET[device, shape_name]


def benchmark_shape(cells: list[str], shape_name: str, warmup: int, repeats: int, floor: bool, device: str,
                    autocast) -> list[dict]:
    shape = SHAPES[shape_name]
    runs = build_runs(cells, shape, floor, device)
    median = median_seconds(runs, warmup, repeats, autocast)
    baselines = sorted((key for key in runs if key[0] == BASELINE), key=lambda key: key[1] != shape.input_size)
    tokens = shape.batch * shape.steps
    return [{"cell": key[0], "options": CELL_OPTIONS.get(key[0], {}), "input": key[1],
             "ms": 1000 * median[key], "tokens_per_s": tokens / median[key],
             "vs_lstm": median[key] / median[BASELINE, key[1]], "target": target_for(key[0], shape_name, device)}
            for key in baselines + [(cell, input_size_for(cell, shape)) for cell in cells]
            + [key for key in runs if key[0] == FLOOR]]


def print_table(name: str, shape: Shape, rows: list[dict], device: str) -> None:
    baseline = "nn.LSTM (cuDNN)" if device == "cuda" else "nn.LSTM"
    print(f"\n### {name}: batch {shape.batch}, length {shape.steps}, "
          f"{shape.input_size} -> {shape.hidden_size}, forward + backward, {device}\n")
    print(f"| cell | options | input | ms / batch | tokens / s | x {baseline} | target |")
    print("|---|---|---:|---:|---:|---:|---|")
    for row in rows:
        options = ", ".join(f"{k}={v}" for k, v in row["options"].items())
        target = "" if row["target"] is None else \
            f"<= {row['target']:.2f} {'ok' if row['vs_lstm'] <= row['target'] else 'MISSED'}"
        print(f"| {row['cell']} | {options} | {row['input']} | {row['ms']:.2f} | {row['tokens_per_s']:,.0f} "
              f"| {row['vs_lstm']:.2f} | {target} |")


def main() -> None:
    args = parse_args()
    console.setup_logging()
    if CPU_SHAPE in args.shapes:
        cpu_budget_steps.main(args)
        args.shapes = [name for name in args.shapes if name != CPU_SHAPE]
        if not args.shapes:
            return
    torch.set_num_threads(args.threads)
    precision.apply(args.precision)
    warmup, repeats = (1, 3) if args.quick else (2, 9)
    fast_paths = "off (--eager)" if args.eager else ("on" if args.device == "cuda" else "CPU: none")
    if args.split_k_products and not args.eager:
        fast_paths += ", split-K step products (--split-k-products)"
    print(f"{time.strftime('%Y-%m-%d')}, torch {torch.__version__}, {device_name(args.device, args.threads)}, "
          f"precision {args.precision}, GPU fast paths {fast_paths}, "
          f"median of about {repeats} timed runs after {warmup} warm-up")
    autocast = lambda: precision.autocast(args.precision, args.device)  # noqa: E731
    with gpu.settings(kernels=not args.eager, graphs=not args.eager, triton_products=args.split_k_products):
        for name in args.shapes:
            rows = benchmark_shape(args.cells, name, warmup, repeats, args.floor, args.device, autocast)
            print_table(name, SHAPES[name], rows, args.device)


if __name__ == "__main__":
    main()
