"""Execute an artifact notebook: jupytext (percent .py) -> papermill, with the artifact's parameters.

    python -m rnnrepro.analysis.run_notebook notebooks/pru_table1.py results/notebooks/pru_table1.ipynb \\
        --study pru --artifact table1 --metrics M1 M2 ... --tables T.csv --figures F.png

The executed notebook is written to OUTPUT. Every metrics.json it is given is checked first
(rnnrepro.analysis.run_files): a damaged one stops the run with an error naming its run folder, before
any notebook cell runs; so does a stale one, whose config.json is not what the study file gives that cell
now (``run_files.stale_problem``: a table is never made from it). If a cell fails, the executed notebook
(with the traceback) is kept in ``<logs>/notebooks/<notebook>.failed.ipynb``, in the logs of the budget
whose results tree OUTPUT is in (rnnrepro.layout), and the error names the notebook, the failing cell and
where to look; the next successful run removes it. Training results are never touched, so a fixed
notebook reruns in seconds. The notebook writes its tables and figures beside their places first
(``<name>.partial.<ext>``), and they replace an earlier run's only when it has succeeded and its tables
have their declared columns: a failing rebuild leaves the earlier tables and figures (the workflow
marks them ``update()``, so Snakemake neither removes them before the job nor after its failure; and
rnnrepro.analysis.failed_notebooks has the next run rebuild them).

Every table the notebook writes must have exactly the columns its artifact declares in the study file
(``artifacts.<artifact>.columns``, which the claims are checked against when the workflow is parsed):
a table with other columns is an error naming the table and the difference, so the declaration cannot
drift from what the notebook writes. Where the artifact has cells of your own (config ``custom_cells``),
each table with a ``model`` column gets one more, ``footing``, once the notebook has written it: how
each such cell stands beside its baseline, in words (rnnrepro.analysis.footing). Every table is
then written as LaTeX and Markdown beside its CSV (``<name>.tex``, ``<name>.md``:
rnnrepro.analysis.table_formats), and the three replace an earlier run's together.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shutil
import sys
import tempfile
from pathlib import Path

import jupytext
import nbformat
import papermill

from .. import console, layout
from ..configuration import ConfigError, check_checkout
from ..grid import load_study
from .footing import add_footing
from . import failed_notebooks, table_formats
from .run_files import check_metrics_files, stale_problem

KERNEL = "python3"  # the kernel of the running environment (ipykernel installs it with the env)
FAILED_DIR = Path("logs/notebooks")
KERNEL_DIED = "Kernel died before replying to kernel_info"  # jupyter_client's words for a failed start
KERNEL_STARTS = 3


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.analysis.run_notebook", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path, help="jupytext percent-format .py notebook")
    parser.add_argument("output", type=Path, help="executed .ipynb to write")
    parser.add_argument("--study", required=True)
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--metrics", nargs="*", default=[], help="metrics.json of every cell the artifact uses")
    parser.add_argument("--tables", nargs="*", default=[], help="CSV tables the notebook must write")
    parser.add_argument("--figures", nargs="*", default=[], help="PNG figures the notebook must write")
    return parser.parse_args(argv)


def partial_path(path: Path) -> Path:
    """Where the notebook writes a table or figure first (``<name>.partial.<ext>`` beside it): it replaces
    the file of an earlier run only once the notebook has succeeded, so a failing rebuild leaves it."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def _renamed(text: str, names: dict[str, str]) -> str:
    """``text`` with each partial file's path (absolute or relative) replaced by its final one."""
    for partial, final in names.items():
        text = text.replace(partial, final).replace(os.path.relpath(partial), os.path.relpath(final))
    return text


def failed_copy(notebook: Path, output: Path | None = None) -> Path:
    """Where the executed notebook of a failed run is kept: beside the notebook logs of the budget whose
    results tree ``output`` is in (results/smoke/notebooks/x.ipynb: logs/smoke/notebooks/), else in
    FAILED_DIR."""
    folder = FAILED_DIR
    if output is not None and not output.is_absolute() and output.parts[:1] == (layout.RESULTS,):
        folder = Path(layout.LOGS, *output.parent.parts[1:])
    return folder / f"{notebook.stem}.failed.ipynb"


def _ipc_transport(folder: str):
    """Kernel settings for Unix sockets in ``folder``: no TCP port to be taken by a process starting
    beside it, and no warning from the kernel about unencrypted TCP."""
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "ip": str(Path(folder) / "kernel")}})


@contextlib.contextmanager
def shared_kernel():
    """A kernel that runs several notebooks in turn (``run(..., kernel=...)``), each in a namespace
    emptied before it starts: one start and one set of imports instead of one per notebook. Shut down
    on leaving."""
    from jupyter_client.manager import KernelManager

    with tempfile.TemporaryDirectory(prefix="rnnrepro-kernel-") as sockets:
        kernel = KernelManager(kernel_name=KERNEL, config=_ipc_transport(sockets))
        kernel.start_kernel(cwd=os.getcwd())
        try:
            yield kernel
        finally:
            kernel.shutdown_kernel(now=True)


def _empty_namespace(kernel) -> None:
    """What a notebook defined is gone before the next one runs in the same kernel (its imported
    modules stay: that is the saving), and so are its open figures."""
    client = kernel.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        client.execute_interactive("get_ipython().run_line_magic('reset', '-f')\n"
                                   "import matplotlib.pyplot\nmatplotlib.pyplot.close('all')\n"
                                   "del matplotlib", timeout=60, output_hook=lambda message: None)
    finally:
        client.stop_channels()


def execute(source: Path, executed: Path, parameters: dict, kernel=None) -> None:
    """papermill on one notebook: in ``kernel`` (from :func:`shared_kernel`, its namespace emptied
    first), or in a fresh kernel over Unix sockets (:func:`_ipc_transport`). A fresh kernel that dies
    before it answers has run no cell; such a start is tried again, up to KERNEL_STARTS times."""
    options = {"parameters": parameters, "kernel_name": KERNEL, "cwd": os.getcwd(), "progress_bar": False}
    if kernel is not None:
        if not kernel.is_alive():  # an earlier notebook killed it
            kernel.restart_kernel(now=True)
        _empty_namespace(kernel)
        papermill.execute_notebook(str(source), str(executed), km=kernel, **options)
        return
    for attempt in range(1, KERNEL_STARTS + 1):
        with tempfile.TemporaryDirectory(prefix="rnnrepro-kernel-") as sockets:
            try:
                papermill.execute_notebook(str(source), str(executed), config=_ipc_transport(sockets), **options)
                return
            except RuntimeError as e:
                if str(e) != KERNEL_DIED or attempt == KERNEL_STARTS:
                    raise
                print(f"[rnnrepro] the notebook's kernel died while starting (attempt {attempt} of "
                      f"{KERNEL_STARTS}); starting another", file=sys.stderr)


def run(notebook: Path, output: Path, parameters: dict, kernel=None) -> None:
    """Execute ``notebook`` into ``output`` with ``parameters`` (in ``kernel`` if given: :func:`execute`).
    A failure of any kind is recorded beside ``output`` (rnnrepro.analysis.failed_notebooks), so that the
    workflow runs the notebook again."""
    try:
        _run(notebook, output, parameters, kernel)
    except BaseException as e:
        failed_notebooks.record_failure(output, e)
        raise


def _run(notebook: Path, output: Path, parameters: dict, kernel=None) -> None:
    if not notebook.exists():
        raise FileNotFoundError(f"notebook {notebook} does not exist")
    metrics_files = parameters.get("metrics_files", [])  # the scorecard reads tables, not runs
    relative = [os.path.relpath(path) for path in metrics_files]
    damaged = check_metrics_files(relative)
    if damaged:
        raise RuntimeError(f"notebook {notebook} not run: {len(damaged)} of its {len(metrics_files)} "
                           f"training results cannot be read:\n  " + "\n  ".join(damaged))
    if relative and "study" in parameters:
        study = load_study(parameters["study"])
        stale = [problem for path in relative if (problem := stale_problem(path, study))]
        if stale:
            raise RuntimeError(
                f"notebook {notebook} not run: {len(stale)} of its {len(metrics_files)} training results were "
                f"trained with another config than config/studies/{parameters['study']}.yaml gives now, and a "
                f"table is never made from them:\n  " + "\n  ".join(stale) + "\nRetrain them: rerun with "
                f"--force and their metrics.json as the targets (same --profile/--config), or delete those "
                f"metrics.json files and rerun; then rebuild this artifact.")
    output.parent.mkdir(parents=True, exist_ok=True)
    finals = [Path(p) for p in parameters["tables"] + parameters["figures"]]
    partial = {final: partial_path(final) for final in finals}
    named = {str(partial[final]): str(final) for final in finals}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / (notebook.stem + ".ipynb")
            nbformat.write(jupytext.read(notebook), source)
            executed = Path(tmp) / output.name
            try:
                execute(source, executed, {**parameters,
                                           "tables": [str(partial[Path(p)]) for p in parameters["tables"]],
                                           "figures": [str(partial[Path(p)]) for p in parameters["figures"]]},
                        kernel)
            except papermill.PapermillExecutionError as e:
                kept = failed_copy(notebook, output)
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(executed, kept)
                raise RuntimeError(
                    f"notebook {notebook} failed in cell {e.exec_count}: {e.ename}: {_renamed(e.evalue, named)}\n"
                    f"The executed notebook with the traceback is kept at {kept}. Training results are "
                    f"untouched, and so are the tables and figures of an earlier run: fix the notebook (or "
                    f"its inputs) and rerun the same target.") from None
            missing = [str(final) for final in finals if not partial[final].exists()]
            if missing:
                raise RuntimeError(f"notebook {notebook} ran but did not write {', '.join(missing)}")
            if "study" in parameters:  # an artifact's notebook (the scorecard's belongs to no study)
                # where the artifact has cells of your own, how each stands beside its baseline (in words)
                add_footing(load_study(parameters["study"]), parameters["artifact"], metrics_files,
                            [str(partial[Path(p)]) for p in parameters["tables"]])
                differences = column_differences(parameters["study"], parameters["artifact"],
                                                 [str(partial[Path(p)]) for p in parameters["tables"]])
                if differences:
                    raise RuntimeError(
                        f"notebook {notebook} wrote tables whose columns differ from those declared in "
                        f"config/studies/{parameters['study']}.yaml:\n  "
                        + "\n  ".join(_renamed(d, named) for d in differences)
                        + "\nDeclare the columns the notebook writes (claims are checked against them), "
                          "or fix the notebook.")
            for table in map(Path, parameters["tables"]):  # each table as LaTeX and Markdown too
                for suffix, text in table_formats.texts(partial[table]).items():
                    final = table.with_suffix(suffix)
                    partial[final] = partial_path(final)
                    partial[final].write_text(text)
            for final, written in partial.items():  # all written and checked: only now replace an earlier run's
                os.replace(written, final)
            shutil.move(executed, output)
    finally:
        for path in partial.values():
            path.unlink(missing_ok=True)
    failed_copy(notebook, output).unlink(missing_ok=True)  # a failure's record, now stale


def column_differences(study: str, artifact: str, tables: list[str]) -> list[str]:
    """Each written table whose columns are not those its artifact declares, with the columns written but
    not declared and declared but not written. ``tables``: the files of the artifact's ``tables``, in
    their order (as the rule passes them)."""
    spec = load_study(study)["artifacts"].get(artifact)
    if spec is None:  # a notebook run outside the study's artifacts (a scratch notebook) declares nothing
        return []
    differences = []
    for table, path in zip(spec["tables"], tables):
        declared = spec["columns"][table]
        with open(path, newline="") as f:
            written = next(csv.reader(f), [])  # the header row
        parts = []
        extra = [column for column in written if column not in declared]
        if extra:
            parts.append(f"written, not declared: {', '.join(extra)}")
        absent = [column for column in declared if column not in written]
        if absent:
            parts.append(f"declared, not written: {', '.join(absent)}")
        if parts:
            differences.append(f"{os.path.relpath(path)} (artifacts.{artifact}.columns.{table}): {'; '.join(parts)}")
    return differences


def main(argv=None) -> int:
    args = parse_args(argv)
    parameters = {
        "study": args.study, "artifact": args.artifact,
        "metrics_files": [str(Path(m).resolve()) for m in args.metrics],
        "tables": [str(Path(t).resolve()) for t in args.tables],
        "figures": [str(Path(f).resolve()) for f in args.figures],
    }
    return run_cli(args.notebook, args.output, parameters)


def run_cli(notebook: Path, output: Path, parameters: dict) -> int:
    """:func:`run` for a command line: a failure is one error line and exit status 1."""
    try:
        check_checkout()
        run(notebook, output, parameters)
    except (RuntimeError, FileNotFoundError, ConfigError) as e:
        print(f"[rnnrepro] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
