"""Corpora in text8's format made from another Wikipedia text, by the rules of Mahoney's ``wikifil.pl``.

text8 (Mahoney, "About the Test Data", http://mattmahoney.net/dc/textdata.html) is the first 10^8
characters of the English Wikipedia dump of March 2006 after the Perl filter of that page's appendix A,
``wikifil.pl``. It first keeps only the text a browser shows (the article body; XML and XHTML tags,
references, tables, templates and link targets removed, link and caption text kept), then reduces
that text to 27 characters:

1. upper-case A-Z become lower case;
2. each digit becomes its English name between spaces ("0" -> " zero ", ..., "9" -> " nine "), so
   "1990" gives "one nine nine zero";
3. every other character becomes a space (punctuation, line breaks, and letters outside a-z: the
   filter works on UTF-8 bytes, so "é" is a space and "café" gives "caf"), and runs of spaces become one.

The result is one line of words a-z separated by single spaces, beginning with a space. :func:`wikifil`
re-implements rules 1-3 (not the markup rules: the texts cleaned here have no wiki markup).

WikiText-2 (Merity et al. 2017, Pointer Sentinel Mixture Models) is Wikipedia as well (Good and
Featured articles), already without markup, but tokenized and with markers of its own.
:func:`clean_wikitext` decides for each:

- ``<unk>`` (a word outside WikiText-2's 33,278-word vocabulary; 2.6 % of the training tokens) and
  ``<formula>`` (a formula left out, 16 times) are removed, as wikifil removes tags (``<...>``). The word behind ``<unk>`` is lost either way; spelling it "unk" would make up one of the
  corpus's most frequent words.
- ``@-@``, ``@,@``, ``@.@`` mark a hyphen, a thousands comma or a decimal point inside a token ("well
  @-@ known", "1 @,@ 000", "3 @.@ 5"). They need no rule of their own: every character of them is
  outside a-z, so rule 3 makes them spaces, and the result is what wikifil makes of the original
  "well-known", "1,000" and "3.5": "well known", "one zero zero zero", "three five".
- Headings (`` = Title = ``, `` = = Section = = ``) keep their words and lose the ``=``, as wikifil
  does with ``== Section ==``: it removes markup, not the text of headings.
- WikiText's tokenizer split contractions and possessives: "do n't" gives "do n t" where wikifil gives
  "don t" for "don't" ("John 's" and "John's" both give "john s"). This is left as it is: the split
  cannot be undone exactly.

Splits: text8 has none of its own (the studies cut it 90M/5M/5M characters in order). A corpus made
here keeps its source's: WikiText-2's train, valid and test files are cleaned one by one into
train.txt, valid.txt and test.txt, each a text8-style line (a leading space, single spaces, no
newline), so the three joined are one text8-style text. They are written as ``prepare`` writes a
character-level dataset (vocab.txt in first-occurrence order, stats.json), so every reader of a
processed dataset reads them, and an autocomplete dataset can be derived from one
(:mod:`.autocomplete`).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path

from .preprocess import char_level, read_splits, write_processed
from .registry import SPLITS, DataError, ExpectedCounts, SplitMembers, get_dataset
from .transfer import file_digest

_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# Rules 1 and 2 as one translation table: A-Z to a-z, 0-9 to their names between spaces.
_LOWER_AND_SPELL = str.maketrans({**dict(zip(string.ascii_uppercase, string.ascii_lowercase)),
                                  **{str(d): f" {name} " for d, name in enumerate(_DIGITS)}})
_NOT_A_TO_Z = re.compile(r"[^a-z]+")
_WIKITEXT_PLACEHOLDER = re.compile(r"<[a-z]+>")  # <unk>, <formula>


@dataclass(frozen=True)
class Text8StyleSpec:
    """A text8-style corpus made from the splits of a word-level registry dataset."""

    source: str  # registry dataset whose raw file holds the text, one archive member per split
    description: str
    # characters per split and vocabulary (27: space and a-z) measured from the source's published
    # files; a prepared corpus that differs was cleaned by other rules
    expected: ExpectedCounts | None


TEXT8STYLE_DATASETS: dict[str, Text8StyleSpec] = {
    "wt2_text8style": Text8StyleSpec(
        source="wt2",
        description="WikiText-2 cleaned by wikifil.pl's rules into text8's format (a-z and single spaces); "
                    "WikiText-2's own train/valid/test files",
        expected=ExpectedCounts(tokens=(10_263_144, 1_034_925, 1_143_576), vocab_size=27),
    ),
}


def get_spec(dataset_id: str) -> Text8StyleSpec:
    try:
        return TEXT8STYLE_DATASETS[dataset_id]
    except KeyError:
        raise DataError(f"unknown text8-style dataset {dataset_id!r}; known: {', '.join(TEXT8STYLE_DATASETS)}") from None


def wikifil(text: str) -> str:
    """``text`` reduced to text8's 27 characters by wikifil.pl's rules 1-3: " word word ... word"."""
    words = _NOT_A_TO_Z.sub(" ", text.translate(_LOWER_AND_SPELL)).split()
    return "".join(" " + word for word in words)


def clean_wikitext(text: str) -> str:
    """WikiText tokens as text8-style text: placeholders (<unk>, <formula>) removed, then :func:`wikifil`."""
    return wikifil(_WIKITEXT_PLACEHOLDER.sub(" ", text))


def build(dataset_id: str, raw_file: Path | str, out_dir: Path | str) -> dict:
    """Write the text8-style dataset ``dataset_id`` from its source's checked raw file; returns the stats."""
    spec = get_spec(dataset_id)
    source = get_dataset(spec.source)
    if not isinstance(source.splits, SplitMembers):
        raise DataError(f"{dataset_id}: its source {source.id!r} has no split files of its own to clean")
    raw_file, out_dir = Path(raw_file), Path(out_dir)
    texts, _ = read_splits(source, raw_file, out_dir)
    cleaned = {split: clean_wikitext(texts[split]) for split in SPLITS}
    files, vocab, counts = char_level(cleaned)
    stats = {
        "dataset": dataset_id,
        "tokenizer": "char",
        "source": source.id,
        "raw_file": raw_file.name,
        "raw_sha256": file_digest(raw_file),
        "vocab_size": len(vocab),
        **counts,
        "words": {split: cleaned[split].count(" ") for split in SPLITS},
        "distinct_words": len(set(" ".join(cleaned.values()).split())),
        "placeholders_removed": {split: len(_WIKITEXT_PLACEHOLDER.findall(texts[split])) for split in SPLITS},
    }
    expected = spec.expected
    got = (tuple(stats["tokens"][split] for split in SPLITS), stats["vocab_size"])
    if expected is not None and got != (expected.tokens, expected.vocab_size):
        raise DataError(
            f"{dataset_id}: cleaning {raw_file} gives characters (train, valid, test) {got[0]} and vocabulary "
            f"{got[1]}, not the {expected.tokens} and {expected.vocab_size} recorded for it in "
            "src/rnnrepro/data/text8style.py; the cleaning rules changed: if that was meant, record the new "
            "counts there and in docs/data.md"
        )
    write_processed(out_dir, files, vocab, stats)
    return stats
