"""Seconds per call of a step (a training batch, a layer's forward + backward), the one way the speed job
(rnnrepro.analysis.lrn) and the scripts in benchmarks/ time their work.

Through ``torch.utils.benchmark.Timer``: it synchronises the GPU around what it times (so a GPU step is
timed to its end, not to its launch), runs torch at the thread count it is given, and returns a
``Measurement`` whose median is taken over blocks of calls (one call per block for a call of more than
about 10 ms, more per block for shorter ones, so that the clock's own overhead does not count). Work that
lasts longer than half a minute (a paper-size step on a CPU) logs how far it is.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.benchmark import Timer

from . import console


def seconds_per_call(step: Callable[[], object], warmup: int, repeats: int, what: str) -> float:
    """Median seconds of one call of ``step``: ``warmup`` calls first (Timer adds two of its own), then
    calls for about ``repeats`` times the warm-up's mean time, at the current torch thread count. ``what``
    names the step in the progress lines (rnnrepro.console), one unit per call."""
    bar = console.progress(warmup + 3 + repeats, what, "call")  # 3: Timer's warm-up and its block-size probe

    def counted():
        step()
        bar.update()

    timer = Timer(stmt="step()", globals={"step": counted}, num_threads=torch.get_num_threads())
    with bar:
        warm = timer.timeit(number=max(warmup, 1))
        return timer.blocked_autorange(min_run_time=repeats * warm.mean).median
