"""When a run has stopped improving: the recipes' early stop (`early_stopping`), read from history.csv's
rows. A row is one validation check: an epoch for the task `lm`, every `validation_every` batches for the
task `autocomplete`, so `patience` counts checks (epochs for the language models)."""

from __future__ import annotations


def has_stalled(rule: dict | None, history: list[dict]) -> bool:
    """The recipe's early stop (`early_stopping`). `rule: best`, patience on the best: `patience` checks
    have passed since the last check whose validation loss fell at least `min_delta` below the best
    before it. `rule: previous` (the default), the LRU authors' early stop: validation has failed
    `patience` checks in a row to fall at least `min_delta` below the previous check's (their char.py,
    `stop_thresh` and `eps`)."""
    if rule is None:
        return False
    if rule.get("rule", "previous") == "best":
        return epochs_since_best(history, rule["min_delta"]) >= rule["patience"]
    recent = [row["val_loss"] for row in history][-(rule["patience"] + 1):]
    return (len(recent) > rule["patience"]
            and all(later > earlier - rule["min_delta"] for earlier, later in zip(recent, recent[1:])))


def epochs_since_best(history: list[dict], min_delta: float = 0.0) -> int:
    """Checks (epochs, for the task `lm`) since the last one whose validation loss fell at least
    ``min_delta`` below every earlier check's (the first check counts as such)."""
    best, best_index = float("inf"), 0
    for index, row in enumerate(history):
        if row["val_loss"] < best - min_delta or index == 0:
            best, best_index = row["val_loss"], index
    return len(history) - 1 - best_index if history else 0
