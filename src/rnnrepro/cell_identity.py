"""What makes two configs of a training cell the same cell: every resolved value but where and how wide it
runs, and where a cell of your own's module lies. A leaf module (of the package it imports only the
early stop's rules, rnnrepro.train.stopping, another leaf): the grid, the records and the run files compare
configs with it.

The cell's code is part of it (rnnrepro.cells.code_identity): ``architecture.cell_numerics``, a built-in
cell's numerics version, and ``architecture.cell_source_sha256``, the sha256 of a cell of your own's
module file. Configs recorded before these keys were written lack them, and are read so:

- a missing ``cell_numerics`` is version 1, the version every built-in cell started at, so a record of a
  cell whose numbers never changed stays current;
- a missing ``cell_source_sha256`` is the sha256 of the module file as the commit that made the record
  holds it (its metrics.json's ``git_sha``), so the record is current exactly when the module has not
  changed since; where that commit or file cannot be read (or the run was made from uncommitted changes),
  the code that made it is unknown and the cell is not the same.
"""

import csv
import hashlib
import json
import subprocess
from functools import cache
from pathlib import Path

from .train import stopping

# config.json keys that say where a cell ran, not what it computed; and where its cell's module lies
RUNTIME_KEYS = ("device", "threads", "architecture.cell_source")
# the value a config recorded before a key was written stands for
RECORDED_BEFORE = {"architecture.cell_numerics": 1}
SOURCE_SHA = "architecture.cell_source_sha256"


def _flat(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


@cache
def source_sha256_at(commit: str, path: str) -> str | None:
    """The sha256 of a file as a commit of this repository holds it, or None where git cannot show it."""
    if not commit or commit.endswith("-dirty"):
        return None
    shown = subprocess.run(["git", "show", f"{commit}:./{path}"], capture_output=True)
    return hashlib.sha256(shown.stdout).hexdigest() if shown.returncode == 0 else None


def config_differences(recorded: dict, expected: dict, git_sha: str = "") -> list[str]:
    """How a cell's config.json differs from what the study file resolves now (runtime keys aside).
    ``git_sha``: the commit that made the recorded config (its metrics.json's), for a cell of your own's
    code where the config predates ``cell_source_sha256``."""
    old = {k: v for k, v in _flat(recorded).items() if k not in RUNTIME_KEYS}
    new = {k: v for k, v in _flat(expected).items() if k not in RUNTIME_KEYS}
    for key, value in RECORDED_BEFORE.items():
        if key in new and key not in old:
            old[key] = value
    source = _flat(expected).get("architecture.cell_source")
    if SOURCE_SHA in new and SOURCE_SHA not in old and source and (found := source_sha256_at(git_sha, source)):
        old[SOURCE_SHA] = found
    return [f"{key} {old.get(key, '(none)')!r} -> {new.get(key, '(none)')!r}"
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


def as_written_now(recorded: dict, expected: dict) -> dict:
    """A config recorded before some keys were written, with the values their absence stands for
    (RECORDED_BEFORE) where ``expected`` has them: the trainer resumes a checkpoint of such a config."""
    filled = dict(recorded)
    for key, value in RECORDED_BEFORE.items():
        section, name = key.split(".")
        if name in expected.get(section, {}) and name not in filled.get(section, {}):
            filled[section] = {**filled.get(section, {}), name: value}
    return filled


def code_change(recorded: dict, expected: dict, git_sha: str = "") -> str | None:
    """Where the differences are a cell's code: "the code of <cell> changed (<file>)", or "the numerics
    version of <cell> changed (1 -> 2)"; None otherwise."""
    changed = {line.split(" ", 1)[0] for line in config_differences(recorded, expected, git_sha)}
    arch = expected.get("architecture", {})
    if SOURCE_SHA in changed:
        model = (expected.get("tuning") or {}).get("variant_of") or expected.get("model", arch.get("cell"))
        return f"the code of {model} changed ({arch.get('cell_source')})"
    if "architecture.cell_numerics" in changed:
        was = recorded.get("architecture", {}).get("cell_numerics", RECORDED_BEFORE["architecture.cell_numerics"])
        return (f"the numerics version of cell {arch.get('cell')} changed ({was} -> {arch.get('cell_numerics')}, "
                f"rnnrepro.cells.NUMERICS_VERSION)")
    return None


def cap_raised_after_its_own_stop(recorded: dict, expected: dict, epochs: int | None, changed: list[str]) -> bool:
    """Whether ``expected`` is ``recorded`` with a higher epoch cap (``recipe.epochs``) and nothing else
    (``changed``: their :func:`config_differences`),
    and the recorded run ended by its own stopping rule below its cap (``epochs``, its metrics.json's, fewer
    than the cap it ran under). Its numbers are then those of a run under the higher cap: no recipe reads
    the cap before it is reached. A run that reached its old cap is not, whether or not its rule would also
    have stopped it there: it goes on from its checkpoint (rnnrepro.train.loop.raised_cap) or trains
    again."""
    before = (recorded.get("recipe") or {}).get("epochs")
    after = (expected.get("recipe") or {}).get("epochs")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (before, after, epochs)):
        return False
    if after <= before or epochs >= before:
        return False
    return all(line.startswith("recipe.epochs ") for line in changed)


def stale_reason(recorded: dict, expected: dict, git_sha: str = "", since: str = "",
                 epochs: int | None = None, folder: Path | str | None = None) -> str | None:
    """Why a recorded config is not the cell the study file and its code make now, or None when it is:
    "<what changed><since>: <the first differences>", what changed being the cell's code
    (:func:`code_change`) or else the study file. ``epochs``: how many the recorded run trained (its
    metrics.json's); a run its own rule stopped below its cap stays current when only the cap was raised
    (:func:`cap_raised_after_its_own_stop`), and so does a tuned run whose grid of learning rates grew
    around the rate it was tuned to (:func:`grid_grown_around_its_choice`), and a run (its run folder
    ``folder``) that the changed early stop would have ended where it ended (:func:`same_stop_under`)."""
    changed = config_differences(recorded, expected, git_sha)
    if not changed or cap_raised_after_its_own_stop(recorded, expected, epochs, changed) \
            or grid_grown_around_its_choice(recorded, expected, changed) \
            or (folder is not None and same_stop_under(expected, changed, Path(folder))):
        return None
    return f"{code_change(recorded, expected, git_sha) or 'the study file changed'}{since}: {'; '.join(changed[:3])}"


def same_stop_under(expected: dict, changed: list[str], folder: Path) -> bool:
    """Whether ``expected`` differs from a recorded run's config only in its early stop
    (``recipe.early_stopping``, ``changed``: their :func:`config_differences`) and that stop, replayed
    on the run's checks (``folder``/history.csv), ends it at its last check exactly as its own rule or
    cap did (rnnrepro.train.stopping.same_stop): the steps before are the same, so its numbers are those
    of a run under the new rule. A rule that waits for the run to leave the unigram plateau
    (`after_plateau`) reads the run's ``val_unigram_loss``, or, for a run recorded before that number was
    written, that of another run of the same corpus, data fraction and budget (it is the corpus's:
    predicting the training split's frequencies)."""
    if not changed or not all(line.startswith("recipe.early_stopping") for line in changed):
        return False
    rule = (expected.get("recipe") or {}).get("early_stopping")
    try:
        metrics = json.loads((folder / "metrics.json").read_text())
        with open(folder / "history.csv", newline="") as f:
            history = [{"val_loss": float(row["val_loss"])} for row in csv.DictReader(f)]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not isinstance(metrics, dict) or not history:
        return False
    if "stopped_by_patience" in metrics:
        stopped_by_rule = bool(metrics["stopped_by_patience"])
    else:  # a language model: its own rule stopped it where it trained fewer epochs than its cap
        cap = (expected.get("recipe") or {}).get("epochs")
        stopped_by_rule = isinstance(cap, int) and len(history) < cap
    return stopping.same_stop(rule, history, unigram_loss_of(folder, metrics), stopped_by_rule)


def unigram_loss_of(folder: Path, metrics: dict) -> float | None:
    """A run's ``val_unigram_loss``, else that of another run folder of its corpus, data fraction and budget
    (``<study>/<corpus>/<model>/frac<F>/seed<S>``); None where none has it."""
    if isinstance(metrics.get("val_unigram_loss"), (int, float)):
        return float(metrics["val_unigram_loss"])
    for other in sorted(folder.parent.parent.parent.glob(f"*/{folder.parent.name}/*/metrics.json")):
        try:
            found = json.loads(other.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(found, dict) and found.get("budget") == metrics.get("budget") \
                and isinstance(found.get("val_unigram_loss"), (int, float)):
            return float(found["val_unigram_loss"])
    return None


def grid_grown_around_its_choice(recorded: dict, expected: dict, changed: list[str]) -> bool:
    """Whether ``expected`` is ``recorded`` with more learning rates in its tuning grid (``tuning.lr_factors``
    a strict superset of the recorded one) and nothing else (``changed``: their :func:`config_differences`),
    so that the rate chosen (``tuning.lr_factor``, and with it ``recipe.lr``) is the one the run trained at:
    the wider grid confirmed it. The grid is only how the rate was chosen; the run's numbers are those of
    a run under the wider grid. Where the wider grid chooses another rate, ``lr_factor`` and ``recipe.lr``
    differ too, and the run is stale."""
    if not changed or not all(line.startswith("tuning.lr_factors ") for line in changed):
        return False
    before = (recorded.get("tuning") or {}).get("lr_factors")
    after = (expected.get("tuning") or {}).get("lr_factors")
    if not isinstance(before, list) or not isinstance(after, list):
        return False
    return set(before) < set(after)
