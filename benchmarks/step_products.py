"""The Nested LSTM's step products on a GPU: cuBLAS against Triton's split-K kernel (a benchmark, not a test).

    python benchmarks/step_products.py                         # the AWD shape: batch 20, width 1150
    python benchmarks/step_products.py --batch 64 --hidden 600  # the nlstm study's model
    python benchmarks/step_products.py --sweep                 # also every block size and split count tried

A depth-2 Nested LSTM step has four dependent products with only B rows: forward h W_hh^0 (K = M,
N = 4M) and [x̃; h̃] W^1 (2M, 4M), backward g W_hh^0 (4M, M) and g W^1 (4M, 2M). Each is timed alone,
in IEEE FP32, as ``torch.addmm`` (what the cell's cuBLAS path runs, the step's other term added) and as
``split_product`` alone (the cell's fused kernels add up its partials while they read them).
Prints microseconds per product, median of 5 blocks of 200 calls timed with CUDA events after a warm-up.
``--sweep`` tries SPLIT_BLOCK_N x SPLIT_BLOCK_K x SPLIT_PROGRAMS_PER_SM and prints the best per product,
to choose the constants in rnnrepro.cells.gpu.kernels.
"""

from __future__ import annotations

import argparse
import itertools
import statistics

import torch

from rnnrepro import precision
from rnnrepro.cells import gpu

SWEEP = {"SPLIT_BLOCK_N": (32, 64, 128), "SPLIT_BLOCK_K": (16, 32, 64), "SPLIT_PROGRAMS_PER_SM": (1, 2, 4, 8)}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=1150)
    parser.add_argument("--sweep", action="store_true", help="try every block size and split count of SWEEP")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU (torch.cuda.is_available() is False)")
    if not gpu.triton_available():
        parser.error("needs triton (CUDA builds of torch install it)")
    return args


def microseconds(call, blocks: int = 5, calls: int = 200) -> float:
    for _ in range(20):
        call()
    times = []
    for _ in range(blocks):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            call()
        end.record()
        torch.cuda.synchronize()
        times.append(1000 * start.elapsed_time(end) / calls)
    return statistics.median(times)


def products(batch: int, m: int) -> dict[str, tuple]:
    """name -> (step input (B, K), matrix (K, N) as the cell passes it, the step's other term (B, N))."""
    torch.manual_seed(0)
    weight_outer, weight_inner = torch.randn(4 * m, m, device="cuda"), torch.randn(4 * m, 2 * m, device="cuda")
    rows = lambda width: torch.randn(batch, width, device="cuda")  # noqa: E731
    return {"forward h W_hh^0": (rows(m), weight_outer.t(), rows(4 * m)),
            "forward [x~; h~] W^1": (rows(2 * m), weight_inner.t(), rows(4 * m)),
            "backward g W_hh^0": (rows(4 * m), weight_outer, rows(m)),
            "backward g W^1": (rows(4 * m), weight_inner, rows(2 * m))}


def cublas_layout(name: str, matrix: torch.Tensor) -> torch.Tensor:
    """The matrix as the cell's cuBLAS path holds it: backward multiplies by a contiguous copy of W^T."""
    return matrix.t().contiguous().t() if name.startswith("backward") else matrix


def main() -> None:
    args = parse_args()
    precision.apply("fp32")
    from rnnrepro.cells.gpu import kernels
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, batch {args.batch}, width {args.hidden}, "
          f"fp32; microseconds per product")
    cases = products(args.batch, args.hidden)
    defaults = {name: getattr(kernels, name) for name in SWEEP}
    print(f"\n| product | cuBLAS addmm | split-K ({', '.join(f'{k}={v}' for k, v in defaults.items())}) | slices |")
    print("|---|---:|---:|---:|")
    for name, (x, matrix, add) in cases.items():
        cublas_matrix = cublas_layout(name, matrix)
        cublas = microseconds(lambda: torch.addmm(add, x, cublas_matrix))
        split = microseconds(lambda: kernels.split_product(x, matrix, add))
        slices = kernels.split_count(args.batch, x.size(1), matrix.size(1), x.device)[0]
        print(f"| {name} | {cublas:.1f} | {split:.1f} | {slices} |")
    if not args.sweep:
        return
    print("\n| product | best split-K | settings | worst |")
    print("|---|---:|---|---:|")
    for name, (x, matrix, add) in cases.items():
        timings = {}
        for values in itertools.product(*SWEEP.values()):
            for key, value in zip(SWEEP, values):
                setattr(kernels, key, value)
            timings[values] = microseconds(lambda: kernels.split_product(x, matrix, add), blocks=3, calls=100)
        best = min(timings, key=timings.get)
        print(f"| {name} | {timings[best]:.1f} | {', '.join(f'{k}={v}' for k, v in zip(SWEEP, best))} "
              f"| {max(timings.values()):.1f} |")
        for key, value in defaults.items():
            setattr(kernels, key, value)


if __name__ == "__main__":
    main()
