"""``list``: each unit of a budget, recorded, stale, damaged or missing; with cells of your own
(``--configfile``), how many of their training cells will train and about how long they take
(rnnrepro.estimates)."""

from __future__ import annotations

import argparse

from .. import tuning
from ..estimates import estimates
from ..record_checks import record_problem
from .units import _load, units
from .growing import selected


def list_units(args: argparse.Namespace) -> int:
    config, studies = _load(args.budget, args.run_config, args.study, custom_file=args.configfile)
    found = selected(units(studies, config), args.unit)
    counts = {"recorded": 0, "stale": 0, "damaged": 0, "missing": 0}
    for unit in found:
        problems = unit.problems(studies, config, args.records)
        state = next((s for s in ("damaged", "stale") if any(f"{s} record" in p for p in problems)),
                     "missing" if problems else "recorded")
        counts[state] += 1
        shown = next((p for p in problems if f"{state} record" in p), None)
        print(f"{state:9s} {unit.name}" + (f"  ({shown})" if shown else ""))
    print(f"{len(found)} units: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
    mine = {name for study in studies.values() for name in study.get("custom_cells", {})}
    if mine:
        cells = dict.fromkeys(cell for unit in found for cell in unit.cells
                              if (tuning.parse_variant(cell.model) or (cell.model,))[0] in mine)
        to_train = [cell for cell in cells if record_problem(studies[cell.study], config, cell, args.records)]
        for estimate in estimates(studies, config, to_train, args.records):
            print(estimate.line())
    return 0
