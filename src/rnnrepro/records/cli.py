"""The command line: ``python -m rnnrepro.records grow | list | render | pack | readme``, a thin face over
the package's modules.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ..configuration import ConfigError, check_budget, check_checkout, load_run_config, load_yaml

from .paths import RECORDS
from .packing import pack
from .units import _load
from .rendering import BY_BUDGET, hold_render_lock, render, render_by_budget, scales_first, stop_quietly
from .growing import grow
from .listing import list_units


def positive(kind):
    """An argparse type: a number of ``kind`` above 0 (none of grow's counts and times can be 0)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text}: give a number above 0")
        return value
    parse.__name__ = kind.__name__
    return parse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.records", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, default=RECORDS, help="the records folder (default: records)")
    parser.add_argument("--run-config", type=Path, default=Path("config/config.yaml"),
                        help="run config whose studies and seeds are used (its budget is replaced)")
    commands = parser.add_subparsers(dest="command", required=True)
    grow_cmd = commands.add_parser("grow", help="train and record the next unrecorded units of a budget")
    list_cmd = commands.add_parser("list", help="each unit of a budget: recorded, stale, damaged or missing")
    for command in (grow_cmd, list_cmd):
        command.add_argument("--budget", required=True)
        command.add_argument("--study", action="append", help="only this study (repeatable)")
        command.add_argument("--unit", action="append", metavar="PATTERN",
                             help="only the units whose name matches this shell pattern, e.g. 'pru/ptb/*' or "
                                  "'lrn/speed' (repeatable; names as `list` prints them)")
    grow_cmd.add_argument("--minutes", type=positive(float), required=True, help="start no unit after this many "
                          "minutes, and stop the running ones then (they resume from their checkpoints)")
    grow_cmd.add_argument("--jobs", type=positive(int), default=2, help="units side by side (default 2)")
    grow_cmd.add_argument("--threads", type=positive(int), default=1, help="CPU threads per unit (default 1)")
    grow_cmd.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                          help="more run-config values for Snakemake, e.g. data_mirror=DIR device=cpu")
    grow_cmd.add_argument("--commit", action="store_true", help="git-commit each unit's records as it is packed")
    pack_cmd = commands.add_parser("pack", help="record the small files of every finished real-data run")
    pack_cmd.add_argument("--budget", help="only this budget (default: every budget with a results tree)")
    pack_cmd.add_argument("--include-synthetic", action="store_true",
                          help="also record runs on synthetic corpora (to try rendering on smoke runs)")
    render_cmd = commands.add_parser("render", help="tables, figures and the scorecard from one budget's records")
    render_cmd.add_argument("--budget", required=True, action="append",
                            help="a recorded budget (repeatable: each is rendered into its own results tree)")
    render_cmd.add_argument("--jobs", type=int, default=2,
                            help="notebooks run side by side (default 2): worker processes, each running its "
                                 "notebooks in turn in one kernel")
    readme_cmd = commands.add_parser("readme", help="write README.md's scorecard section from the rendered scorecards")
    readme_cmd.add_argument("--budget", action="append",
                            help="a budget to list (repeatable; default: every recorded budget but another scale "
                                 "of one, which shows beside its own)")
    readme_cmd.add_argument("--check", action="store_true",
                            help="write nothing; fail when the README's section differs from the scorecards")
    for command in (grow_cmd, list_cmd, render_cmd):
        command.add_argument("--configfile", type=Path, metavar="FILE",
                             help="a config file of cells of your own (custom_cells, docs/custom_cells.md), merged "
                                  "over the run config as snakemake --configfile merges it, e.g. examples/mgu.yaml")
    args = parser.parse_args(argv)
    try:
        check_checkout()
        if args.command == "readme":
            from ..readme_scorecard import shown_budgets, update

            studies = load_run_config(load_yaml(args.run_config), source=str(args.run_config))["studies"]
            fresh, message = update(Path("README.md"), args.budget or shown_budgets(args.records, studies),
                                    args.check)
            print(f"[rnnrepro] {message}", file=sys.stdout if fresh else sys.stderr)
            return 0 if fresh else 1
        if args.command == "grow":
            return grow(args)
        if args.command == "list":
            return list_units(args)
        if args.command == "pack":
            if args.budget:
                check_budget(args.budget)
            packed = pack(args.budget, args.records, args.include_synthetic)
            speed = sum(path.parent.name == "speed" for path in packed)
            print(f"[rnnrepro] recorded {len(packed) - speed} runs and {speed} speed results under {args.records}/")
            return 0
        from ..analysis.run_notebook import shared_kernel
        from .rendering import notebook_pool

        signal.signal(signal.SIGINT, stop_quietly)
        failed = False
        budgets = list(scales_first(args.budget, args.run_config))
        for budget in budgets:  # every budget's lock before anything is written
            hold_render_lock(budget)
        if args.configfile:  # the scorecards' kernel sees the cells of your own only if exported before it starts
            _load(budgets[0], args.run_config, custom_file=args.configfile, rendered=budgets, records=args.records)
        states = {}
        # the scorecards' notebooks one after another in one kernel; the artifacts' in one pool of workers
        with shared_kernel() as kernel, notebook_pool(args.jobs) as pool:
            for budget in budgets:
                states[budget] = render(budget, args.records, args.run_config, jobs=args.jobs, kernel=kernel,
                                        custom_file=args.configfile, rendered=budgets, pool=pool, page=False)
                failed |= any(state.startswith("failed") for state in states[budget].values())
            shown = render_by_budget(kernel)
        # each budget's page, built once all are rendered: it shows the side-by-side figure of every budget
        from .. import results_page

        for budget, status in states.items():
            config, studies = _load(budget, args.run_config, custom_file=args.configfile, rendered=budgets,
                                    records=args.records)
            results_page.build({"budget": budget, "seeds": config["seeds"], "studies": list(studies)},
                               {key: state.removeprefix("not rendered: ") for key, state in status.items()
                                if state != "rendered"})
        if shown:
            print(f"[rnnrepro] the verdicts of every budget side by side ({', '.join(shown)}): {BY_BUDGET[1]}")
        return 1 if failed else 0
    except (ConfigError, FileNotFoundError, FileExistsError, RuntimeError, ValueError) as error:
        print(f"[rnnrepro] error: {error}", file=sys.stderr)
        return 1

