"""How each training run of a budget ended: at its epoch cap or not, and whether still improving.

The scorecard flags a verdict whose rows rest on runs that did not reach their own convergence
(docs/claims.md): ``capped`` when its epoch cap stopped a run rather than its own rule
(:func:`stopped_by_epoch_cap`; the figures mark such runs by the same rule), ``still improving`` when
its validation loss was still at its lowest at its last check and no patience on the best ended it (a
run that rule stopped fell by less than its `min_delta` over its `patience` epochs: converged by the
rule's own measure, :func:`stopped_by_patience_on_the_best`). The rate it was improving at is the fall of the validation loss per epoch over the last tenth of
its training (from the last check at or before 90 % of the way to the end), given as the share of
validation perplexity (exp of the loss) lost per epoch: ``0.17`` means 0.17 % an epoch.

A run whose scored validation loss ends less than ``STALL_SHARE`` (5 %, the trainer's own level for a run
that has left the plateau, rnnrepro.train.stopping.LEARNED_SHARE) below its ``val_unigram_loss``
(the loss of predicting the training split's class frequencies, rnnrepro.train.unigram) has ``stalled``
(the scorecard's ``stalled``): it never left the plateau every run reaches in its first steps, so its
numbers measure a failed start, not the unit. Runs recorded before the unigram loss was written have
no such number and are never flagged.

A run that trains at a learning rate its tuning chose at the edge of its grid has ``lr_edge`` (the
scorecard's ``rate at grid edge``): the best rate for it may lie beyond those tried.

The runs behind a table row are its model's cells and the cells they were finetuned from (a finetuned
LRN row rests on its Base run too). Reads run folders only (config.json, metrics.json, history.csv); a
cell without a metrics.json is left out.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from .. import grid
from ..train.stopping import LEARNED_SHARE
from .run_files import read_history, stale_problem

COLUMNS = ["study", "artifact", "dataset", "behind", "model", "seed", "epochs", "epoch_cap", "capped",
           "improving_pct", "params", "lr", "lr_factor", "lr_edge", "stalled"]
#: the share of training, counted back from its end, over which the final rate of improvement is measured
FINAL_SHARE = 0.1
#: how far below the unigram loss a run's scored validation loss must end for it to have learned anything
STALL_SHARE = LEARNED_SHARE


def stopped_by_epoch_cap(recipe: dict, epochs: int | None) -> bool:
    """Whether a run's epoch cap stopped it rather than its own rule: its recipe stops by itself (early
    stopping, or the non-monotone test of AWD finetuning) yet it trained every epoch the cap allows
    (``recipe.epochs`` in its config.json), so its numbers are those of a run that had not finished. A
    fixed schedule (no rule of its own, such as the autocomplete task's passes at the paper budget) is
    never stopped by its cap: whether it was still improving is the other flag. An autocomplete run's
    epochs are its passes, so one that patience stopped within its last allowed pass counts as capped."""
    stops_itself = bool(recipe.get("early_stopping")) or bool(recipe.get("stop_on_nonmono"))
    cap = recipe.get("epochs")
    return stops_itself and cap is not None and epochs is not None and epochs >= cap


def stopped_by_patience_on_the_best(recipe: dict, epochs: int | None) -> bool:
    """Whether patience on the best validation loss (``early_stopping.rule: best``) ended the run, before
    its cap: `patience` epochs without a fall of `min_delta` below the best, so converged by the rule's
    own measure even where its last epoch is a (smaller) new lowest."""
    rule = recipe.get("early_stopping") or {}
    return rule.get("rule") == "best" and not stopped_by_epoch_cap(recipe, epochs)


def improving_pct_per_epoch(history: pd.DataFrame) -> float:
    """The share of validation perplexity lost per epoch over the last tenth of training, in percent,
    when the last check is the run's best; NaN otherwise (or with fewer than two checks)."""
    checks = history.dropna(subset=["val_loss"])
    if len(checks) < 2 or checks["val_loss"].iloc[-1] > checks["val_loss"].min():
        return math.nan
    if "iteration" in checks:  # checks within epochs (the autocomplete task): epochs from iterations
        per_epoch = checks["iteration"].max() / max(checks["epoch"].max(), 1)
        position = checks["iteration"] / per_epoch
    else:
        position = checks["epoch"].astype(float)
    end = position.iloc[-1]
    earlier = checks[position <= end - FINAL_SHARE * end]
    start = earlier.index[-1] if len(earlier) else checks.index[-2]
    span = end - position.loc[start]
    if span <= 0:
        return math.nan
    fall = (checks.loc[start, "val_loss"] - checks["val_loss"].iloc[-1]) / span
    return 100 * (1 - math.exp(-fall)) if fall > 0 else math.nan


def stalled(metrics: dict) -> bool:
    """Whether a run's scored validation loss (``val_loss``, or the autocomplete task's
    ``val_cross_entropy``) ended less than STALL_SHARE below its ``val_unigram_loss``; False when either
    is missing."""
    scored = metrics.get("val_loss", metrics.get("val_cross_entropy"))
    unigram = metrics.get("val_unigram_loss")
    if scored is None or unigram is None or not math.isfinite(scored) or not math.isfinite(unigram):
        return False
    return scored > (1 - STALL_SHARE) * unigram


def rate_at_edge(config: dict, grid_now: list | None = None) -> str:
    """``lowest`` or ``highest`` when the run trains at the learning rate its tuning chose at that end of
    its grid (config ``tuning``: ``lr_factor`` among ``lr_factors``), so a better rate may lie beyond the
    rates tried; "" for a rate inside its grid, or a run no tuning chose. ``grid_now``: the study file's
    grid today, read instead where it holds the run's (a grid grown around the rate the run trained at,
    which keeps the run current: rnnrepro.cell_identity.grid_grown_around_its_choice)."""
    tuning = config.get("tuning") or {}
    factor, factors = tuning.get("lr_factor"), tuning.get("lr_factors") or []
    if grid_now and set(factors) <= set(grid_now):
        factors = list(grid_now)
    if factor is None or len(factors) < 2:
        return ""
    return "lowest" if factor == min(factors) else "highest" if factor == max(factors) else ""


def run_ending(run_dir: Path, grid_now: list | None = None) -> dict | None:
    """One run's epochs, cap, improving rate and parameters; None when it has no metrics.json.
    ``grid_now``: its study's tuning grid at this budget today (:func:`rate_at_edge`)."""
    metrics_file = run_dir / "metrics.json"
    if not metrics_file.exists():
        return None
    metrics = json.loads(metrics_file.read_text())
    config = json.loads((run_dir / "config.json").read_text())
    history = read_history(run_dir) if (run_dir / "history.csv").exists() else pd.DataFrame()
    recipe = config.get("recipe") or {}
    cap = recipe.get("epochs")
    epochs = int(history["epoch"].max()) if "epoch" in history and len(history) else metrics.get("epochs")
    improving = improving_pct_per_epoch(history) if {"epoch", "val_loss"} <= set(history.columns) else math.nan
    if stopped_by_patience_on_the_best(recipe, epochs):
        improving = math.nan  # its own rule judged it converged: any fall left is below the rule's threshold
    return {"model": metrics["model"], "dataset": metrics["dataset"], "seed": metrics["seed"], "epochs": epochs,
            "epoch_cap": cap, "capped": stopped_by_epoch_cap(recipe, epochs),
            "improving_pct": improving, "params": metrics.get("params", math.nan), "lr": recipe.get("lr"),
            "lr_factor": (config.get("tuning") or {}).get("lr_factor"), "lr_edge": rate_at_edge(config, grid_now),
            "stalled": stalled(metrics)}


def run_endings(studies: dict, config: dict, root: Path | str | None = None) -> pd.DataFrame:
    """Every run behind every artifact of these studies at the config's budget (columns COLUMNS):
    ``behind`` is the model a table row names, ``model`` the run's own (itself, or one it was finetuned
    from). ``root``: the budget's results tree (default grid.results_dir)."""
    root = Path(root if root is not None else grid.results_dir(config["budget"]))
    rows = []
    for name, study in studies.items():
        tuned = grid.tuned_settings(study, config)
        grid_now = tuned["tuning"]["lr_factors"] if tuned else None
        for artifact in grid.artifacts(study, config):
            for cell in grid.artifact_cells(study, config, artifact):
                chain = cell
                while chain is not None:
                    run_dir = root / "runs" / chain.key
                    ending = run_ending(run_dir, grid_now)
                    # a run folder the study file now makes otherwise (a stale copy) is behind no table
                    if ending is not None and ": stale (" not in (stale_problem(run_dir / "metrics.json", study) or ""):
                        rows.append({"study": name, "artifact": artifact, "behind": cell.model, **ending})
                    chain = grid.parent_cell(study, chain)
    return pd.DataFrame(rows, columns=COLUMNS)
