"""Where each budget's results and logs live: a fixed mapping, the same for every config file.

The default budget of ``config/config.yaml`` (``paper``) owns ``results/`` and ``logs/``, so the
commands a reader is told to type work as written with the default configuration
(``snakemake results/tables/pru_table1.csv``); every other budget, smoke included, lives under
``results/<budget>/`` and ``logs/<budget>/``, so budgets never share a run folder, a table or a log.
A test ties :data:`DEFAULT_BUDGET` to the config file's ``budget:``.

Standard library only: ``make clean`` runs :mod:`rnnrepro.clean` with any Python 3.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = "results"
LOGS = "logs"
# config/config.yaml's budget (tests/test_commands.py keeps them equal)
DEFAULT_BUDGET = "paper"
# The budget `make smoke` runs and the tests use: synthetic corpora only.
SMOKE = "smoke"
# What the default budget keeps directly in results/ and logs/ (and the shared data logs): no other
# budget may take one of these names, or its tree would be the default budget's folder.
# Precisions whose cells differ from fp32's and so have run folders of their own, runs-<precision>/
# (rnnrepro.precision; a test keeps the two lists together).
OTHER_PRECISIONS = ("tf32", "bf16")
# A budget's results page (rnnrepro.results_page), at the top of its results tree.
RESULTS_PAGE = "index.html"
RESULTS_PARTS = ("runs", *(f"runs-{name}" for name in OTHER_PRECISIONS), "tables", "figures", "notebooks", "speed",
                 "report.html", RESULTS_PAGE, ".records.json")
LOGS_PARTS = ("train", "evaluate", "restore", "notebooks", "speed", "report", "grow", "data")
RESERVED_NAMES = frozenset(RESULTS_PARTS + LOGS_PARTS)
# Written by `records render` beside the budgets' trees: every budget's verdicts side by side.
# (results/notebooks/ is the default budget's: the executed notebook goes beside them.)
BY_BUDGET = ("claims_by_budget.csv", "claims_by_budget.png", "claims_by_budget.ipynb")


def results_dir(budget: str) -> str:
    """The results tree of a budget: ``results`` for the default budget, ``results/<budget>`` otherwise."""
    return RESULTS if budget == DEFAULT_BUDGET else f"{RESULTS}/{budget}"


def logs_dir(budget: str) -> str:
    """The job logs of a budget, laid out like its results tree."""
    return LOGS if budget == DEFAULT_BUDGET else f"{LOGS}/{budget}"


def runs_dir(budget: str, precision: str = "fp32") -> str:
    """The run folders of a budget: ``<results>/runs`` for fp32 cells, ``<results>/runs-<precision>`` for
    the cells of a precision whose numbers differ (rnnrepro.precision: bf16, and tf32 on a GPU), so that
    they never replace an fp32 cell."""
    return f"{results_dir(budget)}/runs{'' if precision == 'fp32' else '-' + precision}"


def budget_owned_paths(budget: str, root: Path = Path(".")) -> list[Path]:
    """The files and folders that belong to ``budget`` alone and exist under ``root``: its results tree
    and logs (for the default budget, only its own parts of ``results/`` and ``logs/``, never the
    folders of the other budgets inside them)."""
    if budget == DEFAULT_BUDGET:
        paths = [root / RESULTS / part for part in RESULTS_PARTS] + [
            root / LOGS / part for part in LOGS_PARTS if part != "data"]
    else:
        paths = [root / results_dir(budget), root / logs_dir(budget)]
    return [path for path in paths if path.exists() or path.is_symlink()]


def budgets_with_results(root: Path = Path(".")) -> list[str]:
    """The budgets with a results tree under ``root`` (one with ``runs/`` or ``speed/``), the default
    budget first."""
    results = root / RESULTS
    if not results.is_dir():
        return []
    found = [DEFAULT_BUDGET] if any((results / part).is_dir() for part in ("runs", "speed")) else []
    return found + [p.name for p in sorted(results.iterdir()) if p.name not in RESERVED_NAMES
                    and p.name != DEFAULT_BUDGET and ((p / "runs").is_dir() or (p / "speed").is_dir())]


def earlier_layout(root: Path = Path(".")) -> list[str]:
    """What an earlier layout left here, where the smoke budget owned results/ and the default budget
    results/paper/: one line each, with the command that moves it (nothing is moved here)."""
    results, found = root / RESULTS, []
    smoke_runs = sorted(results.glob("runs/*/synth_*"))
    if smoke_runs:
        found.append(f"{results}/runs/ holds smoke runs on synthetic corpora ({smoke_runs[0]}, ...) from when the "
                     f"smoke budget wrote to results/; it now writes to {results_dir(SMOKE)}/, and results/ is the "
                     f"{DEFAULT_BUDGET} budget's. Move each {results}/runs/<study>/synth_* folder to "
                     f"{results_dir(SMOKE)}/runs/<study>/, or delete them")
    old = results / DEFAULT_BUDGET
    if (old / "runs").is_dir() or (old / "speed").is_dir() or (old / "tables").is_dir():
        found.append(f"{old}/ is the {DEFAULT_BUDGET} budget's results tree from an earlier layout; it is now "
                     f"{results}/ itself. Move it: mv {old}/* {results}/ && rmdir {old}")
    return found
