"""Restoring a budget's records into its results tree and rendering every artifact, the scorecard and the
results page from them, without training.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from .. import grid, layout, locks, tuning
from ..record_checks import RECORDED, damage as _damage, record_problem
from ..artifact_inputs import write_inputs_list
from ..analysis.claims import outputs as claims_outputs
from ..analysis.claims import IN_PART
from ..configuration import load_run_config, load_study, load_yaml
from ..evaluation.plan import artifact_evaluation_files
from ..train.files import write_text_atomic

from .paths import MANIFEST, RECORDS, record_dir, results_dir
from .units import _load


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest(path: Path) -> dict:
    """The files an earlier render restored, with their digests ({} before the first render)."""
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except IsADirectoryError:
        manifest = "is a folder"
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        manifest = f"is not valid JSON ({e})"
    if isinstance(manifest, dict) and all(isinstance(v, str) for v in manifest.values()):
        return manifest
    problem = manifest if isinstance(manifest, str) else "is not an object of file: digest"
    raise ValueError(f"{path} {problem}: it lists the files earlier renders restored here. Delete it and render "
                     f"again (a restored file that differs from its record is then named, to move away), or remove "
                     f"the whole results tree {path.parent} if nothing in it is a run of this machine")


def restore(records: Path, budget: str) -> list[Path]:
    """Copy one budget's records into its results tree; returns the metrics files now in place.

    A file there that differs from its record is replaced only if an earlier render put it there
    (it is listed, with its digest, in the tree's .records.json); any other is a run of this machine,
    and the error names it.
    """
    source = record_dir(records, budget)
    if not (source / "runs").is_dir() and not (source / "speed").is_dir():
        known = sorted(p.name for p in records.iterdir() if p.is_dir()) if records.is_dir() else []
        raise FileNotFoundError(f"no recorded runs for budget {budget!r}: {source} holds no runs/ or speed/ "
                                f"(recorded budgets: {', '.join(known) or 'none'})")
    results = results_dir(budget)
    manifest_file = results / MANIFEST
    manifest = read_manifest(manifest_file)
    placed = []
    # a damaged record is not restored (render names it; its notebooks and the scorecard never read it)
    damaged = {folder for folder in {p.parent for name in RECORDED for p in source.glob(f"runs*/**/{name}")}
               if _damage(folder)}
    for record in sorted(source.glob("**/*")):
        if not record.is_file() or record.parent in damaged:
            continue
        relative = str(record.relative_to(source))
        target = results / relative
        if target.exists() and _digest(target) != _digest(record):
            if manifest.get(relative) != _digest(target):
                raise FileExistsError(f"{target} differs from its record {record} and was not written by an "
                                      f"earlier render: move it away (it is a run of this machine) or delete "
                                      f"it, then render again")
        # a copy with a time of its own, once: Snakemake finds the restored files no older than their
        # records (workflow/rules/records.smk) and what was built from them newer still
        if not target.exists() or _digest(target) != _digest(record):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(record, target)
        manifest[relative] = _digest(target)
        if target.name == "metrics.json":
            placed.append(target)
    # a file an earlier render restored whose record is gone (deleted to retrain it, or dropped by a newer
    # pack) goes too, unless it changed since: a run folder never mixes one record's files with another's
    for relative, digest in sorted(manifest.items()):
        target = results / relative
        if not (source / relative).exists() or (source / relative).parent in damaged:
            if target.is_file() and _digest(target) == digest:
                target.unlink()
                if not any(target.parent.iterdir()):
                    target.parent.rmdir()
            if not target.exists():
                del manifest[relative]
    write_text_atomic(manifest_file, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return placed


def _outputs(study: dict, name: str, artifact: str, budget: str) -> tuple[list[str], list[str], str]:
    spec, root = study["artifacts"][artifact], grid.results_dir(budget)
    return ([f"{root}/tables/{t}.csv" for t in spec["tables"]],
            [f"{root}/figures/{f}.png" for f in spec["figures"]],
            f"{root}/notebooks/{name}_{artifact}.ipynb")


def _artifact_problem(study: dict, config: dict, artifact: str, records: Path) -> str | None:
    """Why an artifact cannot be rendered from this budget's records, or None."""
    cells = grid.artifact_cells(study, config, artifact)
    unusable = [p for p in (record_problem(study, config, c, records) for c in cells) if p]
    root = results_dir(config["budget"])
    files = artifact_evaluation_files(study, config, artifact)
    if study["artifacts"][artifact].get("speed"):
        files.append(f"{root}/speed/{study['study']}.json")
    unusable += [f"{Path(f).relative_to(root)}: not recorded" for f in files
                 if not (record_dir(records, config["budget"]) / Path(f).relative_to(root)).exists()]
    if not unusable:
        return None
    stale = sum("stale record" in p for p in unusable)
    what = f"{len(unusable)} of its {len(cells) + len(files)} records are missing or unusable"
    return f"{what}{f' ({stale} stale)' if stale else ''}, e.g. {unusable[0]}"


def _cell_problems(study: dict, config: dict, artifact: str, records: Path) -> list[tuple[grid.Cell, str, list[str]]]:
    """Each cell of an artifact, the model it counts for (a tuning run: the model it tunes) and why its
    records cannot be rendered ([] where it and its evaluations are recorded and current)."""
    root = results_dir(config["budget"])
    names = study["artifacts"][artifact].get("evaluations", [])
    found = []
    for cell in grid.artifact_cells(study, config, artifact):
        variant = tuning.parse_variant(cell.model)
        problem = record_problem(study, config, cell, records)
        problems = [problem] if problem else []
        for name in names:
            relative = Path(f"{cell.run_dir}/{name}.json").relative_to(root)
            if not (record_dir(records, config["budget"]) / relative).exists():
                problems.append(f"{relative}: not recorded")
        found.append((cell, variant[0] if variant else cell.model, problems))
    return found


def _in_part(study: dict, config: dict, artifact: str, records: Path) -> tuple[list[str], str] | None:
    """Where only some cells of an artifact have their records current: the metrics files of those and a
    note of what the rows have so far (seeds per model) and which rows wait, with why; None where all
    or none are current. A tuning curve counts only whole (every rate of a model). A records tree grows
    unit by unit: the artifact is rendered over what it has, its claims flagged as decided on the seeds
    so far (rnnrepro.analysis.claims), rather than waiting for its last cell."""
    if study["artifacts"][artifact].get("speed"):
        return None
    cells = _cell_problems(study, config, artifact, records)
    if not cells:
        return None
    models = list(dict.fromkeys(model for _, model, _ in cells))
    whole = artifact == tuning.ARTIFACT
    usable = {model: [c for c, m, p in cells if m == model and not p] for model in models}
    total = {model: sum(m == model for _, m, _ in cells) for model in models}
    if whole:
        usable = {model: (found if len(found) == total[model] else []) for model, found in usable.items()}
    if not any(usable.values()) or all(len(usable[m]) == total[m] for m in models):
        return None
    problems = [p for _, m, found in cells for p in found if not usable[m] or found]
    stale = sum("stale record" in p for p in problems)
    so_far = [f"{model} {len(usable[model])} of {total[model]}" for model in models
              if usable[model] and len(usable[model]) < total[model]]
    waiting = [model for model in models if not usable[model]]
    note = "; ".join(filter(None, [
        f"seeds recorded so far: {', '.join(so_far)}" if so_far else "",
        f"rows of {', '.join(waiting)} wait for their records" if waiting else "",
        f"{len(problems)} records missing or unusable{f' ({stale} stale)' if stale else ''}, e.g. {problems[0]}"]))
    metrics = [f"{cell.run_dir}/metrics.json" for cell, model, _ in cells if cell in usable[model]]
    return metrics, note


@dataclasses.dataclass
class Rendering:
    """One artifact of a render: the notebook to run and its parameters, or why it is not run."""
    key: str                        # <study>/<artifact>
    notebook: Path | None = None
    executed: Path | None = None
    parameters: dict | None = None
    tables: list[str] = dataclasses.field(default_factory=list)
    state: str = ""                 # "rendered", "not rendered: <why>", "not in ...", "failed: <error>"
    in_part: str = ""               # a rendered artifact's rows that wait for their records, and why
    problem: str = ""               # why not all of its records can be rendered
    seconds: float = 0.0


def render_plan(budget: str, config: dict, studies: dict, records: Path) -> list[Rendering]:
    """Every artifact of the budget's studies: a notebook run where its records are all there and
    current, or the reason it is not rendered."""
    plan = []
    for name, study in studies.items():
        for artifact, spec in study["artifacts"].items():
            item = Rendering(f"{name}/{artifact}")
            plan.append(item)
            if artifact not in grid.artifacts(study, config):
                item.state = f"not in the {budget} budget (its `omit`)"
                continue
            out_tables, out_figures, notebook = _outputs(study, name, artifact, budget)
            item.tables = out_tables
            problem = _artifact_problem(study, config, artifact, records)
            metrics = [f"{cell.run_dir}/metrics.json" for cell in grid.artifact_cells(study, config, artifact)]
            if problem is not None:
                part = _in_part(study, config, artifact, records)
                if part is None:
                    item.state = f"not rendered: {problem}"
                    continue
                (metrics, item.in_part), item.problem = part, problem
            # what the tables are made from, as the workflow lists it: a rendered table stays up to date
            # for Snakemake until the grid changes (rnnrepro.artifact_inputs)
            write_inputs_list(study, config, artifact)
            item.notebook, item.executed = Path(spec["notebook"]), Path(notebook)
            item.parameters = {"study": name, "artifact": artifact,
                               "metrics_files": [str(Path(m).resolve()) for m in metrics],
                               "tables": [str(Path(t).resolve()) for t in out_tables],
                               "figures": [str(Path(f).resolve()) for f in out_figures]}
    return plan


WEIGHTS_NEEDED = "not rendered: it needs the cells' weights"


_WORKER_KERNEL = None  # a render worker's kernel, shared by the notebooks the worker runs


def _start_worker_kernel() -> None:
    """A render worker's start: one kernel for every notebook it runs (run_notebook.shared_kernel),
    shut down when the worker process ends."""
    from multiprocessing import util

    from ..analysis.run_notebook import shared_kernel

    global _WORKER_KERNEL
    kernel = shared_kernel()
    _WORKER_KERNEL = kernel.__enter__()
    util.Finalize(None, kernel.__exit__, args=(None, None, None), exitpriority=10)


def _run_notebook(notebook: Path, executed: Path, parameters: dict) -> tuple[str, float]:
    """Run one artifact's notebook in the worker's kernel; returns its state and seconds."""
    from ..analysis.run_notebook import run

    started = time.monotonic()
    for path in parameters["tables"] + parameters["figures"]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        run(notebook, executed, parameters, kernel=_WORKER_KERNEL)
        state = "rendered"
    except RuntimeError as error:
        if "model.pt" in str(error) or f"{grid.PROCESSED}/" in str(error):
            state = (f"{WEIGHTS_NEEDED} (model.pt) or the prepared corpus ({grid.PROCESSED}/), which records do "
                     f"not keep")
        else:
            state = f"failed: {error}"
    return state, time.monotonic() - started


def stop_quietly(signum, frame) -> None:
    """Ctrl-C during a render: one line, then the kernels and workers shut down without a word (their
    clients' threads would print dozens of lines of tracebacks as they are torn down)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the shutdown short
    print("[rnnrepro] stopped by Ctrl-C: the notebooks already running end first (seconds), no other starts; "
          "this render is incomplete (what it wrote stays): render again", file=sys.stderr, flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    sys.stderr = open(os.devnull, "w")
    raise KeyboardInterrupt


def say_rendered(budget: str, item: Rendering) -> None:
    """One line per artifact as its render ends: ``[rnnrepro] <budget> <study>/<artifact>: <state>``."""
    timing = f" in {item.seconds:.1f} s" if item.state == "rendered" else ""
    state = f"{IN_PART} ({item.in_part})" if item.state == "rendered" and item.in_part else item.state
    print(f"[rnnrepro] {budget} {item.key}: {state}{timing}", flush=True)


def hold_render_lock(budget: str) -> int:
    """One render of a budget at a time in a working tree: two would write the same tables, figures and
    executed notebooks at once, and each would read the other's half-written files. The lock (``flock`` on
    ``<logs>/render/render.lock``, rnnrepro.locks) lasts as long as this process."""
    return locks.hold(Path(grid.logs_dir(budget)) / "render" / "render.lock",
                      f"another `records render --budget {budget}` is running in this working tree ({{holder}}): "
                      f"wait for it to end, then render again. This render changed nothing")


def notebook_pool(jobs: int):
    """The worker processes that run the artifacts' notebooks, ``jobs`` side by side: each keeps one
    kernel for the notebooks it runs (one start and one set of imports each), started when first needed,
    so one pool serves every budget of a render. Spawned, so that no worker inherits the kernel the
    calling process holds for the scorecard."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=max(1, jobs), initializer=_start_worker_kernel,
                               mp_context=multiprocessing.get_context("spawn"))


def render(budget: str, records: Path = RECORDS, config_file: Path = Path("config/config.yaml"),
           jobs: int = 2, kernel=None, custom_file: Path | None = None, rendered: list[str] | None = None,
           pool=None, page: bool = True) -> dict:
    """Render every artifact whose records are there and current, all of them or some (``jobs`` worker
    processes side by side, each running its notebooks in turn in one kernel), then the scorecard, saying
    each as it ends, with the cells of your own of ``custom_file`` where given. Returns artifact -> state
    ("rendered", "rendered in part: <what waits>", "not rendered: <why>", "not in the <budget> budget
    ...", "failed: <error>"). ``kernel``: where the
    scorecard's notebook runs (run_notebook.shared_kernel; a fresh one without). ``pool``: the
    notebooks' workers (:func:`notebook_pool`, shared by the budgets of one render; a pool of ``jobs``
    of its own without). ``page``: build the budget's results page (a render of several budgets builds
    every page once, at its end, for each shows all budgets' verdicts side by side)."""
    import contextlib
    from concurrent.futures import as_completed

    from ..analysis.run_notebook import run

    started = time.monotonic()
    config, studies = _load(budget, config_file, custom_file=custom_file, rendered=rendered or [budget],
                            records=records)
    restore(records, budget)
    root = grid.results_dir(budget)
    plan = render_plan(budget, config, studies, records)
    for item in plan:
        if item.notebook is None:
            say_rendered(budget, item)
    runnable = [item for item in plan if item.notebook is not None]
    with (contextlib.nullcontext(pool) if pool is not None else notebook_pool(min(jobs, len(runnable)))) as pool:
        # the workers start with Ctrl-C ignored (inherited): the main process handles it (stop_quietly)
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            running = {pool.submit(_run_notebook, item.notebook, item.executed, item.parameters): item
                       for item in runnable}
        finally:
            signal.signal(signal.SIGINT, handler)
        try:
            for future in as_completed(running):
                item = running[future]
                item.state, item.seconds = future.result()
                if item.in_part and item.state.startswith("failed: "):
                    # rendering the cells recorded so far is a best effort: the artifact waits for the rest
                    error = item.state.removeprefix("failed: ").splitlines()[0]
                    item.state = (f"not rendered: {item.problem}; from the cells recorded so far its notebook "
                                  f"failed ({error})")
                    item.in_part = ""
                say_rendered(budget, item)
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)  # the notebooks not started never start
            raise
    tables = [t for item in runnable if item.state == "rendered" for t in item.tables]
    remove_earlier_outputs(budget, studies, plan)
    unrendered = {}
    for item in plan:
        if item.state.startswith("not rendered: "):
            unrendered.update({Path(t).stem: f"not rendered from records: {item.state.removeprefix('not rendered: ')}"
                               for t in item.tables})
        elif item.state == "rendered" and item.in_part:
            # the table is there, with the rows it has: a claim that reads a waiting row says why
            unrendered.update({Path(t).stem: f"{IN_PART} from records: {item.in_part}" for t in item.tables})
        elif item.state.startswith("failed: "):
            unrendered.update({Path(t).stem: f"its notebook failed on the records: {item.state.removeprefix('failed: ')}"
                               for t in item.tables})
    for path in (f"{root}/tables", f"{root}/figures"):
        Path(path).mkdir(parents=True, exist_ok=True)
    files = claims_outputs(root, list(studies))
    scorecard = {"run_config": {"budget": budget, "seeds": config["seeds"], "studies": list(studies)},
                 "table_files": [str(Path(t).resolve()) for t in tables],
                 "unrendered": unrendered,
                 "tables": [str(Path(t).resolve()) for t in files["tables"]],
                 "figures": [str(Path(f).resolve()) for f in files["figures"]]}
    claims = Rendering("claims")
    begun = time.monotonic()
    run(Path("notebooks/claims.py"), Path(f"{root}/notebooks/claims.ipynb"), scorecard, kernel=kernel)
    claims.state, claims.seconds = "rendered", time.monotonic() - begun
    say_rendered(budget, claims)
    from .. import results_page  # matplotlib, through the tables' rounding: not for the Snakefile's import

    states = {item.key: (item.state.removeprefix("not rendered: ") if item.state != "rendered"
                         else f"{IN_PART}: {item.in_part}")
              for item in plan if item.state != "rendered" or item.in_part}
    page = results_page.build(scorecard["run_config"], states) if page else results_page.page_path(budget)
    print(f"[rnnrepro] {budget}: {render_summary(plan)}, in {time.monotonic() - started:.0f} s; tables, figures "
          f"and the scorecard ({root}/tables/claims.csv) are in {root}/; read them on the results page: {page}",
          flush=True)
    return {**{item.key: f"{IN_PART}: {item.in_part}" if item.state == "rendered" and item.in_part else item.state
               for item in plan}, "claims": claims.state}


def remove_earlier_outputs(budget: str, studies: dict, plan: list[Rendering]) -> None:
    """Remove the tables and figures an earlier render (or run) left of the artifacts not rendered now:
    the page and the scorecard then say why each is missing, instead of showing what older records made
    as current."""
    for item in plan:
        if item.state == "rendered" or item.state.startswith(("not in the ", WEIGHTS_NEEDED)):
            continue  # (what needs weights is never rendered from records: a run of this machine made it)
        name, artifact = item.key.split("/", 1)
        tables, figures, _ = _outputs(studies[name], name, artifact, budget)
        # each table with the forms written beside it (its .md and .tex)
        made = [p for table in map(Path, tables) for p in sorted(table.parent.glob(f"{table.stem}.*"))]
        gone = [path for path in made + list(map(Path, figures)) if path.exists() or path.is_symlink()]
        for path in gone:
            path.unlink()
        if gone:
            print(f"[rnnrepro] {budget}: removed the earlier {', '.join(p.name for p in gone)} of {item.key}, "
                  f"not rendered now", flush=True)


def render_summary(plan: list[Rendering]) -> str:
    """The counts of a render, with the reasons where artifacts were not rendered."""
    rendered = [i for i in plan if i.state == "rendered"]
    weights = [i.key for i in plan if i.state.startswith("not rendered: it needs the cells' weights")]
    missing = [i.key for i in plan if i.state.startswith("not rendered: ") and i.key not in weights]
    omitted = [i.key for i in plan if i.state.startswith("not in the ")]
    failed = [i.key for i in plan if i.state.startswith("failed: ")]
    in_part = [i.key for i in rendered if i.in_part]
    parts = [f"{len(rendered)} of {len(plan)} artifacts rendered"
             + (f" ({len(in_part)} in part, rows waiting for records: {', '.join(in_part)})" if in_part else "")]
    if weights:
        parts.append(f"{len(weights)} need weights or data that records do not keep ({', '.join(weights)})")
    if missing:
        parts.append(f"{len(missing)} lack records or have stale or damaged ones ({', '.join(missing)})")
    if omitted:
        parts.append(f"{len(omitted)} not in this budget ({', '.join(omitted)})")
    parts.append(f"{len(failed)} failed" + (f" ({', '.join(failed)})" if failed else ""))
    return "; ".join(parts)


def scales_first(budgets: list[str], config_file: Path) -> list[str]:
    """The budgets to render, each other scale of a budget (``scale_of``) before that budget, whose
    scorecard reads the other scale's beside its own."""
    config = load_run_config(load_yaml(config_file), source=str(config_file))
    scales = {name for study in config["studies"] for name, spec in load_study(study)["budgets"].items()
              if "scale_of" in spec}
    return sorted(dict.fromkeys(budgets), key=lambda budget: budget not in scales)


BY_BUDGET = tuple(f"{grid.RESULTS}/{name}" for name in layout.BY_BUDGET)


def render_by_budget(kernel=None) -> list[str]:
    """The side-by-side verdicts of every budget with a scorecard here (smoke aside): results/
    claims_by_budget.csv and .png (notebooks/claims_by_budget.py). Returns the budgets shown."""
    from ..analysis.run_notebook import run

    results = Path(grid.RESULTS)
    budgets = [grid.DEFAULT_BUDGET] + ([p.name for p in sorted(results.iterdir()) if p.name not in grid.RESERVED_NAMES]
                                       if results.is_dir() else [])
    found = {budget: Path(grid.results_dir(budget), "tables", "claims.csv") for budget in budgets
             if budget != grid.SMOKE and Path(grid.results_dir(budget), "tables", "claims.csv").is_file()}
    if not found:
        return []
    run(Path("notebooks/claims_by_budget.py"), Path(BY_BUDGET[2]),
        {"scorecards": {b: str(p.resolve()) for b, p in found.items()},
         "tables": [str(Path(BY_BUDGET[0]).resolve())], "figures": [str(Path(BY_BUDGET[1]).resolve())]},
        kernel=kernel)
    return list(found)
