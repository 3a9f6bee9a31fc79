"""The scorecard's ids in words for the results page: datasets, models with the size actually trained
("LRU, 120 k parameters"), a claim case's row labels ("1,True,released" -> "K = 1"), and the values of
exact parameter counts as a person reads them ("2,885,000")."""

from __future__ import annotations

import math
import re

import pandas as pd

from ..analysis.plotting import dataset_words, model_names

STAGE_WORDS = {"base": "Base", "finetune": "finetuned", "dynamic": "dynamic evaluation"}
EVALUATION_WORDS = {"dynamic": "dynamic evaluation", "static": "static evaluation"}
#: the paper's size a model id or name carries ("lru_24m", "LRU 24 M parameters"): not the size we trained
PAPER_SIZE = re.compile(r" \d+(\.\d+)? M parameters$")


def case_of(claim: str) -> dict[str, str]:
    """A scorecard claim's case, ``name[dataset=ptb, g=1]`` -> {"dataset": "ptb", "g": "1"}."""
    inside = claim.partition("[")[2].rstrip("]")
    return dict(part.split("=", 1) for part in inside.split(", ") if "=" in part)


def case_words(case: dict[str, str], names: dict[str, str]) -> str:
    """``dataset=ptb, model=lstm_m1000`` -> "PTB, LSTM M=1000"."""
    words = []
    for key, value in case.items():
        if key == "dataset":
            words.append(dataset_words(value))
        elif key == "model":
            words.append(names.get(value, value))
        elif key == "stage":
            words.append(STAGE_WORDS.get(value, value))
        elif key == "evaluation":
            words.append(EVALUATION_WORDS.get(value, value))
        elif key == "fraction":
            words.append(f"{value} % of the training data")
        else:
            words.append(f"{key} = {value}")
    return ", ".join(words)


def size_words(params: float | None) -> str:
    """119610 -> "120 k parameters", 1513966 -> "1.5 M parameters"."""
    if params is None or (isinstance(params, float) and math.isnan(params)):
        return ""
    if params >= 1e6:
        return f"{params / 1e6:.2g} M parameters"
    return f"{params / 1e3:.3g} k parameters" if params >= 1e3 else f"{int(params)} parameters"


def trained_sizes(runs: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    """(study, dataset, model) -> the parameters of the model as trained (the runs' ``params``)."""
    if runs is None or runs.empty or "params" not in runs:
        return {}
    found = runs.dropna(subset=["params"]).groupby(["study", "dataset", "model"])["params"].median()
    return {key: float(value) for key, value in found.items()}


class Namer:
    """A study's model ids in words, with the size trained at this budget where the runs give one."""

    def __init__(self, study: dict, sizes: dict[tuple[str, str, str], float]):
        self.study, self.sizes = study, sizes
        self.names = {model: PAPER_SIZE.sub("", name) for model, name in model_names(study, study["models"]).items()}

    def name(self, model: str, dataset: str | None = None, stage: str | None = None, sized: bool = True) -> str:
        """"LRU, 120 k parameters"; a finetuned chain's id on its Base rows is the Base model."""
        name = self.names.get(model, model)
        if stage == "base":
            name = name.removesuffix(" finetuned")
        mine = [size for (study, data, kept), size in self.sizes.items()
                if study == self.study["study"] and kept == model and (dataset in (None, "all") or data == dataset)]
        return f"{name}, {size_words(min(mine))}" if mine and sized else name

    def labels(self, spec: dict, case: dict[str, str], sized: bool = True) -> dict[str, str]:
        """The claim's row labels as the scorecard writes them (the selectors' values joined by commas)
        -> words, models with the size we trained where ``sized``; keys every row shares are left out."""
        rows = spec["rows"]
        shared = {key for key in rows[0] if all(key in row and row[key] == rows[0][key] for row in rows)}
        dataset, stage = case.get("dataset"), case.get("stage")
        found = {}
        for row in rows:
            label = ",".join(str(v) for v in row.values())
            parts = []
            for key, value in row.items():
                if key in shared and len(rows) > 1:
                    continue
                if key == "model":
                    parts.append(self.name(str(value), dataset, row.get("stage", stage), sized))
                elif key == "stage":
                    parts.append(STAGE_WORDS.get(str(value), str(value)))
                elif key == "evaluation":
                    parts.append(EVALUATION_WORDS.get(str(value), str(value)))
                elif key == "cell":
                    parts.append(str(value).upper())
                elif key == "dataset":
                    parts.append(dataset_words(str(value)))
                else:
                    parts.append(f"{key} = {value}")
            found[label] = ", ".join(parts) or label
        return found


def number_words(text: str, counted: bool) -> str:
    """A scorecard number as a person reads it: exact counts whole and grouped ("2.885e+06" ->
    "2,885,000"), other numbers as written."""
    try:
        value = float(text)
    except ValueError:
        return text
    if counted and abs(value) >= 1000:
        return f"{value:+,.0f}" if text.startswith(("+", "-")) else f"{value:,.0f}"
    return text


def items_words(text: str, labels: dict[str, str], counted: bool) -> list[str]:
    """The scorecard's ``paper`` or ``ours`` ("pru_g4_k2_m1400 275.4; lstm_m1000 278.7") as one line per
    row in words ("PRU g=4 M=1400, 569 k parameters: 275.4")."""
    lines = []
    for part in filter(None, (p.strip() for p in text.split("; "))):
        label, _, value = part.rpartition(" ")
        if not label:
            lines.append(part)
            continue
        if value == "n/a":
            value = "no value"
        lines.append(f"{labels.get(label, label)}: {number_words(value, counted)}")
    return lines


def effect_words(text: str, counted: bool) -> str:
    """A difference (or several, "; "-separated) for a person: counts grouped, others as written."""
    return "; ".join(number_words(part.strip(), counted) for part in text.split(";")) if text else ""
