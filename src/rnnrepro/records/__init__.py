"""Recorded runs: the small files of real-data runs, kept in the repository, grown one cell at a time,
and rendered into every table, figure and the claims scorecard on any machine without retraining.

    python -m rnnrepro.records grow --budget cpu --minutes 120 --config data_mirror=DIR [--commit]
    python -m rnnrepro.records list --budget cpu          # recorded, stale, damaged and missing units
    python -m rnnrepro.records render --budget cpu        # records/cpu -> results/cpu/tables, figures, index.html
    python -m rnnrepro.records pack --budget cpu          # results/cpu/runs -> records/cpu/runs

Layout: ``records/<budget>/`` mirrors the budget's results tree (``results/<budget>/``, rnnrepro.grid):
``runs/<study>/<corpus>/<model>/frac<f>/seed<s>/`` holds a cell's ``config.json``, ``history.csv`` and
``metrics.json`` plus the JSON outputs of its evaluations (``dynamic_eval.json``, ...), and
``speed/<study>.json`` a study's speed benchmark. Never weights, checkpoints or data. Each
``metrics.json`` carries the machine (CPU model, cores, threads, GPU, load average), the torch version,
the git sha, the precision and the wall time of the run.

A record is *stale* when its ``config.json`` is not what the study file now resolves for that cell (a
recipe, a width or a cell option changed since it was trained): ``render`` does not use it and ``grow``
trains the cell again.

``grow`` splits the budget's grid into units of work (``--unit`` patterns keep some of them): a training
cell with the cells it is finetuned from and every evaluation output the budget's artifacts read from
it, or one study's speed benchmark. It takes them study by study (as the run config lists them), each
study's learning-rate tuning cells first (rnnrepro.tuning), then its cells seed by seed, so that a grow
cut short leaves whole comparisons at fewer seeds; a unit whose tuning cells are not recorded waits for
them. It skips recorded units, prepares the data of the rest (one Snakemake run), then ``--jobs``
workers each run one unit at a time through Snakemake (disjoint targets, so side by side with
``--nolock``) and pack it into ``records/`` the moment it finishes (with ``--commit``, one git commit per
unit, of exactly the files packed: rnnrepro.record_commits). No unit starts after the deadline (``--minutes``); at the deadline, or when ``grow``
itself gets SIGTERM or Ctrl-C, running units get SIGTERM: training writes its resume checkpoint, a later
``grow`` on this machine resumes it, on another machine it starts afresh. Killing ``grow`` at any point
(even with SIGKILL) loses no recorded unit.

One grow of a budget runs at a time in a working tree (a lock in its log folder), and each unit's
Snakemake runs in a process group of its own that gets SIGTERM when grow dies, even by SIGKILL
(rnnrepro.process_group): no trainer outlives the grow that started it, and none is left for the next
grow to clash with. A unit whose cell another process trains (rnnrepro.train.progress_file) is skipped,
saying so.

``render`` copies a budget's records into its results tree and runs each artifact's notebook through
papermill with exactly the parameters the Snakemake rule gives it (rnnrepro.analysis.run_notebook), then
the scorecard notebook, then writes the budget's results page (rnnrepro.results_page). It runs notebooks
directly rather than Snakemake: records have no data and no weights, and Snakemake would plan to
download, preprocess and retrain what a record's inputs lack. An artifact is rendered when every cell of
its grid at that budget is recorded and current, with every evaluation output and speed result it reads;
otherwise the scorecard gives the reason. Artifacts that need a cell's weights (``model.pt``) cannot be
rendered from records. Files an earlier render restored are listed in ``<results tree>/.records.json`` (written
atomically) so the next render refreshes them, and removes those whose record is gone; a file that differs
from its record and was not restored by a render (a run of this machine) is never overwritten. The tables and
figures of an artifact not rendered now (its records missing, damaged or stale, or its notebook failed) are
removed, so that the results page says why they are missing rather than show what older records made.
"""

from __future__ import annotations

import subprocess  # noqa: F401 (patched by the tests through the package)

from ..record_checks import RECORDED, evaluation_outputs, record_problem  # noqa: F401
from ..train import progress_file  # noqa: F401
from .paths import MANIFEST, RECORDS, record_dir, results_dir  # noqa: F401
from .packing import pack, pack_run, pack_speed, packed_files, record_of_run  # noqa: F401
from .units import Restorer, Unit, _chain, _load, record_of, units  # noqa: F401
from .rendering import BY_BUDGET, Rendering, WEIGHTS_NEEDED, _WORKER_KERNEL, _artifact_problem, _digest, _outputs, _run_notebook, _start_worker_kernel, read_manifest, remove_earlier_outputs, render, render_by_budget, render_plan, render_summary, restore, say_rendered, scales_first, stop_quietly  # noqa: F401
from .growing import FAILED_JOB_LOG, Grower, command_line_settings, commit_leftovers, grow, hold_grow_lock, seed_by_seed, selected, uncommitted_changes, why_it_failed  # noqa: F401
from .listing import list_units  # noqa: F401
from .cli import main, positive  # noqa: F401
