"""What is recorded: the budget's grid as units of work, and which cells' records stand in for training.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .. import grid
from ..record_checks import record_problem
from ..configuration import ConfigError, check_budget, load_config_file, load_run_config
from ..custom_cell_checks import check_custom_cells
from ..custom_cells import export as export_custom_cells

from .paths import RECORDS, record_dir, results_dir


@dataclasses.dataclass
class Unit:
    """One piece of ``grow``'s work: Snakemake targets, and the records they make."""
    name: str
    study: str
    cells: list[grid.Cell]          # training cells, parents first
    targets: list[str]              # what Snakemake builds (results paths)
    evaluations: list[str]          # evaluation outputs among the targets
    speed: str | None = None        # results/<budget>/speed/<study>.json of a speed unit
    needs: list[str] = dataclasses.field(default_factory=list)  # units recorded first: its tuning cells'

    def problems(self, studies: dict, config: dict, records: Path) -> list[str]:
        """Why this unit is not (fully) recorded; empty when it is."""
        study = studies[self.study]
        out = [p for p in (record_problem(study, config, cell, records) for cell in self.cells) if p]
        root = results_dir(config["budget"])
        for path in self.evaluations + ([self.speed] if self.speed else []):
            if not (record_dir(records, config["budget"]) / Path(path).relative_to(root)).exists():
                out.append(f"{Path(path).relative_to(root)}: not recorded")
        return out


def record_of(cell: grid.Cell, records: Path = RECORDS) -> Path:
    """The folder that records a cell (it may not exist)."""
    return record_dir(records, cell.budget) / "runs" / cell.key


class Restorer:
    """Which cells' records stand in for training them in a Snakemake run (workflow/rules/records.smk):
    a cell is restored from ``records/<budget>/`` when its whole unit is recorded and current (its
    record, the records of the cells it is finetuned from, and every evaluation output the budget's
    artifacts read from it: :meth:`Unit.problems`), this machine has not trained it (no ``model.pt`` in
    its run folder: a run of this machine is never replaced), and the run needs none of its weights
    (``weights_needed``: the cells of the targeted artifacts that read ``model.pt``, which records do
    not keep). Otherwise the cell trains, as it would without records."""

    def __init__(self, studies: dict, config: dict, weights_needed: set[grid.Cell] = frozenset(),
                 records: Path = RECORDS):
        self.studies, self.config, self.records = studies, config, records
        self.weights_needed = set(weights_needed)
        self.unit_of = {cell: unit for unit in units(studies, config) for cell in unit.cells}
        self._problems: dict[str, list[str]] = {}

    def problem(self, cell: grid.Cell) -> str | None:
        """Why the cell is trained rather than restored, or None when its record stands in for it."""
        if Path(cell.run_dir, "model.pt").exists():
            return f"{cell.key}: trained on this machine ({cell.run_dir}/model.pt)"
        unit = self.unit_of.get(cell)
        if unit is None:  # a run folder asked for by path, outside the budget's artifacts
            return record_problem(self.studies[cell.study], self.config, cell, self.records)
        needed = [c for c in unit.cells if c in self.weights_needed]
        if needed:
            return f"{cell.key}: the run needs the weights of {needed[0].key}, which records do not keep"
        if unit.name not in self._problems:
            self._problems[unit.name] = unit.problems(self.studies, self.config, self.records)
        found = self._problems[unit.name]
        if not found:
            return None
        return found[0] if found[0].startswith(cell.key) else f"{cell.key}: {found[0]}"


def _chain(study: dict, cell: grid.Cell) -> list[grid.Cell]:
    """The cell and the cells it is finetuned from, parents first."""
    chain = [cell]
    while (parent := grid.parent_cell(study, chain[0])) is not None:
        chain.insert(0, parent)
    return chain


def units(studies: dict, config: dict) -> list[Unit]:
    """The budget's grid as units of work, in the study files' order; cells shared by two chains (a
    parent finetuned twice) make one unit, so units never share a target."""
    found: list[Unit] = []
    for name, study in studies.items():
        evaluations: dict[grid.Cell, set[str]] = {}
        order: list[grid.Cell] = []
        for artifact in grid.artifacts(study, config):
            spec = study["artifacts"][artifact]
            for cell in grid.artifact_cells(study, config, artifact):
                order.append(cell)
                evaluations.setdefault(cell, set()).update(spec.get("evaluations", []))
        for cell in dict.fromkeys(order):
            chain = _chain(study, cell)
            evals = [f"{cell.run_dir}/{e}.json" for e in sorted(evaluations[cell])]
            owner = next((u for u in found if u.study == name and set(u.cells) & set(chain)), None)
            if owner is None:
                needs = [variant.key for variant in grid.tuning_cells_of(study, config, chain[0])]
                found.append(Unit(cell.key, name, chain, [f"{c.run_dir}/metrics.json" for c in chain] + evals, evals,
                                  needs=needs))
                continue
            new = [c for c in chain if c not in owner.cells]
            owner.cells += new
            owner.targets += [f"{c.run_dir}/metrics.json" for c in new] + evals
            owner.evaluations += evals
        if any(study["artifacts"][a].get("speed") for a in grid.artifacts(study, config)):
            path = f"{grid.results_dir(config['budget'])}/speed/{name}.json"
            found.append(Unit(f"{name}/speed", name, [], [path], [], speed=path))
    return found


def recorded_budgets(custom: dict, budgets: list[str], records: Path = RECORDS) -> dict:
    """The cells of your own, each study's entry limited to the budgets (of ``budgets``) whose records
    hold a run of it (``records/<budget>/runs/<study>/<corpus>/<id>/``): what ``render`` draws them at.
    A budget without its records renders its baselines alone, as if the config file were not given."""
    limited = {}
    for name, spec in custom.items():
        studies = {study: {**entry, "budgets": [b for b in budgets if any(
            (record_dir(records, b) / "runs" / study).glob(f"*/{name}/frac*/seed*/metrics.json"))]}
            for study, entry in spec["studies"].items()}
        limited[name] = {**spec, "studies": studies}
    return limited


def _load(budget: str, config_file: Path, study_names: list[str] | None = None,
          settings: dict | None = None, custom_file: Path | None = None,
          rendered: list[str] | None = None, records: Path = RECORDS) -> tuple[dict, dict]:
    """The run config (``config_file``, then ``custom_file``'s keys, with ``budget`` and the command line's
    ``settings`` over it) and its studies that define the budget, with the cells of your own that
    ``custom_file`` adds (exported, so the notebooks run here see them too). ``rendered``: the budgets a
    render draws; each cell of your own joins only those of them where ``records`` hold runs of it
    (:func:`recorded_budgets`), where ``grow`` and ``list`` give it the budget they train."""
    check_budget(budget)
    source = " merged with ".join(map(str, filter(None, [config_file, custom_file])))
    config = load_run_config({**load_config_file(config_file), **(load_config_file(custom_file) if custom_file else {}),
                              **(settings or {}), "budget": budget}, source=source, command_line=settings)
    names = study_names or config["studies"]
    unknown = [n for n in names if n not in config["studies"]]
    if unknown:
        raise ConfigError(f"--study {', '.join(unknown)}: not a study of {config_file} "
                          f"({', '.join(config['studies'])})")
    studies = {name: grid.load_study(name, custom_cells={}) for name in names}
    custom = config["custom_cells"]
    if custom:
        check_custom_cells(custom, studies, str(custom_file or config_file))
        if rendered is not None:
            custom = config["custom_cells"] = recorded_budgets(custom, rendered, records)
        studies = {name: grid.load_study(name, custom_cells=custom, custom_source=str(custom_file or config_file))
                   for name in names}
    export_custom_cells(custom, str(custom_file or config_file))
    return config, grid.studies_with_budget(studies, budget)
