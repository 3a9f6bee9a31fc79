"""The text8-style corpus: wikifil.pl's cleaning rules, and the corpus made from WikiText-2's file layout.

Offline: the WikiText-2 layout is a tiny fixture served from a mirror folder; the real mirror is used
only where it exists.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest
from conftest import copy_project, snakemake

from rnnrepro.data import registry
from rnnrepro.data.__main__ import main as cli
from rnnrepro.data.autocomplete import AUTOCOMPLETE_DATASETS
from rnnrepro.data.autocomplete import build as build_autocomplete
from rnnrepro.data.corpus import load_corpus
from rnnrepro.data.download import MIRROR_ENV, fetch
from rnnrepro.data.preprocess import read_text, read_vocab
from rnnrepro.data.registry import DataError, ExpectedCounts
from rnnrepro.data.text8style import TEXT8STYLE_DATASETS, Text8StyleSpec, build, clean_wikitext, wikifil

TEXT8_FORMAT = re.compile(r"( [a-z]+)*")  # a leading space, words a-z, single spaces, nothing else

# WikiText-2's tokens: headings, <unk>, the @-@ @,@ @.@ markers, split contractions, digits, punctuation,
# upper case, letters outside a-z; each line written out by hand as wikifil.pl's rules give it.
PARAGRAPH = {
    " = Homarus Gammarus = \n": " homarus gammarus",
    " \n": "",
    " The <unk> is well @-@ known ; it weighs 1 @,@ 000 g and 3 @.@ 5 kg ( 60 cm ) . \n":
        " the is well known it weighs one zero zero zero g and three five kg six zero cm",
    " = = Café Olé = = \n": " caf ol",
    " In 1990 , Senjō no Valkyria 's <formula> hit # 2 — \" Don 't \" do n't stop ! \n":
        " in one nine nine zero senj no valkyria s hit two don t do n t stop",
    " İstanbul 's area is 5 @,@ 343 km² ( 2 @.@ 1 % ) \n": " stanbul s area is five three four three km two one",
}


def test_wikifil_rules():
    # rule 1: A-Z only (İ, whose UTF-8 bytes are not A-Z, is a space); rule 2: ASCII digits only (² is not
    # a digit byte); rule 3: everything else a space, runs squeezed, one line with a leading space
    assert wikifil("Anarchism originated in 1850s!\n\nThe İ and x² TAB\there") == (
        " anarchism originated in one eight five zero s the and x tab here")
    assert wikifil("") == "" and wikifil(" ,;\n ") == ""


def test_cleaning_a_wikitext_paragraph():
    for line, expected in PARAGRAPH.items():
        assert clean_wikitext(line) == expected, line
    text = clean_wikitext("".join(PARAGRAPH))
    assert text == "".join(PARAGRAPH.values()) and TEXT8_FORMAT.fullmatch(text)
    assert "unk" not in text.split() and "formula" not in text.split()  # placeholders are dropped, not spelled


WT2_SPLITS = {  # a tiny fixture of WikiText-2's files: name in wikitext-2-v1.zip -> text
    "wikitext-2/wiki.train.tokens": " \n = Valkyria Chronicles III = \n \n Senjō no Valkyria 3 : <unk> Chronicles "
                                    "( Japanese : 戦場のヴァルキュリア3 ) is a tactical role @-@ playing game . \n",
    "wikitext-2/wiki.valid.tokens": " \n = Homarus gammarus = \n \n It may grow to 60 cm ( 24 in ) . \n",
    "wikitext-2/wiki.test.tokens": " \n = Robert <unk> = \n \n He won 1 @,@ 500 votes , 3 @.@ 5 % . \n",
}


@pytest.fixture
def toy_wt2(monkeypatch, tmp_path):
    """A dataset laid out as wt2 (wikitext-2-v1.zip and its members), its member files on a mirror as the
    project's mirror holds WikiText-2, and a text8-style corpus registered on it."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    digests = tuple((m, hashlib.sha256(t.encode()).hexdigest()) for m, t in WT2_SPLITS.items())
    source = dataclasses.replace(registry.get_dataset("wt2"), id="toy_wt2", urls=(), sha256=None, md5=None,
                                 size_bytes=None, member_sha256=digests, member_note="fixture", expected=None)
    monkeypatch.setitem(registry.DATASETS, source.id, source)
    monkeypatch.setitem(TEXT8STYLE_DATASETS, "toy_wt2_text8style",
                        Text8StyleSpec(source="toy_wt2", description="fixture", expected=None))
    mirror = tmp_path / "mirror" / "toy_wt2"
    mirror.mkdir(parents=True)
    for member, text in WT2_SPLITS.items():
        (mirror / f"{Path(member).name}.gz").write_bytes(gzip.compress(text.encode()))
    return fetch("toy_wt2", tmp_path / "raw" / "toy_wt2", mirror=str(mirror.parent))


def test_corpus_from_the_wt2_file_layout(toy_wt2, tmp_path, monkeypatch):
    out = tmp_path / "processed" / "toy_wt2_text8style"
    assert cli(["text8style", "toy_wt2_text8style", "--raw", str(toy_wt2), "--out", str(out)]) == 0
    # each of WikiText-2's own split files cleaned on its own, into one text8-style line
    for split, member in zip(registry.SPLITS, WT2_SPLITS):
        assert read_text(out / f"{split}.txt") == clean_wikitext(WT2_SPLITS[member])
    assert read_text(out / "valid.txt") == " homarus gammarus it may grow to six zero cm two four in"
    assert read_text(out / "test.txt") == " robert he won one five zero zero votes three five"
    stats = json.loads(read_text(out / "stats.json"))
    assert stats["tokenizer"] == "char" and stats["source"] == "toy_wt2"
    assert stats["tokens"] == {split: len(read_text(out / f"{split}.txt")) for split in registry.SPLITS}
    assert stats["placeholders_removed"] == {"train": 1, "valid": 0, "test": 1}
    vocab = read_vocab(out / "vocab.txt")
    assert set(vocab) <= set(" abcdefghijklmnopqrstuvwxyz") and len(vocab) == stats["vocab_size"]
    corpus = load_corpus(out)  # read as any character-level dataset
    assert "".join(corpus.vocab[i] for i in corpus.valid) == read_text(out / "valid.txt")

    # the autocomplete dataset derived from it, as text8_autocomplete from text8
    monkeypatch.setitem(AUTOCOMPLETE_DATASETS, "toy_autocomplete", dataclasses.replace(
        AUTOCOMPLETE_DATASETS["wt2_text8style_autocomplete"], source="toy_wt2_text8style", max_chars=20,
        vocabulary_words=8))
    built = build_autocomplete("toy_autocomplete", out, tmp_path / "processed" / "toy_autocomplete")
    words = "".join(read_text(out / f"{split}.txt") for split in registry.SPLITS).split()
    assert sum(built["observations"].values()) > 1 and built["vocabulary_cut"]["distinct_words"] == len(set(words))


def test_counts_other_than_recorded_are_refused(toy_wt2, tmp_path, monkeypatch):
    monkeypatch.setitem(TEXT8STYLE_DATASETS, "toy_wt2_text8style", Text8StyleSpec(
        source="toy_wt2", description="fixture", expected=ExpectedCounts(tokens=(1, 2, 3), vocab_size=27)))
    with pytest.raises(DataError, match=r"the cleaning rules changed"):
        build("toy_wt2_text8style", toy_wt2, tmp_path / "p")
    assert not (tmp_path / "p" / "train.txt").exists()


def test_derived_ids_are_registered():
    spec = TEXT8STYLE_DATASETS["wt2_text8style"]
    assert isinstance(registry.get_dataset(spec.source).splits, registry.SplitMembers)
    assert AUTOCOMPLETE_DATASETS["wt2_text8style_autocomplete"].source == "wt2_text8style"
    assert AUTOCOMPLETE_DATASETS["wt2_text8style_autocomplete"].classes == AUTOCOMPLETE_DATASETS[
        "text8_autocomplete"].classes  # the published output layer
    for name in ("wt2_text8style", "wt2_text8style_autocomplete"):
        assert name not in registry.DATASETS  # derived, not fetched


def test_the_workflow_makes_it_from_wt2s_raw_file(tmp_path):
    project = copy_project(tmp_path)
    plan = snakemake(project, "-n", "data/processed/wt2_text8style_autocomplete/stats.json")
    assert plan.returncode == 0, plan.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", plan.stdout, re.M))
    assert jobs == {"fetch_dataset": "1", "prepare_text8style": "1", "prepare_autocomplete": "1", "total": "3"}
    assert "data/raw/wt2/wikitext-2-v1.zip" in plan.stdout


REAL_MIRROR = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.skipif(not (REAL_MIRROR / "wt2").is_dir(), reason=f"no real data mirror at {REAL_MIRROR}")
def test_the_real_corpus_has_the_recorded_counts(tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    raw = fetch("wt2", tmp_path / "raw" / "wt2", mirror=str(REAL_MIRROR))
    stats = build("wt2_text8style", raw, tmp_path / "p")  # refused unless the counts are the recorded ones
    assert stats["vocab_size"] == 27 and TEXT8_FORMAT.fullmatch(read_text(tmp_path / "p" / "test.txt"))
