"""``list``: each unit of a budget, recorded, stale, damaged or missing."""

from __future__ import annotations

import argparse


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
    return 0
