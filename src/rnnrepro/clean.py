"""``make clean [BUDGET=smoke]``: remove one budget's results and logs, saying what goes.

    python -m rnnrepro.clean [BUDGET] [--dry-run]

Only what belongs to that budget alone goes (rnnrepro.layout): its results tree (run folders with their
weights and checkpoints, tables, figures, executed notebooks, the report) and its job logs; for the
smoke budget also its synthetic corpora (data/raw/synth_*, data/processed/synth_*), which no other
budget reads. The real corpora under data/, records/ and the other budgets' trees stay. A cell that a
trainer is training now (its ``trainer.lock`` held, or a live process with a fresh heartbeat in its
``progress.json``: rnnrepro.train.progress_file) is left alone and named, and the command fails, so that
no trainer writes into a cleaned tree. Standard library only, so it runs with any Python 3, with or
without the project's environment.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from .layout import DEFAULT_BUDGET, RESERVED_NAMES, SMOKE, budget_owned_paths, budgets_with_results
from .train import progress_file

EXIT_CTRL_C = 130  # as rnnrepro.console's, which needs tqdm: this module must not

SYNTHETIC = ("data/raw/synth_*", "data/processed/synth_*")


def doomed(budget: str, root: Path = Path(".")) -> list[Path]:
    """What cleaning ``budget`` removes under ``root``."""
    paths = budget_owned_paths(budget, root)
    if budget == SMOKE:
        paths += [path for pattern in SYNTHETIC for path in sorted(root.glob(pattern))]
    return paths


def in_training(paths: list[Path]) -> dict[Path, str]:
    """The run folders under ``paths`` that a trainer trains now, with who (pid and start)."""
    found = {}
    for path in paths:
        if not path.is_dir() or path.is_symlink():
            continue
        folders = {p.parent for name in (progress_file.LOCK, progress_file.NAME) for p in path.rglob(name)}
        for folder in sorted(folders):
            if who := progress_file.another_trainer(folder):
                found[folder] = who
    return found


def remove(path: Path, keep: set[Path]) -> None:
    """Remove ``path`` but the folders in ``keep`` (and the folders that hold them)."""
    if path in keep:
        return
    if not any(path in kept.parents for kept in keep):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        return
    for child in sorted(path.iterdir()):
        remove(child, keep)


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.clean", description=__doc__.split("\n\n")[0])
    parser.add_argument("budget", nargs="?", default=SMOKE,
                        help=f"whose results and logs to remove (default {SMOKE}; {DEFAULT_BUDGET}'s are results/ "
                             "and logs/ without the other budgets' folders)")
    parser.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    args = parser.parse_args(argv)
    if not args.budget or "/" in args.budget or args.budget.startswith(".") or args.budget in RESERVED_NAMES:
        # a folder of the default budget's tree (runs, tables, ...) is not a budget of its own
        print(f"[rnnrepro] error: {args.budget!r} is not a budget name (give one like smoke, cpu or paper)",
              file=sys.stderr)
        return 1
    paths = doomed(args.budget)
    others = [b for b in budgets_with_results() if b != args.budget]
    if not paths:
        print(f"[rnnrepro] budget {args.budget}: nothing to remove"
              + (f" (budgets with results here: {', '.join(others)}; `make clean BUDGET=<budget>`)" if others else ""))
        return 0
    total = sum(_size(path) for path in paths)
    verb = "would remove" if args.dry_run else "removing"
    print(f"[rnnrepro] budget {args.budget}: {verb} {', '.join(str(p) for p in paths)} ({total / 1e6:.1f} MB)")
    training = in_training(paths)
    for folder, who in training.items():
        print(f"[rnnrepro] kept {folder}: a trainer trains this cell now ({who}); let it finish or stop it, "
              f"then `make clean{'' if args.budget == SMOKE else f' BUDGET={args.budget}'}` again", file=sys.stderr)
    if not args.dry_run:
        for path in paths:
            remove(path, set(training))
    if others:
        print(f"[rnnrepro] kept: the results of {', '.join(others)} (`make clean BUDGET=<budget>`), records/, "
              "the real corpora in data/")
    return 1 if training else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("[rnnrepro] stopped by Ctrl-C", file=sys.stderr, flush=True)
        sys.exit(EXIT_CTRL_C)
