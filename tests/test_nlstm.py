"""Study `nlstm` (text8 autocomplete): the dataset construction on a fixture text, the published
parameter counts, the cpu budget's protocol (tuning grid, stop rule, seeds, "at first" over the same
batches for every unit), and the paper- and smoke-budget dry runs. The autocomplete trainer (outputs,
patience on the best, resume after a kill, NaN) is tested in tests/test_training.py, the smoke run's
artifacts in tests/test_smoke_run.py."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import copy_project, snakemake

from rnnrepro import grid, tuning
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.data import DataError
from rnnrepro.data.autocomplete import (AUTOCOMPLETE_DATASETS, PAD_ID, UNK_ID, AutocompleteSpec, build,
                                        load_classes, load_split)
from rnnrepro.analysis.autocomplete import early_marks, early_validation_loss
from rnnrepro.train.autocomplete import build_model, evaluate

MODELS = ["gru_2x600", "lstm_2x600", "nlstm_1x600_d2"]

# 3 lines of source text; after reduction to a-z the words are those of FIXTURE_WORDS.
FIXTURE_SPLITS = {
    "train": "the cat sat on the mat.\nthe dog (a big one) ate the cat food\n",
    "valid": "a cat and a dog sat together on the mat\n",
    "test": "the end\n",
}
FIXTURE_WORDS = " ".join(FIXTURE_SPLITS.values()).replace(".", " ").replace("(", " ").replace(")", " ").split()
FIXTURE_SPEC = AutocompleteSpec(source="fixture", max_chars=20, vocabulary_words=4, train_percent=60,
                                valid_percent=20, seed=7, expected_train_observations=None)


@pytest.fixture
def fixture_dataset(tmp_path, monkeypatch) -> Path:
    monkeypatch.setitem(AUTOCOMPLETE_DATASETS, "fixture_autocomplete", FIXTURE_SPEC)
    source = tmp_path / "fixture"
    source.mkdir()
    for split, text in FIXTURE_SPLITS.items():
        (source / f"{split}.txt").write_text(text)
    build("fixture_autocomplete", source, tmp_path / "out")
    return tmp_path / "out"


def observations(folder: Path, split: str) -> list[str]:
    return (folder / f"{split}.txt").read_text().split("\n")[:-1]


def test_observations_hold_whole_words_in_order(fixture_dataset):
    splits = {split: observations(fixture_dataset, split) for split in ("train", "valid", "test")}
    everything = splits["train"] + splits["valid"] + splits["test"]
    for line in everything:
        assert len(line) <= FIXTURE_SPEC.max_chars
        assert line.startswith(" ") and "  " not in line and not line.endswith(" ")
    # Undo the authors' shuffle: the observations in text order are the text, word for word.
    order = np.random.RandomState(FIXTURE_SPEC.seed).permutation(len(everything))
    in_text_order = [None] * len(everything)
    for position, index in enumerate(order):
        in_text_order[index] = everything[position]
    assert "".join(in_text_order) == "".join(" " + word for word in FIXTURE_WORDS)
    # Greedy packing: the next observation's first word would not have fitted.
    for line, following in zip(in_text_order, in_text_order[1:]):
        assert len(line) + len(following.split(" ")[1]) + 1 > FIXTURE_SPEC.max_chars


def test_split_sizes(fixture_dataset):
    stats = json.loads((fixture_dataset / "stats.json").read_text())
    total = sum(stats["observations"].values())
    assert stats["observations"] == {"train": math.floor(0.6 * total), "valid": math.floor(0.2 * total),
                                     "test": total - math.floor(0.6 * total) - math.floor(0.2 * total)}
    assert {split: len(observations(fixture_dataset, split)) for split in stats["observations"]} == \
        stats["observations"]


def test_output_vocabulary_rule(fixture_dataset):
    # counts over the whole text: the 6; a, cat 3; dog, mat, on, sat 2; ... (ties alphabetically)
    assert load_classes(fixture_dataset) == ["<pad>", "<unk>", "the", "a", "cat", "dog"]
    stats = json.loads((fixture_dataset / "stats.json").read_text())
    assert stats["classes"] == FIXTURE_SPEC.classes == 6
    assert stats["vocabulary_cut"] == {"distinct_words": 14, "boundary_count": 2,
                                       "words_with_boundary_count": 4, "of_them_kept": 1}


def test_every_character_and_its_leading_space_map_to_the_word(fixture_dataset):
    classes = load_classes(fixture_dataset)
    for split in ("train", "valid", "test"):
        encoded = load_split(fixture_dataset / f"{split}.txt", classes)
        for row, line in enumerate(encoded.lines):
            expected = []
            for word in line.split(" ")[1:]:
                expected += [classes.index(word) if word in classes else UNK_ID] * (len(word) + 1)
            length = len(line)
            assert encoded.lengths[row] == length
            assert encoded.targets[row, :length].tolist() == expected
            assert "".join(" " if s == 1 else chr(ord("a") + s - 2) for s in encoded.inputs[row, :length]) == line
            # padding after the end, in inputs and targets alike
            assert (encoded.inputs[row, length:] == PAD_ID).all() and (encoded.targets[row, length:] == PAD_ID).all()


def test_padding_is_masked_out_of_loss_and_accuracy(fixture_dataset):
    """Batched evaluation (padded to the longest) equals evaluation one observation at a time."""
    classes = load_classes(fixture_dataset)
    split = load_split(fixture_dataset / "train.txt", classes)
    assert len(set(split.lengths.tolist())) > 1, "the fixture must pad"
    torch.manual_seed(0)
    cfg = {"model": "m", "study": "nlstm", "architecture": {"cell": "lstm_single_bias", "embedding_size": 6,
                                                            "hidden_size": 5, "layers": 1, "tie_weights": False,
                                                            "cell_options": {}}}
    model = build_model(cfg, len(classes))
    batched = evaluate(model, split, batch_size=len(split.lengths), device=torch.device("cpu"))
    single = evaluate(model, split, batch_size=1, device=torch.device("cpu"))
    assert batched["cross_entropy"] == pytest.approx(single["cross_entropy"], rel=1e-6)
    assert batched["accuracy"] == single["accuracy"]
    assert batched["characters"] == int(split.lengths.sum())


def test_a_word_longer_than_an_observation_is_refused(tmp_path, monkeypatch):
    monkeypatch.setitem(AUTOCOMPLETE_DATASETS, "fixture_autocomplete", FIXTURE_SPEC)
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text("a " + "x" * 25 if split == "train" else "")
    with pytest.raises(DataError, match="25 characters"):
        build("fixture_autocomplete", tmp_path, tmp_path / "out")


def test_a_source_that_is_not_the_published_text_is_refused(tmp_path):
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text("just a few words\n")
    with pytest.raises(DataError, match="508,583"):
        build("text8_autocomplete", tmp_path, tmp_path / "out")


# --------------------------------------------------------------------------------------------------
# The published parameter counts


def paper_cell(model: str) -> dict:
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    return grid.resolve_cell(load_study("nlstm"), dict(run_config, budget="paper"),
                             grid.Cell("nlstm", "text8_autocomplete", model, 100, 1111, "paper"))


@pytest.mark.parametrize("model, recurrent", [("gru_2x600", 4_323_600), ("lstm_2x600", 5_764_800),
                                              ("nlstm_1x600_d2", 5_764_800)])
def test_published_parameter_counts(model, recurrent):
    classes = AUTOCOMPLETE_DATASETS["text8_autocomplete"].classes
    assert classes == 16_386
    instantiated = build_model(paper_cell(model), classes)
    counts = instantiated.parameter_counts()
    assert counts == {"embedding": 16_200, "recurrent": recurrent, "dense": 9_847_986}
    assert sum(p.numel() for p in instantiated.parameters()) == sum(counts.values())
    published = load_study("nlstm")["paper"]["models"]["text8_autocomplete"][model]
    assert published == {f"params_{part}": n for part, n in counts.items()}


# --------------------------------------------------------------------------------------------------
# The workflow


@pytest.mark.slow
def test_paper_dry_run_lists_the_three_cells(tmp_path):
    project = copy_project(tmp_path)
    result = snakemake(project, "-n", "--config", "budget=paper", "--", "results/tables/nlstm_test.csv",
                       "results/tables/nlstm_models.csv")
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    planned = set(re.findall(r"results/runs/nlstm/(\w+)/(\w+)/frac100/seed1111/metrics\.json", out))
    assert planned == {("text8_autocomplete", model) for model in MODELS}
    assert re.search(r"train_cell\s+3\b", out)
    assert "data/raw/text8/text8.zip" in out and "data/processed/text8_autocomplete/train.txt" in out


# --------------------------------------------------------------------------------------------------
# The cpu budget's protocol

CPU = {"budget": "cpu", "precision": "fp32", "device": "auto", "seeds": [1111]}


def test_cpu_tunes_the_three_models_on_seven_step_sizes_and_a_seed_of_its_own():
    study = load_study("nlstm")
    cells = grid.artifact_cells(study, CPU, "tuning")
    assert sorted(c.model for c in cells) == sorted(tuning.variant_id(m, f) for m in MODELS for f in (0.5, 1, 2, 4, 8, 16, 32))
    assert {c.seed for c in cells} == {1000} and {c.corpus for c in cells} == {"wt2_text8style_autocomplete_w1024"}
    for cell in cells:
        recipe = grid.resolve_cell(study, CPU, cell)["recipe"]
        assert recipe["lr"] == pytest.approx(0.001 * tuning.parse_variant(cell.model)[1])
        assert recipe["epochs"] == 6  # tuning on shorter runs, the same cap for every model
        assert recipe["early_stopping"] == {"rule": "best", "patience": 24, "min_delta": 0.002, "after_plateau": True}
        assert recipe["score"] == "best"


def test_cpu_compares_five_seeds_each_at_its_tuned_rate_stopped_by_patience_on_the_best(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = load_study("nlstm")
    cells = grid.artifact_cells(study, CPU, "test")
    assert sorted({c.seed for c in cells}) == [1111, 1112, 1113, 1114, 1115] and len(cells) == 15
    cell = next(c for c in cells if c.model == "nlstm_1x600_d2")
    with pytest.raises(tuning.TuningPending, match="nlstm_1x600_d2__lrx0p5"):
        grid.resolve_cell(study, CPU, cell)
    losses = {0.5: 2.1, 1: 2.0, 2: 1.9, 4: 1.95, 8: 2.3, 16: 2.6, 32: 2.9}
    for variant in grid.tuning_cells_of(study, CPU, cell):
        folder = tmp_path / variant.run_dir
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(grid.resolve_cell(study, CPU, variant)))
        (folder / "metrics.json").write_text(json.dumps(
            {"val_cross_entropy": losses[tuning.parse_variant(variant.model)[1]], "epochs": 6, "best_epoch": 6}))
    recipe = grid.resolve_cell(study, CPU, cell)["recipe"]
    assert recipe["lr"] == pytest.approx(0.002)
    assert recipe["epochs"] == 20 and recipe["score"] == "best"
    assert recipe["early_stopping"] == {"rule": "best", "patience": 24, "min_delta": 0.002, "after_plateau": True}
    # the patience is one pass of checks: 24 checks x 37 batches = 888, a pass of 56,814 observations in 64s
    assert recipe["early_stopping"]["patience"] * recipe["validation_every"] == math.ceil(56_814 / 64)


def test_at_first_is_read_over_the_same_batches_for_every_unit():
    """Runs stopped by patience at 800 and 1600 iterations: "the first quarter" is that of the shortest
    (0..200) for both, so a model is not read over a longer, lower stretch because it trained longer."""
    iterations = {"gru_2x600": np.arange(0, 801, 50), "nlstm_1x600_d2": np.arange(0, 1601, 50)}
    curves = pd.concat([pd.DataFrame({"model": model, "seed": 1, "iteration": x, "val_loss": 8 - x / 100})
                        for model, x in iterations.items()], ignore_index=True)
    table = early_validation_loss(curves).set_index("model")
    assert table["early_val_area"].tolist() == pytest.approx([7.0, 7.0])  # 8 -> 6 over 0..200, both
    assert table["early_iteration"].tolist() == [100, 100]  # an eighth of the shortest run
    marks = early_marks(table.reset_index(), curves, load_study("nlstm")).set_index("model")
    assert marks["end"].tolist() == [200, 200]


def test_smoke_dry_run_plans_the_tuning_cells(tmp_path):
    project = copy_project(tmp_path)
    result = snakemake(project, "-n", "--config", "budget=smoke", "--", "results/smoke/tables/nlstm_tuning.csv",
                       "results/smoke/tables/nlstm_test.csv")
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    planned = set(re.findall(r"results/smoke/runs/nlstm/synth_autocomplete/(\w+)/frac100/seed(\d+)/metrics\.json", out))
    assert {("lstm_2x600__lrx0p5", "1000"), ("lstm_2x600__lrx1", "1000")} <= planned
    assert not any(tuning.parse_variant(model) and model.split("__")[0] != "lstm_2x600" for model, _ in planned)
    assert re.search(r"lr_choice\s+1\b", out) and re.search(r"notebook_nlstm_tuning\s+1\b", out)
