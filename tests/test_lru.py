"""The LRU study: character-level splits, sizing to a parameter budget, the grid and its budgets, the
convergence metric and early stopping, and a dry run of the paper grid (the smoke run's artifacts:
tests/test_smoke_run.py)."""

import io
import json
import math
import re
import tarfile

import pandas as pd
import pytest
import yaml
from conftest import copy_project, snakemake

from rnnrepro import grid, sizing
from rnnrepro.analysis import lru
from rnnrepro.analysis.results import in_order
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_study
from rnnrepro.data import fraction, prepare
from rnnrepro.data.corpus import load_corpus
from rnnrepro.data.download import file_digest, record_path
from rnnrepro.data.preprocess import read_text, read_vocab
from rnnrepro.data.registry import get_dataset
from rnnrepro.models.language_model import Dropouts, LanguageModel
from rnnrepro.train.stopping import has_stalled

PTB_MEMBERS = [f"simple-examples/data/ptb.{split}.txt" for split in ("train", "valid", "test")]


@pytest.fixture(scope="module")
def study():
    return load_study("lru")


def run_config(budget: str) -> dict:
    config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    return {**config, "budget": budget}


def every_cell(study: dict, config: dict) -> set:
    return {cell for artifact in study["artifacts"] for cell in grid.artifact_cells(study, config, artifact)}


# --- character-level data --------------------------------------------------------------------------

@pytest.fixture
def ptb_char_fixture(tmp_path):
    """A simple-examples.tgz whose word-level members are short PTB-like texts."""
    texts = {
        "train": " the <unk> said N shares rose \n mr. smith 's bid \n" * 60,
        "valid": " stocks fell $ N \n" * 5,
        "test": " a b&c co. \n" * 5,
    }
    path = tmp_path / "simple-examples.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for member, text in zip(PTB_MEMBERS, texts.values()):
            data = text.encode()
            info = tarfile.TarInfo("./" + member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    # As if fetch had accepted it: prepare compares a raw file with the digest fetch recorded (the
    # registry's published digests are those of the real PTB files, which this fixture is not).
    record_path(path).write_text(json.dumps({"file": path.name, "sha256": file_digest(path)}))
    return path, "".join(texts.values())


def test_ptb_char_is_the_joined_word_files_split_90_5_5(ptb_char_fixture, tmp_path):
    raw, joined = ptb_char_fixture
    stats = prepare("ptb_char", raw, tmp_path / "p")
    splits = [read_text(tmp_path / "p" / f"{s}.txt") for s in ("train", "valid", "test")]
    assert "".join(splits) == joined  # every character, spaces and newlines included, in order
    assert [len(s) for s in splits[:2]] == [len(joined) * 90 // 100, len(joined) * 5 // 100]
    vocab = read_vocab(tmp_path / "p" / "vocab.txt")
    assert sorted(vocab) == sorted(set(joined)) and stats["vocab_size"] == len(vocab)
    assert {"\n", " ", "<", "$", "&"} <= set(vocab) and "<eos>" not in vocab
    corpus = load_corpus(tmp_path / "p")
    assert "".join(corpus.vocab[i] for i in corpus.test) == splits[2]
    # the registry checks the three members against their published digests (no archive digest exists)
    assert get_dataset("ptb_char").verified and [m for m, _ in get_dataset("ptb_char").member_sha256] == PTB_MEMBERS


def test_warpeace_and_the_smoke_corpus_split_90_5_5(tmp_path):
    raw = tmp_path / "warpeace_input.txt"
    raw.write_bytes(("\ufeff" + "Well, Prince,\rso Genoa and Lucca.\r" * 50).encode())
    record_path(raw).write_text(json.dumps({"file": raw.name, "sha256": file_digest(raw)}))  # as fetch would
    prepare("warpeace", raw, tmp_path / "wp")
    text = "Well, Prince,\nso Genoa and Lucca.\n" * 50
    assert read_text(tmp_path / "wp" / "train.txt") == text[: len(text) * 90 // 100]
    for dataset in ("warpeace", "text8", "enwik8", "synth_char_small"):
        splits = get_dataset(dataset).splits
        assert (splits.train, splits.valid, splits.test) == (90, 5, 5), dataset


def test_char_fractions_nest(ptb_char_fixture, tmp_path):
    raw, _ = ptb_char_fixture
    prepare("ptb_char", raw, tmp_path / "p")
    train = read_text(tmp_path / "p" / "train.txt")
    previous = ""
    for percent in (20, 40, 60, 80, 100):
        out = tmp_path / "p" / f"train.fraction{percent}.txt"
        kept = fraction(tmp_path / "p" / "train.txt", percent, out, tokenizer="char")
        text = read_text(out)
        assert text.startswith(previous) and kept["tokens"] == len(text) == math.ceil(len(train) * percent / 100)
        assert load_corpus(tmp_path / "p", out).train.numel() == len(text)  # the loader reads the prefix
        previous = text
    assert previous == train


# --- sizing to a parameter budget -------------------------------------------------------------------

@pytest.mark.parametrize("cell, layers, options", [
    ("lstm", 2, {}), ("gru", 2, {}), ("gru_single_bias", 2, {}), ("ps_lru", 2, {}), ("rg_lru", 2, {}),
    ("lru", 2, {}), ("rhn", 2, {"recurrence_depth": 2, "transform_bias": 0.0}), ("grid_lstm", 1, {"depth": 2}),
])
def test_closed_form_counts_match_the_built_model(cell, layers, options):
    dropouts = Dropouts("elementwise", 0, 0, 0, 0, 0)
    for vocab, hidden, embedding, tied in [(27, 24, 24, False), (50, 20, 20, False), (11, 16, 16, True)]:
        model = LanguageModel(vocab, cell, embedding, hidden, layers, tied, options, dropouts)
        built = sum(p.numel() for p in model.parameters())
        assert sizing.language_model_params(cell, vocab, embedding, hidden, layers, tied, options) == built


def test_every_paper_cell_is_within_one_percent_of_its_budget(study):
    config = run_config("paper")
    cells = every_cell(study, config)
    assert len(cells) == 154
    for cell in cells:
        arch = grid.resolve_cell(study, config, cell)["architecture"]
        vocab = study["vocab_sizes"][grid.trained_corpus(study, config, cell)]

        def count(hidden):
            return sizing.language_model_params(arch["cell"], vocab, hidden, hidden, arch["layers"],
                                                arch["tie_weights"], arch["cell_options"])

        budget = study["models"][cell.model]["param_budget"]
        assert arch["param_budget"] == budget and arch["embedding_size"] == arch["hidden_size"]
        assert abs(count(arch["hidden_size"]) - budget) <= 0.01 * budget, cell
        # closest: one unit wider or narrower is no nearer
        for other in (arch["hidden_size"] - 1, arch["hidden_size"] + 1):
            assert abs(count(other) - budget) >= abs(count(arch["hidden_size"]) - budget)


def test_cell_without_formula_is_sized_by_counting():
    """No closed form for the Nested LSTM: its layers are counted (meta device), as any outside cell's."""
    from rnnrepro.cells import cell_class

    hidden, count = sizing.hidden_size_for_budget(10_000, "nested_lstm", 27, 2, False, {"depth": 2})
    layers = sum(cell_class("nested_lstm").parameter_count(hidden, hidden, depth=2) for _ in range(2))
    assert count == 27 * hidden + layers + hidden * 27 + 27 and abs(count - 10_000) <= 0.05 * 10_000


# --- the grid: run folders, budget subsets, seeds ---------------------------------------------------

def test_one_stand_in_for_several_datasets_keeps_runs_apart(study):
    config = run_config("smoke")
    keys = {d: grid.data_key(study, config, d) for d in ("ptb_char", "warpeace", "enwik8", "text8")}
    assert keys["ptb_char"] == "synth_char_small-ptb_char" and len(set(keys.values())) == 4
    for dataset, key in keys.items():
        assert grid.dataset_for(study, config, key) == dataset
    cells = every_cell(study, config)
    assert len({c.run_dir for c in cells}) == len(cells) == 7 + 2 * 2  # stat. efficiency: GRU, LRU x 20, 100 %
    for cell in cells:
        resolved = grid.resolve_cell(study, config, cell)
        assert resolved["corpus"] == "synth_char_small" and resolved["data"]["dir"] == "data/processed/synth_char_small"
        assert cell.run_dir.startswith(f"results/smoke/runs/lru/synth_char_small-{resolved['dataset']}/")
    paper = run_config("paper")
    assert {c.corpus for c in every_cell(study, paper)} == {"ptb_char", "warpeace", "enwik8", "text8"}
    # a budget that substitutes one dataset only keeps the plain corpus name (the PRU smoke folders)
    pru = load_study("pru")
    assert grid.data_key(pru, config, "ptb") == "synth_ptb"


def test_budget_subsets_and_artifact_seeds(study, tmp_path):
    # an artifact's own seeds (the cpu budget's five for accuracy) before the run config's (one)
    cpu = run_config("cpu")
    accuracy = grid.artifact_cells(study, cpu, "accuracy")
    assert {c.seed for c in accuracy} == {1111, 1112, 1113, 1114, 1115} and len(accuracy) == 7 * 5
    efficiency = grid.artifact_cells(study, cpu, "stat_efficiency")
    assert {c.seed for c in efficiency} == set(cpu["seeds"]) == {1111} and {c.fraction for c in efficiency} == {2, 10}
    config = run_config("smoke")
    assert {c.fraction for c in grid.artifact_cells(study, config, "stat_efficiency")} == {20, 100}
    # a budget may train on other shares of the data, but only on the artifact's models
    changed = yaml.safe_load((REPO_ROOT / "config/studies/lru.yaml").read_text())
    changed["budgets"]["smoke"]["artifacts"]["stat_efficiency"]["fractions"] = [20, 50]
    (tmp_path / "config" / "studies").mkdir(parents=True)
    (tmp_path / "config" / "studies" / "lru.yaml").write_text(yaml.safe_dump(changed))
    load_study("lru", root=tmp_path)
    changed["budgets"]["smoke"]["artifacts"]["stat_efficiency"]["models"] = ["gru_10m", "lstm_24m"]
    (tmp_path / "config" / "studies" / "lru.yaml").write_text(yaml.safe_dump(changed))
    with pytest.raises(ConfigError, match=r"stat_efficiency.models: \['lstm_24m'\] not in"):
        load_study("lru", root=tmp_path)


# --- convergence metric and early stopping ----------------------------------------------------------

def test_epochs_to_best_on_a_hand_written_history():
    history = pd.DataFrame({"epoch": [1, 2, 3, 4, 5, 6], "val_loss": [2.0, 1.5, 1.2, 1.3, 1.2, 1.25]})
    assert lru.epochs_to_best(history) == 3  # the first epoch reaching the lowest loss
    histories = pd.concat([
        history.assign(dataset="ptb_char", model="lru_24m", cell="lru", fraction=100, seed=1),
        pd.DataFrame({"epoch": [1, 2], "val_loss": [1.0, 0.9]}).assign(
            dataset="text8", model="lru_24m", cell="lru", fraction=100, seed=1),
    ])
    runs = lru.convergence_runs(histories)
    assert runs["epochs_to_best"].tolist() == [3, 2] and runs["epochs"].tolist() == [6, 2]
    table = lru.convergence_table(runs, load_study("lru")).set_index("dataset")
    assert table.loc["all", "median_epochs"] == 2.5 and table.loc["all", "runs"] == 2
    assert table.loc["all", "paper_median_epochs"] == 8 and math.isnan(table.loc["text8", "paper_median_epochs"])
    with pytest.raises(ValueError, match="no epochs"):
        lru.epochs_to_best(history.iloc[:0])


def test_table_rows_in_the_listed_orders_then_by_value():
    """The LRU tables' order: the pooled row, then the artifact's datasets; the paper's units, a cell of
    your own after them; then the fraction (the PRU tables use the same function with their models)."""
    table = pd.DataFrame({"dataset": ["text8", "ptb_char", "all", "ptb_char", "ptb_char"],
                          "cell": ["lstm", "my_cell", "lru", "lstm", "lstm"], "fraction": [100, 100, 100, 40, 20]})
    ordered = in_order(table, {"dataset": ["all", "ptb_char", "text8"], "cell": ["lru", "lstm"]}, then=["fraction"])
    assert ordered.values.tolist() == [["all", "lru", 100], ["ptb_char", "lstm", 20], ["ptb_char", "lstm", 40],
                                       ["ptb_char", "my_cell", 100], ["text8", "lstm", 100]]


@pytest.mark.parametrize("losses, stalled", [
    ([3.0, 2.0, 1.99995, 1.9999, 1.99989], True),   # three epochs in a row less than 1e-4 better
    ([3.0, 2.0, 2.1, 2.2, 1.0], False),             # the last epoch improved
    ([3.0, 2.1, 2.2, 2.3, 2.4], True),
    ([3.0, 3.1, 3.2], False),                       # not yet 3 comparisons
])
def test_early_stopping_follows_the_authors_rule(losses, stalled):
    history = [{"val_loss": v} for v in losses]
    assert has_stalled({"patience": 3, "min_delta": 1e-4}, history) is stalled
    assert has_stalled(None, history) is False


# --- the workflow ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_dry_run_of_the_paper_grid_lists_every_cell(tmp_path, study):
    project = copy_project(tmp_path)
    result = snakemake(project, "-n", "--config", "budget=paper", "studies=[lru]", "--", "all")
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    planned = set(re.findall(r"results/runs/lru/(\w+)/(\w+)/frac(\d+)/seed(\d+)/metrics\.json", out))
    expected = {(c.corpus, c.model, str(c.fraction), str(c.seed)) for c in every_cell(study, run_config("paper"))}
    assert planned == expected and len(planned) == 154
    assert re.search(r"train_cell\s+154\b", out)
    for raw in ("ptb_char/simple-examples.tgz", "warpeace/warpeace_input.txt", "enwik8/enwik8.zip", "text8/text8.zip"):
        assert f"data/raw/{raw}" in out
