"""Seconds per call of a step (a training batch, a layer's forward + backward), the one way the speed job
(rnnrepro.analysis.lrn) and the scripts in benchmarks/ time their work.

Through ``torch.utils.benchmark.Timer``: it synchronises the GPU around what it times (so a GPU step is
timed to its end, not to its launch), runs torch at the thread count it is given, and returns a
``Measurement`` whose median is taken over blocks of calls (one call per block when a call takes more
than a few milliseconds, more calls per block when it is shorter than the clock can resolve well).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.benchmark import Timer


def seconds_per_call(step: Callable[[], object], warmup: int, repeats: int) -> float:
    """Median seconds of one call of ``step``: ``warmup`` calls first (Timer adds two of its own), then
    calls for about ``repeats`` times the warm-up's mean time, at the current torch thread count."""
    timer = Timer(stmt="step()", globals={"step": step}, num_threads=torch.get_num_threads())
    warm = timer.timeit(number=max(warmup, 1))
    return timer.blocked_autorange(min_run_time=repeats * warm.mean).median
