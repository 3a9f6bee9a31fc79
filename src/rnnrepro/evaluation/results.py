"""Reading evaluation outputs in the notebooks (torch-free): ``<run dir>/<name>.json`` beside each
cell's ``metrics.json``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..analysis.results import MissingResult, paper_values, summarise_seeds
from ..analysis.run_files import read_evaluation_file


def evaluation_file(metrics_file: str | Path, name: str) -> Path:
    return Path(metrics_file).parent / f"{name}.json"


def read_evaluation(metrics_file: str | Path, name: str) -> dict:
    path = evaluation_file(metrics_file, name)
    if not path.exists():
        raise MissingResult(f"{path} is missing: run that evaluation first (snakemake {path})")
    return read_evaluation_file(path)


def read_evaluations(metrics_files: list[str], name: str) -> pd.DataFrame:
    """One row per cell: the evaluation's keys (lists, such as a grid or entropies, stay one cell each)."""
    return pd.DataFrame([read_evaluation(m, name) for m in metrics_files])


def _model_order(study: dict, artifact: str, table: pd.DataFrame) -> pd.DataFrame:
    """Rows by dataset, then in the artifact's model order (rows of one model keep their order)."""
    order = {m: i for i, m in enumerate(study["artifacts"][artifact]["models"])}
    return (table.sort_values(["dataset", "model"], key=lambda s: s.map(order) if s.name == "model" else s,
                              kind="stable").reset_index(drop=True))


def dynamic_eval_table(evals: pd.DataFrame, study: dict, artifact: str) -> pd.DataFrame:
    """Long table, one row per (dataset, model, evaluation static|dynamic): validation (when scored) and
    test perplexity (mean over seeds), the η/λ used, and the paper's test perplexity (``paper:`` section
    keys ``static_test_ppl`` / ``dynamic_test_ppl``)."""
    rows = []
    for _, cell in evals.iterrows():
        for kind in ("static", "dynamic"):
            rows.append({"dataset": cell["dataset"], "corpus": cell["corpus"], "model": cell["model"],
                         "budget": cell["budget"], "seed": cell["seed"], "evaluation": kind,
                         "valid_ppl": cell.get(f"{kind}_valid_ppl"), "test_ppl": cell[f"{kind}_test_ppl"],
                         "hyperparameters": (f"lr={cell['lr']:g} decay={cell['decay']:g} eps={cell['epsilon']:g} "
                                             f"n={cell['segment_length']}" if kind == "dynamic" else "")})
    long = pd.DataFrame(rows)
    keys = ["dataset", "corpus", "model", "budget", "evaluation"]
    table = summarise_seeds(long, keys, ["valid_ppl", "test_ppl"])
    table["hyperparameters"] = (long.groupby(keys, sort=False)["hyperparameters"]
                                .agg(lambda h: "; ".join(dict.fromkeys(h))).values)
    static = table[table["evaluation"] == "static"].set_index(["dataset", "model"])["test_ppl"]
    table["test_change_pct"] = [100 * (row.test_ppl / static[(row.dataset, row.model)] - 1)
                                for row in table.itertuples()]
    paper = paper_values(study, artifact)
    if not paper.empty:
        paper = pd.concat([paper[["dataset", "model"]].assign(evaluation=kind, paper_test_ppl=paper[f"paper_{kind}_test_ppl"])
                           for kind in ("static", "dynamic")])
        table = table.merge(paper, on=["dataset", "model", "evaluation"], how="left")
        paper_static = table[table["evaluation"] == "static"].set_index(["dataset", "model"])["paper_test_ppl"]
        table["paper_test_change_pct"] = [100 * (row.paper_test_ppl / paper_static[(row.dataset, row.model)] - 1)
                                          for row in table.itertuples()]
    return _model_order(study, artifact, table)


def entropy_table(evals: pd.DataFrame, study: dict, artifact: str) -> pd.DataFrame:
    """One row per (dataset, model): contexts, mean entropy over every context and over the first
    stream (mean over seeds), and the paper's mean and count."""
    keys = ["dataset", "corpus", "model", "budget", "split", "streams", "steps", "contexts"]
    table = summarise_seeds(evals, keys, ["mean_entropy", "mean_entropy_first_stream"])
    table = table.merge(paper_values(study, artifact), on=["dataset", "model"], how="left")
    return _model_order(study, artifact, table)


def saliency_table(evals: pd.DataFrame, study: dict, artifact: str) -> pd.DataFrame:
    """One row per (model, sequence, input position) of the first seed: the word, its saliency, its
    share of the sequence's total saliency, the target word and the model's top-5 next words."""
    rows = []
    for _, cell in evals[evals["seed"] == evals["seed"].min()].iterrows():
        for number, seq in enumerate(cell["sequences"]):
            total = sum(seq["saliency"])
            top = " ".join(f"{w} ({p:.3f})" for w, p in zip(seq["top_words"], seq["top_probabilities"]))
            for position, (word, value) in enumerate(zip(seq["words"], seq["saliency"])):
                rows.append({"dataset": cell["dataset"], "corpus": cell["corpus"], "model": cell["model"],
                             "budget": cell["budget"], "seed": cell["seed"], "sequence": number,
                             "position": position, "word": word, "saliency": value,
                             "saliency_share": value / total if total > 0 else float("nan"),
                             "target": seq["target"], "target_probability": seq["target_probability"],
                             "top5": top})
    return _model_order(study, artifact, pd.DataFrame(rows))
