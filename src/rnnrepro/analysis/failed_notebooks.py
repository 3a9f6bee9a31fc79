"""A notebook run that failed must be run again, and its earlier tables kept until one succeeds.

A notebook rule's tables, figures and executed notebook are Snakemake ``update()`` outputs
(workflow/rules/analysis.smk): Snakemake does not remove them before the job, and puts them back when
the job fails, so a failing rebuild leaves the earlier run's files. But it records the failed job's
inputs and params as if it had succeeded, with the files back in place, so the next run would take the
earlier tables for up to date. So the notebook runner (rnnrepro.analysis.run_notebook) writes
``<results>/notebooks/<name>.last-failure`` whenever a run fails (when, and the error), and the rule
reads the time of the last failure as a param (:func:`last_failure`): a new failure changes it, and
Snakemake plans the job again. A success leaves the file alone, so the param stays as it was recorded.

No torch, no pandas: the Snakefile imports this.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from ..train.files import write_text_atomic

SUFFIX = ".last-failure"


def failure_record(executed_notebook: str | Path) -> Path:
    """The record beside a notebook rule's executed notebook (``<name>.ipynb`` -> ``<name>.last-failure``)."""
    return Path(executed_notebook).with_suffix(SUFFIX)


def record_failure(executed_notebook: str | Path, error: BaseException) -> None:
    path = failure_record(executed_notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    when = f"{datetime.now(timezone.utc).isoformat(timespec='microseconds')} pid {os.getpid()}"
    record = {"failed_at": when, "error": f"{type(error).__name__}: {error}"}
    write_text_atomic(path, json.dumps(record, indent=1) + "\n")


def last_failure(executed_notebook: str | Path) -> str:
    """When the notebook last failed to run into ``executed_notebook`` ("" if it never did, or the
    record cannot be read)."""
    try:
        return str(json.loads(failure_record(executed_notebook).read_text()).get("failed_at", ""))
    except (OSError, ValueError, AttributeError):
        return ""
