"""The learning rate chosen for a tuned model (rnnrepro.tuning): the workflow's ``lr_choice`` job writes
its tuning curve and the factor chosen to ``<results>/tuning/<study>/<corpus>/<model>/frac<f>.json``,
before the cells it tunes are planned (workflow/rules/train.smk).

    python -m rnnrepro.lr_choice --cell '{"study": "pru", "corpus": "ptb", "model": "lstm_m1000", ...}' --output FILE
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import grid, tuning
from .console import run_command


def write_choice(study: dict, config: dict, cell: grid.Cell, output: Path, records: Path = Path("records")) -> dict:
    """The tuning curve behind a model's cells and the factor chosen, as JSON (the workflow's
    ``lr_choice``; the tuning notebook reads the same curves from the variants' metrics)."""
    points = grid.tuning_curve(study, config, cell, records)
    factor = tuning.chosen_factor(points)
    recipe_lr = grid.resolve_cell(study, config, cell)["recipe"]["lr"] / factor
    factors = sorted({p["factor"] for p in points})
    result = {"study": cell.study, "corpus": cell.corpus, "model": cell.model, "fraction": cell.fraction,
              "budget": cell.budget, "recipe_lr": recipe_lr, "lr_factor": factor, "lr": recipe_lr * factor,
              "at_edge_of_grid": factor in (factors[0], factors[-1]),
              "curve": [{**p, "lr": recipe_lr * p["factor"]} for p in points]}
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    partial.write_text(json.dumps(result, indent=1) + "\n")
    partial.replace(output)
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m rnnrepro.lr_choice --cell JSON --output FILE``: the workflow's lr_choice job."""
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.lr_choice", description=main.__doc__)
    parser.add_argument("--cell", required=True, help="the cell as JSON: study, corpus, model, fraction, seed, "
                                                      "budget, precision")
    parser.add_argument("--output", required=True, type=Path)
    args = parser.parse_args(argv)
    fields = json.loads(args.cell)
    cell = grid.Cell(**fields)
    config = {"budget": cell.budget, "precision": cell.precision, "device": "auto"}
    result = write_choice(grid.load_study(cell.study), config, cell, args.output)
    print(f"[rnnrepro] {cell.study}/{cell.corpus}/{cell.model}/frac{cell.fraction}: learning rate {result['lr']:g} "
          f"(x{result['lr_factor']:g} the recipe's), chosen on validation from {len(result['curve'])} tuning "
          f"cells", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))
