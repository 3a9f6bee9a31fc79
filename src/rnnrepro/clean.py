"""``make clean [BUDGET=smoke]``: remove one budget's results and logs, saying what goes.

    python -m rnnrepro.clean [BUDGET] [--dry-run]

Only what belongs to that budget alone goes (rnnrepro.layout): its results tree (run folders with their
weights and checkpoints, tables, figures, executed notebooks, the report) and its job logs; for the
smoke budget also its synthetic corpora (data/raw/synth_*, data/processed/synth_*), which no other
budget reads. The real corpora under data/, records/ and the other budgets' trees stay. Standard
library only, so it runs with any Python 3, with or without the project's environment.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from . import console
from .layout import DEFAULT_BUDGET, RESERVED_NAMES, SMOKE, budget_owned_paths, budgets_with_results

SYNTHETIC = ("data/raw/synth_*", "data/processed/synth_*")


def doomed(budget: str, root: Path = Path(".")) -> list[Path]:
    """What cleaning ``budget`` removes under ``root``."""
    paths = budget_owned_paths(budget, root)
    if budget == SMOKE:
        paths += [path for pattern in SYNTHETIC for path in sorted(root.glob(pattern))]
    return paths


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
    if not args.dry_run:
        for path in paths:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    if others:
        print(f"[rnnrepro] kept: the results of {', '.join(others)} (`make clean BUDGET=<budget>`), records/, "
              "the real corpora in data/")
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
