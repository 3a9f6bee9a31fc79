"""How long the training cells of a cell of your own will take, said before they train.

A cell of your own copies a baseline's model and recipe (rnnrepro.custom_cells), so the baseline's recorded
runs at the same budget, corpus and fraction (``records/<budget>/runs/<study>/<corpus>/<baseline>/frac<f>/``)
say how long one of its training cells takes: each record's mean seconds per epoch (``history.csv``)
times its epochs (``metrics.json``), plus what the run spent outside its epochs (the start, the
validation after the last epoch and the test: ``wall_seconds`` − ``train_seconds``). Its tuning runs are
timed by the baseline's tuning runs (the same rate factor where recorded). Where the cell has a parameter
count of its own (``param_budget``), the epoch time is scaled by its ratio to the baseline's parameters, as
a step's work grows with the weights it multiplies; sized to the baseline's count, the ratio is about 1.
Records made on this machine's CPU model are used where there are some, else all, and the words say
which CPU they ran on. The epochs a cell of your own needs may differ from its baseline's: the estimate is
a scale, not a promise.

    python -m rnnrepro.records list --budget cpu --configfile examples/mgu.yaml
    python -m rnnrepro.status --budget cpu --configfile examples/mgu.yaml
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from . import grid, tuning
from .progress_reading import wall_time
from .machine import cpu_model


@dataclass
class Timing:
    """One recorded run of a baseline: what the estimate is made from."""
    seconds_per_epoch: float
    epochs: int
    overhead: float
    params: int | None
    cpu: str


def recorded_timings(records: Path, cell: grid.Cell, model: str) -> list[Timing]:
    """The recorded runs of ``model`` at ``cell``'s budget, corpus and fraction (every seed)."""
    folder = Path(records) / cell.budget / "runs" / cell.study / cell.corpus / model / f"frac{cell.fraction}"
    found = []
    for run in sorted(folder.glob("seed*")):
        try:
            metrics = json.loads((run / "metrics.json").read_text())
            with open(run / "history.csv", newline="") as f:
                seconds = [float(row["seconds"]) for row in csv.DictReader(f)]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged record times nothing (records list names it)
        if not seconds or not metrics.get("epochs"):
            continue
        overhead = max(0.0, float(metrics.get("wall_seconds") or 0) - float(metrics.get("train_seconds") or 0))
        found.append(Timing(statistics.fmean(seconds), int(metrics["epochs"]), overhead, metrics.get("params"),
                            (metrics.get("machine") or {}).get("cpu") or "an unnamed CPU"))
    return found


@dataclass
class Estimate:
    """The training cells of one cell of your own in one study, and how long they should take."""
    study: str
    name: str
    cells: int
    tuning_cells: int
    seconds: float | None
    how: list[str]

    def line(self) -> str:
        kinds = f"{self.tuning_cells} tuning runs, {self.cells - self.tuning_cells} seeds" if self.tuning_cells \
            else f"{self.cells} seeds"
        head = f"your cell {self.name} ({self.study}): {self.cells} training cells to train ({kinds})"
        if not self.cells:
            return f"your cell {self.name} ({self.study}): nothing to train at this budget"
        how = "".join(f"\n    {words}" for words in self.how)
        if self.seconds is None:
            return f"{head}; no time estimate:{how}"
        return f"{head}, estimated {wall_time(self.seconds)} of wall time one after another (two side by side: about half):{how}"


def _timed(study: dict, config: dict, name: str, cell: grid.Cell, records: Path,
           machine: str) -> tuple[float | None, str]:
    """One training cell's estimated seconds and the words of how; None where nothing is recorded. A tuning
    run whose baseline's tuning run at that rate is not recorded is timed by the baseline's seeds, at most
    the tuning's epoch cap."""
    added = study["custom_cells"][name]
    variant = tuning.parse_variant(cell.model)
    baseline = tuning.variant_id(added["like"], variant[1]) if variant else added["like"]
    timings = recorded_timings(records, cell, baseline)
    cap = None
    if not timings and variant:
        baseline, cap = added["like"], grid.resolve_cell(study, config, cell)["recipe"].get("epochs")
        timings = recorded_timings(records, cell, baseline)
    if not timings:
        return None, (f"{baseline} has no record at {cell.budget} on {cell.corpus} frac{cell.fraction} "
                      f"(`records list --budget {cell.budget}`)")
    here = [t for t in timings if t.cpu == machine]
    used = here or timings
    architecture = grid.architecture(study, config, name, grid.trained_corpus(study, config, cell))
    ratios = [architecture["param_budget"] / t.params for t in used if architecture.get("param_budget") and t.params]
    ratio = statistics.fmean(ratios) if ratios else 1.0
    epochs = [min(t.epochs, cap or t.epochs) for t in used]
    seconds = statistics.fmean(t.seconds_per_epoch * n * ratio + t.overhead for t, n in zip(used, epochs))
    cpus = sorted({t.cpu for t in used})
    where = f"on {', '.join(cpus)}" + (", this machine's CPU" if here else f", not this machine's {machine}")
    scaled = f", × {ratio:.2f} for its parameters" if ratios else ", not scaled (no parameter count of its own)"
    capped = f", capped at the tuning's {cap}" if cap and any(t.epochs > cap for t in used) else ""
    return seconds, (f"{wall_time(seconds)} {'a tuning run' if variant else 'a seed'} from {baseline}'s "
                     f"{len(used)} recorded run{'s' if len(used) > 1 else ''} "
                     f"({statistics.fmean(t.seconds_per_epoch for t in used):.1f} s/epoch, "
                     f"{statistics.fmean(epochs):.0f} epochs{capped}) {where}{scaled}")


def estimates(studies: dict, config: dict, to_train: list[grid.Cell], records: Path = Path("records"),
              machine: str | None = None) -> list[Estimate]:
    """For each cell of your own in each study, its training cells among ``to_train`` and their time."""
    machine = machine or cpu_model()
    found = []
    for study_name, study in studies.items():
        for name in study.get("custom_cells", {}):
            mine = [c for c in to_train if c.study == study_name
                    and (c.model == name or (tuning.parse_variant(c.model) or ("",))[0] == name)]
            total, how, unknown = 0.0, {}, False
            for cell in mine:
                seconds, words = _timed(study, config, name, cell, records, machine)
                unknown |= seconds is None
                total += seconds or 0.0
                how[words] = None  # the seeds of one model are timed by the same records: said once
            tuned = sum(tuning.parse_variant(c.model) is not None for c in mine)
            found.append(Estimate(study_name, name, len(mine), tuned, None if unknown else total, list(how)))
    return found
