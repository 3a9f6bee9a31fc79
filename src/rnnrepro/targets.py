"""The targets a command asks for, checked against what the workflow can make, before Snakemake plans.

A path of another budget's results tree (``results/cpu/tables/pru_table1.csv`` while the run config's
budget is ``paper``), a misspelt artifact (``results/tables/pru_tabel1.csv``) or model, or a rule name
that does not exist, would otherwise end in Snakemake's generic "No rule to produce ...". Here each
gets one line: the budget the path belongs to and the command that builds it, or the nearest names
there are. Every budget's outputs are known from the study files alone (rnnrepro.layout places them),
so this needs no DAG. No torch.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import grid, layout
from .evaluation.plan import evaluation_names

RUN_FILES = ("config.json", "history.csv", "metrics.json", "model.pt")
RUN_PATH = re.compile(r"runs/(?P<study>[^/]+)/(?P<corpus>[^/]+)/(?P<model>[^/]+)/frac(?P<fraction>\d+)/"
                      r"seed(?P<seed>\d+)/(?P<file>[^/]+)")


@dataclass(frozen=True)
class Output:
    """One output a budget's rules make: its path, and the study and artifact it belongs to (the
    scorecard's: no study, artifact ``claims``)."""
    path: str
    study: str
    artifact: str

    @property
    def name(self) -> str:
        return f"{self.study}_{self.artifact}" if self.study else self.artifact


def budget_outputs(studies: dict, budget: str) -> list[Output]:
    """The tables, figures, executed notebooks and speed results the budget's rules make, with the
    scorecard's (``claims``) and the results page (``results_page``)."""
    config = {"budget": budget}
    root = grid.results_dir(budget)
    found = []
    for name, study in studies.items():
        for artifact in grid.artifacts(study, config):
            spec = study["artifacts"][artifact]
            found += [Output(f"{root}/tables/{table}.csv", name, artifact) for table in spec["tables"]]
            found += [Output(f"{root}/figures/{figure}.png", name, artifact) for figure in spec["figures"]]
            found.append(Output(f"{root}/notebooks/{name}_{artifact}.ipynb", name, artifact))
            if spec.get("speed"):
                found.append(Output(f"{root}/speed/{name}.json", name, artifact))
    if any(grid.artifacts(study, config) for study in studies.values()):
        found += [Output(f"{root}/{kind}/claims.{ext}", "", "claims")
                  for kind, ext in (("tables", "csv"), ("figures", "png"), ("notebooks", "ipynb"))]
        found.append(Output(f"{root}/{layout.RESULTS_PAGE}", "", "results_page"))
    return list(dict.fromkeys(found))


def omitted_outputs(studies: dict, budget: str) -> dict[str, tuple[str, str]]:
    """Path -> (study, artifact) of the outputs a budget leaves out (its ``omit`` in a study file)."""
    config, root, found = {"budget": budget}, grid.results_dir(budget), {}
    for name, study in studies.items():
        if budget not in study["budgets"]:
            continue
        for artifact in set(study["artifacts"]) - set(grid.artifacts(study, config)):
            spec = study["artifacts"][artifact]
            for path in ([f"{root}/tables/{t}.csv" for t in spec["tables"]] +
                         [f"{root}/figures/{f}.png" for f in spec["figures"]] +
                         [f"{root}/notebooks/{name}_{artifact}.ipynb"]):
                found[path] = (name, artifact)
    return found


def budget_of_path(path: str, budgets: list[str]) -> str | None:
    """The budget whose results tree holds ``path`` (a normalised relative path); None outside results/."""
    parts = PurePosixPath(path).parts
    if not parts or parts[0] != grid.RESULTS:
        return None
    if len(parts) > 2 and parts[1] in budgets and parts[1] != grid.DEFAULT_BUDGET:
        return parts[1]
    return grid.DEFAULT_BUDGET


def normalised(target: str) -> str:
    """A target as a path relative to the working directory (``./results/x``, an absolute path inside it)."""
    path = os.path.normpath(target)
    if os.path.isabs(path):
        relative = os.path.relpath(path)
        if not relative.startswith(".."):
            path = relative
    return Path(path).as_posix()


def _nearest(word: str, candidates: list[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(word, candidates, n=n, cutoff=0.6)


def _study_problem(path: str, study: str, studies: dict, budget: str, study_files: list[str]) -> str | None:
    """Why a study named in a target's path makes nothing at ``budget``: it is not among the run's
    studies, or its file has no entry for the budget; None where it does, or is no study at all."""
    if study in studies and budget not in studies[study]["budgets"]:
        return (f"{path}: study {study} has no budget {budget} (its budgets: "
                f"{', '.join(studies[study]['budgets'])}; config/studies/{study}.yaml)")
    if study not in studies and study in study_files:
        return (f"{path}: study {study} is not among this run's studies ({', '.join(studies)}); add it to "
                f"`studies` (config/config.yaml, or --config studies=[{','.join([*studies, study])}])")
    return None


def _run_problem(inner: str, path: str, studies: dict, budget: str, study_files: list[str]) -> str | None:
    """What is wrong with a run folder's file ``inner`` (``runs/...``) of ``budget``, or None."""
    match = RUN_PATH.fullmatch(inner)
    if match is None:
        return (f"{path}: not a run folder's file; they are <results>/runs/<study>/<corpus>/<model>/"
                f"frac<percent>/seed<seed>/<file> (docs/artifacts.md)")
    study_name, corpus, model, file = match.group("study", "corpus", "model", "file")
    if study_name not in studies or budget not in studies[study_name]["budgets"]:
        known = [name for name, study in studies.items() if budget in study["budgets"]]
        return (_study_problem(path, study_name, studies, budget, study_files)
                or f"{path}: no study {study_name!r} at budget {budget} (studies: {', '.join(known)})")
    study, config = studies[study_name], {"budget": budget}
    keys = sorted({grid.data_key(study, config, dataset) for artifact in grid.artifacts(study, config)
                   for dataset in grid.artifact_spec(study, {**config, "seeds": [0]}, artifact).get("datasets", [])})
    if keys and corpus not in keys:
        near = _nearest(corpus, keys)
        return (f"{path}: study {study_name} has no corpus {corpus!r} at budget {budget}"
                f"{f'; did you mean {near[0]!r}?' if near else ''} (its corpora there: {', '.join(keys)})")
    if model not in study["models"]:
        near = _nearest(model, sorted(study["models"]))
        return (f"{path}: study {study_name} has no model {model!r}"
                f"{'; the nearest: ' + ', '.join(near) if near else ''} (its models are in "
                f"config/studies/{study_name}.yaml, `models:`)")
    files = list(RUN_FILES) + [f"{name}.json" for name in evaluation_names({study_name: study})]
    if file not in files:
        return f"{path}: a run folder holds {', '.join(files)}; no rule makes {file!r}"
    return None


def problems(targets: list[str], studies: dict, budget: str, budgets: list[str], rules: list[str],
             command_for, study_files: list[str] = ()) -> list[str]:
    """One line per target the workflow cannot make as asked (empty when it can make them all).

    ``studies``: every study of the run config, whatever budgets it defines; ``budget``: the run's;
    ``budgets``: every budget there is; ``rules``: the workflow's rule names; ``command_for(targets,
    budget)``: the command that builds those targets at that budget; ``study_files``: the ids of every
    study file (config/studies/), the run's or not."""
    outputs = {b: {o.path: o for o in budget_outputs(studies, b)} for b in budgets}
    found, elsewhere = [], {}
    for target in targets:
        path = normalised(target)
        owner = budget_of_path(path, budgets)
        if os.path.isabs(target) and owner is not None:  # Snakemake matches outputs as the rules write them
            found.append(f"{target}: give the target relative to the project folder, as the rules write it: {path}")
            continue
        if owner is None:
            if "/" not in path and "." not in path and path not in rules:
                near = _nearest(path, rules)
                found.append(f"{target}: no rule and no file of that name"
                             f"{'; the nearest rules: ' + ', '.join(near) if near else ''}")
            continue
        root = grid.results_dir(owner)
        inner = path[len(root) + 1:]
        # runs-bf16/...: a cell of another precision, whose run folders are laid out as runs/'s
        runs = re.match(rf"runs-({'|'.join(layout.OTHER_PRECISIONS)})/", inner)
        if inner.startswith("runs/") or runs:
            problem = _run_problem("runs/" + inner[runs.end():] if runs else inner, path, studies, owner,
                                   list(study_files))
        elif path in outputs[owner]:
            problem = None
        elif path in {f"{grid.RESULTS}/{name}" for name in layout.BY_BUDGET}:
            problem = (f"{target}: every budget's verdicts side by side are drawn by `python -m rnnrepro.records "
                       f"render --budget <budget> ...`, from the scorecards there are, not by a rule")
        elif path in omitted_outputs(studies, owner):
            study, artifact = omitted_outputs(studies, owner)[path]
            only = studies[study]["artifacts"][artifact].get("budgets")
            why = (f"its `omit:` in config/studies/{study}.yaml); other budgets build it" if only is None or owner in only
                   else f"config/studies/{study}.yaml builds it at budgets {', '.join(only)} only)")
            problem = f"{target}: artifact {study}_{artifact} is not built at budget {owner} ({why}"
        elif (named := re.match(r"[a-z][a-z0-9]*", PurePosixPath(path).name)) and _study_problem(
                target, named.group(0), studies, owner, list(study_files)):
            problem = _study_problem(target, named.group(0), studies, owner, list(study_files))
        else:
            everything = [p for b in budgets for p in outputs[b]]
            near = _nearest(path, everything)
            problem = (f"{target}: no rule makes it"
                       + (f"; the nearest: {', '.join(near)}" if near else
                          f"; the budgets' outputs are <results>/tables/<table>.csv, <results>/figures/<figure>.png "
                          f"and <results>/notebooks/<study>_<artifact>.ipynb, with <results> = "
                          f"{grid.results_dir(budget)} at budget {budget} (docs/artifacts.md)"))
        if problem:
            found.append(problem)
        elif owner != budget:
            elsewhere.setdefault(owner, []).append(target)
    for owner, paths in elsewhere.items():
        found.append(f"{', '.join(paths)} {'is' if len(paths) == 1 else 'are'} budget {owner}'s "
                     f"({grid.results_dir(owner)}/), but this run's budget is {budget} (whose results are in "
                     f"{grid.results_dir(budget)}/). Build {'it' if len(paths) == 1 else 'them'} with: "
                     f"{command_for(paths, owner)}")
    return found


def wanted(studies: dict, config: dict, targets: list[str]) -> tuple[list[tuple[str, str]], list[grid.Cell]]:
    """The (study, artifact) pairs ``targets`` ask for at the run's budget (no targets: rule all's, every
    artifact; the scorecard: every artifact whose tables a claim reads), and the run folders they name."""
    root = grid.results_dir(config["budget"])
    outputs = {o.path: o for o in budget_outputs(studies, config["budget"])}
    every = [(name, artifact) for name, study in studies.items() for artifact in grid.artifacts(study, config)]
    wanted, cells = [], []
    for target in targets or ["all"]:
        path = normalised(target)
        output = outputs.get(path)
        runs = grid.runs_dir(config["budget"], config.get("precision", "fp32"))
        run = RUN_PATH.fullmatch("runs/" + path[len(runs) + 1:]) if path.startswith(f"{runs}/") else None
        if path in ("all", "results_page") or (output and output.artifact == "results_page"):
            wanted += every
        elif path == "claims" or (output and not output.study):
            wanted += [(name, artifact) for name, artifact in every
                       if claimed(studies[name], studies[name]["artifacts"][artifact]["tables"])]
        elif output:
            wanted.append((output.study, output.artifact))
        elif path.startswith("notebook_") and tuple(path[9:].split("_", 1)) in every:
            wanted.append(tuple(path[9:].split("_", 1)))
        elif run and run["study"] in studies and run["model"] in studies[run["study"]]["models"]:
            cells.append(grid.Cell(run["study"], run["corpus"], run["model"], int(run["fraction"]),
                                   int(run["seed"]), config["budget"], config.get("precision", "fp32")))
    return list(dict.fromkeys(wanted)), cells


def claimed(study: dict, tables: list[str]) -> list[str]:
    """The tables among ``tables`` that a claim of the study reads (the scorecard's inputs)."""
    read = {claim["table"] for claim in study.get("claims", [])}
    return [table for table in tables if table in read]


def weights_read(studies: dict, config: dict, targets: list[str]) -> set[grid.Cell]:
    """The training cells whose weights (``model.pt``) the artifacts ``targets`` ask for read
    (``reads_weights`` in the study file)."""
    weights = [target for target in targets if normalised(target).endswith("/model.pt")]
    others = [target for target in targets if target not in weights]
    artifacts = wanted(studies, config, others)[0] if others or not targets else []
    asked = wanted(studies, config, weights)[1] if weights else []
    return set(asked) | {cell for name, artifact in artifacts if studies[name]["artifacts"][artifact].get("reads_weights")
                    for cell in grid.artifact_cells(studies[name], config, artifact)}


def training_cells(studies: dict, config: dict, targets: list[str]) -> list[grid.Cell]:
    """The training cells (with the cells they are finetuned from) that ``targets`` need at the run's
    budget (no targets: rule all's, every artifact)."""
    artifacts, cells = wanted(studies, config, targets)
    for name, artifact in artifacts:
        cells += grid.artifact_cells(studies[name], config, artifact)
    chains = []
    for cell in dict.fromkeys(cells):
        chain = [cell]
        while (parent := grid.parent_cell(studies[cell.study], chain[0])) is not None:
            chain.insert(0, parent)
        chains += chain
    return list(dict.fromkeys(chains))
