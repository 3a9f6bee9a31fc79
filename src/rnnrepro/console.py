"""How long work reports itself: the command lines' log, and progress that says how far it is.

Every job that can run for minutes (a training epoch, a final or dynamic evaluation, the speed
benchmark) shows a :func:`progress` bar. In a terminal it is tqdm's live bar. In a log file (the jobs
Snakemake runs write their stderr to ``logs/``) a redrawn bar would be one endless line, so there it
becomes an ordinary log line, written once the work has run for ``LOG_INTERVAL`` seconds and then at
most every ``LOG_INTERVAL`` seconds, saying what is done, how far it is and how long it should still
take::

    [rnnrepro] epoch 3/40: 43 % (1234/2900 rows) in 02:10, about 02:55 left, loss=4.310

Work shorter than ``LOG_INTERVAL`` writes no progress line at all, so short runs keep short logs.
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Callable, Iterable

from tqdm import tqdm

LOGGER = logging.getLogger("rnnrepro")
LOG_FORMAT = "[rnnrepro] %(message)s"
LOG_INTERVAL = 30  # seconds between two progress lines in a log file
EXIT_CTRL_C = 130  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C
LINE = "{desc}: {percentage:.0f} % ({n_fmt}/{total_fmt} UNITS) in {elapsed}, about {remaining} left{postfix}"
_handler: logging.Handler | None = None


def setup_logging() -> None:
    """Log the package's messages to stderr (where the jobs' logs go); a command line calls this first."""
    global _handler
    stop_logging()
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter(LOG_FORMAT))
    LOGGER.addHandler(_handler)
    LOGGER.setLevel(logging.INFO)


def stop_logging() -> None:
    """Undo ``setup_logging``: for a command's ``main`` run inside another program (the tests do)."""
    global _handler
    if _handler is not None:
        LOGGER.removeHandler(_handler)
        _handler = None


def run_command(main: Callable[[], int]) -> int:
    """A command line's exit status: ``main()``'s, or EXIT_CTRL_C with one line on stderr when Ctrl-C
    stops it, instead of a KeyboardInterrupt traceback in the job's log. Every ``python -m rnnrepro...``
    command ends this way (``sys.exit(console.run_command(main))``)."""
    try:
        return main()
    except KeyboardInterrupt:
        print("[rnnrepro] stopped by Ctrl-C", file=sys.stderr, flush=True)
        return EXIT_CTRL_C


class _LoggedProgress(tqdm):
    """tqdm whose every display is one log line (no carriage returns, no redrawing)."""

    monitor_interval = 0  # tqdm's monitor thread would redraw between updates

    def display(self, msg=None, pos=None):
        LOGGER.info(msg if msg is not None else str(self))
        return True


def progress(total: int | None, what: str, unit: str, initial: int = 0, iterable: Iterable | None = None) -> tqdm:
    """A progress bar for ``total`` units of ``what`` (``initial`` of them already done); with
    ``iterable``, one unit per item it yields."""
    if sys.stderr.isatty():
        return tqdm(iterable, total=total, desc=what, unit=unit, initial=initial, file=sys.stderr, mininterval=1)
    # tqdm's own writes (a newline when it closes) go to a buffer: every display is a log line instead.
    units = unit + ("es" if unit.endswith(("s", "sh", "ch", "x")) else "s")
    return _LoggedProgress(iterable, total=total, desc=what, unit=unit, initial=initial,
                           bar_format=LINE.replace("UNITS", units),
                           file=io.StringIO(), mininterval=LOG_INTERVAL, delay=LOG_INTERVAL)
