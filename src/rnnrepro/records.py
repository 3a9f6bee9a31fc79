"""Recorded runs: the small files of real-data training runs, kept in the repository, and every table,
figure and the claims scorecard rendered from them on any machine, without a GPU and without retraining.

    python -m rnnrepro.records pack                      # results/runs -> records/<budget>/results/runs
    python -m rnnrepro.records render --budget reduced   # records/reduced -> results/tables, figures

A record is a run folder's ``config.json``, ``history.csv`` and ``metrics.json`` plus the JSON outputs of
its evaluations (``dynamic_eval.json``, ...; no weights, no checkpoints), at the same relative path as
under ``results/``: ``records/<budget>/results/runs/<study>/<corpus>/<model>/frac<f>/seed<s>/``, and each
study's speed benchmark (``results/speed/<study>.json`` -> ``records/<budget>/results/speed/``). The
metrics already carry the device, torch version, git sha and wall time of the run.

``render`` copies the records of one budget into ``results/`` and runs each artifact's notebook
through papermill with exactly the parameters the Snakemake rule gives it (rnnrepro.analysis.
run_notebook), then the scorecard notebook. It runs notebooks directly rather than Snakemake: the
records have no data and no weights, and Snakemake would plan to download, preprocess and retrain
what a record's inputs lack. An artifact is rendered when every cell of its grid at that budget is
recorded, with every evaluation output and speed result it reads; otherwise it is listed as not
rendered, with the number of missing files. Artifacts that need a cell's weights (``model.pt``) cannot
be rendered from records and are listed as such; the scorecard marks their claims not tested.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
from pathlib import Path

from . import grid
from .analysis.claims import is_synthetic
from .configuration import ConfigError, load_run_config, load_study, load_yaml
from .evaluation.plan import artifact_evaluation_files

RECORDED = ("config.json", "history.csv", "metrics.json")
RECORDS = Path("records")
RESULTS = Path("results")


def record_dir(records: Path, budget: str) -> Path:
    return records / budget / RESULTS


def evaluation_outputs(run_dir: Path) -> list[Path]:
    """The JSON files of a run folder besides its config and metrics: its evaluations' outputs."""
    return [path for path in sorted(run_dir.glob("*.json")) if path.name not in RECORDED]


def pack(runs: Path = RESULTS / "runs", records: Path = RECORDS, include_synthetic: bool = False) -> list[Path]:
    """Copy the small files of every finished run under ``runs`` into ``records/<budget>/results/runs``,
    and every speed result beside ``runs`` (``results/speed/<study>.json``) into ``records/<budget>/
    results/speed``.

    Runs on synthetic corpora (the smoke budget) are left out unless ``include_synthetic``: records
    exist to render the papers' tables from real data. Returns the run folders (and speed files) recorded.
    """
    packed = []
    for metrics_file in sorted(runs.glob("**/metrics.json")):
        run_dir = metrics_file.parent
        metrics = json.loads(metrics_file.read_text())
        missing = [name for name in RECORDED if not (run_dir / name).exists()]
        if missing:
            raise FileNotFoundError(f"run folder {run_dir} has metrics.json but no {', '.join(missing)}: "
                                    f"rerun that cell before recording it")
        if is_synthetic(metrics["corpus"]) and not include_synthetic:
            continue
        target = record_dir(records, metrics["budget"]) / "runs" / run_dir.relative_to(runs)
        target.mkdir(parents=True, exist_ok=True)
        for name in RECORDED:
            shutil.copy2(run_dir / name, target / name)
        for output in evaluation_outputs(run_dir):
            shutil.copy2(output, target / output.name)
        packed.append(target)
    for speed_file in sorted((runs.parent / "speed").glob("*.json")):
        speed = json.loads(speed_file.read_text())
        if "budget" not in speed:
            raise ValueError(f"{speed_file} does not say its budget (written before speed results did): "
                             f"rerun its speed rule, or move it away, before recording")
        if speed["budget"] == "smoke" and not include_synthetic:  # the budget on synthetic corpora
            continue
        target = record_dir(records, speed["budget"]) / "speed" / speed_file.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(speed_file, target)
        packed.append(target)
    return packed


def restore(records: Path, budget: str, results: Path = RESULTS) -> list[Path]:
    """Copy one budget's records into ``results/`` (runs and speed results); returns the metrics files
    now in place.

    A file already in ``results/`` that differs from its record is never overwritten: the error
    names it (a run trained here is newer than the record, or the record is from another run).
    """
    source = record_dir(records, budget)
    if not (source / "runs").is_dir():
        known = sorted(p.name for p in records.iterdir()) if records.is_dir() else []
        raise FileNotFoundError(f"no recorded runs for budget {budget!r}: {source / 'runs'} does not exist "
                                f"(recorded budgets: {', '.join(known) or 'none'})")
    placed = []
    for record in sorted(source.glob("**/*")):
        if not record.is_file():
            continue
        target = results / record.relative_to(source)
        if target.exists() and not filecmp.cmp(record, target, shallow=False):
            raise FileExistsError(f"{target} differs from its record {record}: move it away (it is a run "
                                  f"of this machine) or delete it, then render again")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copy2(record, target)
        if target.name == "metrics.json":
            placed.append(target)
    return placed


def _outputs(study: dict, name: str, artifact: str) -> tuple[list[str], list[str], str]:
    spec = study["artifacts"][artifact]
    return ([f"results/tables/{t}.csv" for t in spec["tables"]],
            [f"results/figures/{f}.png" for f in spec["figures"]],
            f"results/notebooks/{name}_{artifact}.ipynb")


def render(budget: str, records: Path = RECORDS, config_file: Path = Path("config/config.yaml")) -> dict:
    """Render every artifact whose runs are all recorded, then the scorecard. Returns artifact -> status."""
    from .analysis.run_notebook import run

    config = load_run_config({**load_yaml(config_file), "budget": budget}, source=str(config_file))
    restore(records, budget)
    studies = {name: load_study(name) for name in config["studies"]}
    status, tables = {}, []
    for name, study in studies.items():
        for artifact, spec in study["artifacts"].items():
            key = f"{name}/{artifact}"
            metrics = [f"{cell.run_dir}/metrics.json" for cell in grid.artifact_cells(study, config, artifact)]
            needed = (metrics + artifact_evaluation_files(study, config, artifact)
                      + ([f"results/speed/{name}.json"] if spec.get("speed") else []))
            missing = [m for m in needed if not Path(m).exists()]
            if missing:
                status[key] = (f"not rendered: {len(missing)} of {len(needed)} recorded files missing "
                               f"(e.g. {missing[0]})")
                continue
            out_tables, out_figures, notebook = _outputs(study, name, artifact)
            parameters = {"study": name, "artifact": artifact,
                          "metrics_files": [str(Path(m).resolve()) for m in metrics],
                          "tables": [str(Path(t).resolve()) for t in out_tables],
                          "figures": [str(Path(f).resolve()) for f in out_figures]}
            for path in out_tables + out_figures:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            try:
                run(Path(spec["notebook"]), Path(notebook), parameters)
            except RuntimeError as error:
                if "model.pt" in str(error) or f"{grid.PROCESSED}/" in str(error):
                    status[key] = ("not rendered: needs the cells' weights (model.pt) or the prepared corpus "
                                   f"({grid.PROCESSED}/), which records do not keep")
                else:
                    status[key] = f"failed: {str(error).splitlines()[0]}"
                continue
            status[key] = "rendered"
            tables += out_tables
    for path in ("results/tables", "results/figures"):
        Path(path).mkdir(parents=True, exist_ok=True)
    scorecard = {"run_config": {"budget": budget, "seeds": config["seeds"], "studies": list(studies)},
                 "table_files": [str(Path(t).resolve()) for t in tables],
                 "tables": [str(Path("results/tables/claims.csv").resolve())],
                 "figures": [str(Path("results/figures/claims.png").resolve())]}
    run(Path("notebooks/claims.py"), Path("results/notebooks/claims.ipynb"), scorecard)
    status["claims"] = "rendered"
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.records", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    pack_cmd = commands.add_parser("pack", help="record the small files of every finished real-data run")
    pack_cmd.add_argument("--runs", type=Path, default=RESULTS / "runs")
    pack_cmd.add_argument("--records", type=Path, default=RECORDS)
    pack_cmd.add_argument("--include-synthetic", action="store_true",
                          help="also record runs on synthetic corpora (to try rendering on smoke runs)")
    render_cmd = commands.add_parser("render", help="tables, figures and the scorecard from one budget's records")
    render_cmd.add_argument("--budget", required=True, choices=["paper", "reduced", "smoke"])
    render_cmd.add_argument("--records", type=Path, default=RECORDS)
    render_cmd.add_argument("--config", type=Path, default=Path("config/config.yaml"),
                            help="run config whose studies and seeds are rendered (its budget is replaced)")
    args = parser.parse_args(argv)
    try:
        if args.command == "pack":
            packed = pack(args.runs, args.records, args.include_synthetic)
            speed = sum(path.parent.name == "speed" for path in packed)
            print(f"[rnnrepro] recorded {len(packed) - speed} runs and {speed} speed results under {args.records}/")
            return 0
        status = render(args.budget, args.records, args.config)
    except (ConfigError, FileNotFoundError, FileExistsError, RuntimeError, ValueError) as error:
        print(f"[rnnrepro] error: {error}", file=sys.stderr)
        return 1
    for key, state in status.items():
        print(f"{key:32s} {state}")
    return 1 if any(state.startswith("failed") for state in status.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
