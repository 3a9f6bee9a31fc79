"""The unigram loss: what a model that ignores its input scores on the validation split.

Such a model predicts every target from the training split's class frequencies (words, characters, or
the autocomplete task's word classes), with one added to every class's count so that a class unseen in
training costs a finite loss. Its validation cross entropy is the plateau a language model reaches in
its first few hundred steps; a run whose scored validation loss ends no more than a few percent below it
never learned anything from its input (rnnrepro.analysis.run_endings flags it). Written to
``metrics.json`` as ``val_unigram_loss`` in nats, averaged the way the run's own validation loss is.
"""

from __future__ import annotations

import numpy as np


def log_frequencies(train_targets: np.ndarray, classes: int) -> np.ndarray:
    """Log probability of each class id 0..classes-1 from its count among ``train_targets``, plus one."""
    counts = np.bincount(np.asarray(train_targets, dtype=np.int64).ravel(), minlength=classes)[:classes] + 1.0
    return np.log(counts) - np.log(counts.sum())


def token_loss(train: np.ndarray, valid: np.ndarray, classes: int) -> float:
    """Mean negative log frequency of the validation tokens that a language model predicts (every one
    but the first), with frequencies from the training tokens."""
    logp = log_frequencies(train, classes)
    return float(-logp[np.asarray(valid, dtype=np.int64)[1:]].mean())


def autocomplete_loss(train_targets: np.ndarray, valid_targets: np.ndarray, classes: int, unk_id: int) -> float:
    """The autocomplete task's cross entropy of the frequency model: per observation (a row of
    ``valid_targets``), the mean over its known-word targets (ids above ``unk_id``), then the mean over
    the observations that have one. Frequencies count the known-word training targets only, as the
    training loss sees them."""
    train_targets = np.asarray(train_targets, dtype=np.int64)
    first = unk_id + 1  # padding and <unk> are never a target of the loss: frequencies over the known words
    logp = np.full(classes, -np.inf)
    logp[first:] = log_frequencies(train_targets[train_targets > unk_id] - first, classes - first)
    valid_targets = np.asarray(valid_targets, dtype=np.int64)
    known = valid_targets > unk_id
    nll = np.where(known, -logp[np.where(known, valid_targets, first)], 0.0)
    per_row = known.sum(1)
    has = per_row > 0
    return float((nll.sum(1)[has] / per_row[has]).mean())
