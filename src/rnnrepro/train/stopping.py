"""When a run has stopped improving: the recipes' early stop (`early_stopping`), read from history.csv's
rows. A row is one validation check: an epoch for the task `lm`, every `validation_every` batches for the
task `autocomplete`, so `patience` counts checks (epochs for the language models)."""

from __future__ import annotations

#: how far below the unigram loss (rnnrepro.train.unigram) a validation loss must be for the run to have
#: left the plateau every run starts on: the trainer's `after_plateau` and the scorecard's `stalled`
LEARNED_SHARE = 0.05


def has_stalled(rule: dict | None, history: list[dict], plateau: float | None = None) -> bool:
    """The recipe's early stop (`early_stopping`). `rule: best`, patience on the best: `patience` checks
    have passed since the last check whose validation loss fell at least `min_delta` below the best
    before it. With `after_plateau: true` patience counts only from the first check below the unigram
    plateau (``plateau``, the validation loss of predicting the training split's frequencies, less
    LEARNED_SHARE of it): a run still on the plateau, where some seeds sit for a pass or two before their
    loss falls, is not stopped by patience but by its cap. `rule: previous` (the default), the LRU
    authors' early stop: validation has failed `patience` checks in a row to fall at least `min_delta`
    below the previous check's (their char.py, `stop_thresh` and `eps`)."""
    if rule is None:
        return False
    if rule.get("rule", "previous") == "best":
        if rule.get("after_plateau"):
            left = plateau_exit(history, plateau)
            if left is None:
                return False
            history = history[left:]
        return epochs_since_best(history, rule["min_delta"]) >= rule["patience"]
    recent = [row["val_loss"] for row in history][-(rule["patience"] + 1):]
    return (len(recent) > rule["patience"]
            and all(later > earlier - rule["min_delta"] for earlier, later in zip(recent, recent[1:])))


def patience_ended(rule: dict | None, history: list[dict], unigram_loss) -> bool:
    """:func:`has_stalled` in a trainer: ``unigram_loss()`` (the task's plateau) is computed only where the
    rule waits for the run to leave the plateau."""
    return has_stalled(rule, history, unigram_loss() if rule and rule.get("after_plateau") else None)


def plateau_exit(history: list[dict], plateau: float | None) -> int | None:
    """The index of the first check whose validation loss is LEARNED_SHARE or more below ``plateau``, or
    None while every check is above that level. ``plateau`` None: the rule cannot be applied (ValueError)."""
    if plateau is None:
        raise ValueError("early_stopping.after_plateau needs the unigram loss of the validation split")
    level = (1 - LEARNED_SHARE) * plateau
    return next((index for index, row in enumerate(history) if row["val_loss"] < level), None)


def same_stop(rule: dict | None, history: list[dict], plateau: float | None, stopped_by_rule: bool) -> bool:
    """Whether ``rule`` ends a run whose checks were ``history`` where it ended: never before its last
    check, and at its last check exactly when the run's own rule had stopped it there
    (``stopped_by_rule``; otherwise its cap or iteration limit did, which ``rule`` does not change). A
    record made under another early stop is then the run this rule trains (same seed, same steps)."""
    try:
        if any(has_stalled(rule, history[:end], plateau) for end in range(1, len(history))):
            return False
        return has_stalled(rule, history, plateau) == stopped_by_rule
    except (KeyError, TypeError, ValueError):
        return False


def epochs_since_best(history: list[dict], min_delta: float = 0.0) -> int:
    """Checks (epochs, for the task `lm`) since the last one whose validation loss fell at least
    ``min_delta`` below every earlier check's (the first check counts as such)."""
    best, best_index = float("inf"), 0
    for index, row in enumerate(history):
        if row["val_loss"] < best - min_delta or index == 0:
            best, best_index = row["val_loss"], index
    return len(history) - 1 - best_index if history else 0
