"""Study `nlstm` (text8 autocomplete): the dataset construction on a fixture text, the published
parameter counts, the autocomplete trainer (outputs, resume after a kill, NaN), and the workflow
(paper-budget dry run, end-to-end smoke run of the study's artifacts)."""

import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import copy_project, finished, numbers, snakemake, train_cli

from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.data import DataError, fetch, prepare
from rnnrepro.data.autocomplete import (AUTOCOMPLETE_DATASETS, PAD_ID, UNK_ID, AutocompleteSpec, build,
                                        load_classes, load_split)
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
# The trainer on the synthetic stand-in


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("autocomplete")
    prepare("synth_char", fetch("synth_char", root / "raw"), root / "synth_char")
    build("synth_autocomplete", root / "synth_char", root / "synth_autocomplete")
    return root / "synth_autocomplete"


def smoke_cell(data_dir: Path, model: str = "gru_2x600", **recipe) -> dict:
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    run_config.update(budget="smoke", device="cpu", threads=1)
    cfg = grid.resolve_cell(load_study("nlstm"), run_config,
                            grid.Cell("nlstm", "synth_autocomplete", model, 100, 5, "smoke"))
    cfg["data"] = {"dir": str(data_dir), "train_file": str(data_dir / "train.txt")}
    cfg["architecture"].update(embedding_size=16, hidden_size=16)
    cfg["recipe"].update(epochs=2, validation_every=5, **recipe)
    return cfg


def history_without_timing(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "history.csv").drop(columns=["seconds", "sequences_per_s"])


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, synthetic_dir):
    run_dir = tmp_path_factory.mktemp("runs") / "reference"
    cfg = smoke_cell(synthetic_dir)
    code, err = finished(train_cli(run_dir, cfg))
    assert code == 0, err
    return run_dir, cfg


def test_trainer_outputs(reference_run):
    run_dir, cfg = reference_run
    assert json.loads((run_dir / "config.json").read_text()) == cfg
    metrics = json.loads((run_dir / "metrics.json").read_text())
    train_observations = 865
    batches = math.ceil(train_observations / cfg["recipe"]["batch_size"])
    assert metrics["iterations"] == 2 * batches and metrics["train_sequences"] == 2 * train_observations
    assert metrics["classes"] == 130
    assert metrics["params"] == metrics["params_embedding"] + metrics["params_recurrent"] + metrics["params_dense"]
    assert 0 < metrics["test_accuracy"] < 1 and math.isfinite(metrics["test_cross_entropy"])
    assert metrics["test_cross_entropy"] < math.log(130)  # it learned something in two passes
    history = pd.read_csv(run_dir / "history.csv")
    # a check before training, every 5 batches, and at the last batch
    assert history["iteration"].tolist() == [*range(0, 2 * batches, 5), 2 * batches]
    assert history["val_loss"].iloc[-1] < history["val_loss"].iloc[0]
    saved = torch.load(run_dir / "model.pt", weights_only=False)
    assert saved["config"] == cfg


def test_killed_run_resumes_to_the_same_result(reference_run, tmp_path):
    _, cfg = reference_run
    run_dir = tmp_path / "killed"
    proc = train_cli(run_dir, cfg)
    deadline = time.time() + 300
    while "iteration 10/" not in proc.stderr.readline():  # printed after that check's checkpoint
        assert proc.poll() is None, "training ended before it could be killed"
        assert time.time() < deadline
    proc.kill()
    proc.wait()
    assert not (run_dir / "metrics.json").exists()
    code, err = finished(train_cli(run_dir, cfg))
    assert code == 0, err
    assert "resuming from" in err
    assert numbers(run_dir / "metrics.json") == numbers(reference_run[0] / "metrics.json")
    pd.testing.assert_frame_equal(history_without_timing(run_dir), history_without_timing(reference_run[0]))


def test_nan_loss_stops_with_a_clear_error(synthetic_dir, tmp_path):
    code, err = finished(train_cli(tmp_path / "nan", smoke_cell(synthetic_dir, lr=1e36)))
    assert code == 1
    assert re.search(r"the (training|validation) loss is (nan|inf)", err), err
    assert "Lower `lr`" in err
    assert not (tmp_path / "nan" / "metrics.json").exists()


# --------------------------------------------------------------------------------------------------
# The workflow


def test_paper_dry_run_lists_the_three_cells(tmp_path):
    project = copy_project(tmp_path)
    result = snakemake(project, "-n", "--config", "budget=paper", "--", "results/paper/tables/nlstm_test.csv",
                       "results/paper/tables/nlstm_models.csv")
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    planned = set(re.findall(r"results/paper/runs/nlstm/(\w+)/(\w+)/frac100/seed1111/metrics\.json", out))
    assert planned == {("text8_autocomplete", model) for model in MODELS}
    assert re.search(r"train_cell\s+3\b", out)
    assert "data/raw/text8/text8.zip" in out and "data/processed/text8_autocomplete/train.txt" in out


@pytest.mark.slow
def test_smoke_run_produces_the_nlstm_artifacts(smoke_project):
    project = smoke_project
    models = pd.read_csv(project / "results/tables/nlstm_models.csv")
    assert models["model"].tolist() == MODELS and models["equal_to_paper"].all()
    test = pd.read_csv(project / "results/tables/nlstm_test.csv")
    assert test["model"].tolist() == MODELS and (test["corpus"] == "synth_autocomplete").all()
    for column in ("test_cross_entropy", "test_accuracy_pct", "paper_test_cross_entropy", "paper_test_accuracy_pct"):
        assert test[column].map(math.isfinite).all(), column
    for row in test.itertuples():
        metrics = json.loads((project / f"results/runs/nlstm/synth_autocomplete/{row.model}/frac100/"
                              f"seed{row.seed}/metrics.json").read_text())
        assert metrics["test_cross_entropy"] == pytest.approx(row.test_cross_entropy)
    for figure in ("nlstm_convergence", "nlstm_examples"):
        assert (project / f"results/figures/{figure}.png").stat().st_size > 10_000
