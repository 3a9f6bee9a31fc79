"""Wall time of one training grid at several training jobs per GPU (a benchmark, not a test).

    python benchmarks/jobs_per_gpu.py --config budget=reduced data_mirror=/path/to/mirror   # 1, 2, 4, 8
    python benchmarks/jobs_per_gpu.py --jobs 1 3 --config budget=smoke                      # a CPU check

The grid is one dataset's half of an artifact's cells (default: the PTB half of PRU Table 1). For each
jobs-per-GPU value N the project is copied into a fresh temporary folder (the parts tests/conftest.py
copies), the data the cells train on are prepared untimed, and then `snakemake --cores CORES <every cell's metrics.json>
--config ...` runs there with RNNREPRO_JOBS_PER_GPU=N and profiles/default, so that at most GPUs x N
cells train at once. The table prints the wall time per N and its speed-up over the first N. Without a
GPU the setting changes nothing (the profile then limits training jobs by the cores only); the script
says so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.gpus import JOBS_PER_GPU_ENV, gpu_count

PROJECT_PARTS = ["Snakefile", "workflow", "config", "notebooks", "profiles", "src"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2, 4, 8], help="jobs-per-GPU values to time")
    parser.add_argument("--study", default="pru")
    parser.add_argument("--artifact", default="table1")
    parser.add_argument("--dataset", default="ptb", help="the paper dataset whose cells make the grid")
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="passed to snakemake --config (e.g. budget=reduced data_mirror=DIR)")
    args = parser.parse_args()
    if any(n < 1 for n in args.jobs):
        parser.error(f"--jobs {args.jobs}: every value must be a whole number >= 1")
    return args


def grid_targets(args) -> tuple[list[str], list[str]]:
    """metrics.json of every cell of the artifact on the dataset, and the data files they train on,
    under the --config overrides."""
    config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    for setting in args.config:
        key, _, value = setting.partition("=")
        config[key] = yaml.safe_load(value)
    study = load_study(args.study)
    cells = [cell for cell in grid.artifact_cells(study, config, args.artifact)
             if grid.dataset_for(study, config, cell.corpus) == args.dataset]
    if not cells:
        sys.exit(f"no cells of {args.study}/{args.artifact} on dataset {args.dataset!r} under this config; "
                 f"check --dataset and --config")
    data = set()
    for cell in cells:
        corpus = grid.trained_corpus(study, config, cell)
        data |= {grid.train_file(corpus, cell.fraction), f"{grid.PROCESSED}/{corpus}/stats.json"}
    return [f"{cell.run_dir}/metrics.json" for cell in cells], sorted(data)


def snakemake(project: Path, targets: list[str], args, per_gpu: int) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent   # this environment's snakemake, and its python for the rules
    command = [str(bin_dir / "snakemake"), "--cores", str(args.cores), *targets]
    if args.config:
        command += ["--config", *args.config]
    env = {**os.environ, JOBS_PER_GPU_ENV: str(per_gpu), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(command, cwd=project, capture_output=True, text=True, env=env)


def time_grid(targets: list[str], data_files: list[str], args, per_gpu: int) -> float:
    with tempfile.TemporaryDirectory(prefix=f"jobs-per-gpu-{per_gpu}-") as folder:
        project = Path(folder)
        for part in PROJECT_PARTS:
            source = REPO_ROOT / part
            if source.is_dir():
                shutil.copytree(source, project / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            else:
                shutil.copy(source, project / part)
        data = snakemake(project, data_files, args, per_gpu)
        if data.returncode:
            sys.exit(f"preparing the data failed (N={per_gpu}):\n{data.stderr[-3000:]}")
        started = time.perf_counter()
        run = snakemake(project, targets, args, per_gpu)
        elapsed = time.perf_counter() - started
        if run.returncode:
            sys.exit(f"the grid failed at {per_gpu} jobs per GPU:\n{run.stderr[-3000:]}")
    return elapsed


def main() -> None:
    args = parse_args()
    targets, data_files = grid_targets(args)
    gpus = gpu_count()
    print(f"{time.strftime('%Y-%m-%d')}, {args.study}/{args.artifact} on {args.dataset}: {len(targets)} cells, "
          f"--cores {args.cores}, {gpus} GPU(s), --config {' '.join(args.config) or '(none)'}")
    if not gpus:
        print("no GPU: the jobs-per-GPU setting changes nothing here (training jobs are limited by --cores)")
    rows = [(n, time_grid(targets, data_files, args, n)) for n in args.jobs]
    print(f"{'jobs/GPU':>9}{'wall s':>10}{'speed-up':>10}")
    for n, seconds in rows:
        print(f"{n:>9}{seconds:>10.1f}{rows[0][1] / seconds:>10.2f}")


if __name__ == "__main__":
    main()
