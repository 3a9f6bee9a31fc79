"""Small seeded corpora with real structure, for smoke runs and tests (no download).

The text comes from a little stochastic grammar over pseudo-words:

    sentence  := clause [conj clause] "."
    clause    := NP(n) ["(" NP(m) ")"] VP(n)          n, m in {singular, plural}, m != n
    NP(n)     := det(n) adj{0,2} noun(n) [prep NP(any)]   (PP nesting at most 2 deep)
    VP(n)     := verb(n) [NP(any)] [adv]

Nouns and verbs have a singular and a plural form ("dogo"/"dogos", "runa"/"runas" as in English's
-s), determiners agree too, and the verb must agree with the subject across a prepositional phrase
and a bracketed distractor of the other number: a dependency a model has to carry several tokens,
which a bigram model cannot. Words inside each class follow a Zipf law. The WikiText-like variant
(``articles``) adds headings and blank lines, multi-sentence paragraph lines, and per-article topic
nouns (a document-level dependency). At word level a few open-class words are replaced by <unk>,
as in PTB.

Only ``random.Random.random`` is used, whose stream Python keeps stable, so a seed gives the same
bytes on every Python version.
"""

from __future__ import annotations

import random
from bisect import bisect
from itertools import accumulate

from .archive import pack
from .registry import SPLITS, UNK, Dataset, SplitMembers, SyntheticSpec

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_DETERMINERS = {"sg": ("a", "this", "every"), "pl": ("these", "many", "some")}
_PREPOSITIONS = ("of", "in", "on", "near", "with", "under", "from", "behind")
_CONJUNCTIONS = ("and", "but", "while")
_FUNCTION_WORDS = {"the", ".", "(", ")", "=", UNK, *_PREPOSITIONS, *_CONJUNCTIONS,
                   *_DETERMINERS["sg"], *_DETERMINERS["pl"]}
_ZIPF_EXPONENT = 1.0
_UNK_RATE = 0.03  # share of open-class words replaced by <unk> (word level only)


class _Zipf:
    """Draws an index in [0, n) with probability proportional to 1 / (rank + 1)^s."""

    def __init__(self, rng: random.Random, n: int):
        self.rng = rng
        self.cumulative = list(accumulate(1.0 / (rank + 1) ** _ZIPF_EXPONENT for rank in range(n)))

    def __call__(self) -> int:
        return bisect(self.cumulative, self.rng.random() * self.cumulative[-1])


class _Grammar:
    def __init__(self, rng: random.Random, vocab_size: int, word_level: bool):
        self.rng = rng
        self.word_level = word_level
        # Forms in the vocabulary: 2 per noun and verb lemma, 1 per adjective and adverb.
        open_words = max(vocab_size - len(_FUNCTION_WORDS), 20)
        n_nouns, n_verbs, n_adjectives = (round(open_words * share) for share in (0.2, 0.15, 0.2))
        n_adverbs = max(open_words - 2 * n_nouns - 2 * n_verbs - n_adjectives, 2)
        taken = set(_FUNCTION_WORDS)
        self.nouns = self._stems(n_nouns, taken)
        self.verbs = self._stems(n_verbs, taken)
        self.adjectives = self._stems(n_adjectives, taken)
        self.adverbs = [stem + "ly" for stem in self._stems(n_adverbs, taken)]
        self.draw = {name: _Zipf(rng, len(words)) for name, words in
                     (("noun", self.nouns), ("verb", self.verbs),
                      ("adjective", self.adjectives), ("adverb", self.adverbs))}
        self.topic: list[int] = []

    def _stems(self, count: int, taken: set[str]) -> list[str]:
        stems: list[str] = []
        while len(stems) < count:
            syllables = 1 + (self.rng.random() < 0.8) + (self.rng.random() < 0.3)
            stem = "".join(self._pick(_CONSONANTS) + self._pick(_VOWELS) for _ in range(syllables))
            forms = {stem, stem + "s", stem + "ly"}
            if forms & taken:
                continue
            taken |= forms
            stems.append(stem)
        return stems

    def _pick(self, options):
        return options[int(self.rng.random() * len(options))]

    def _chance(self, p: float) -> bool:
        return self.rng.random() < p

    def _open_word(self, word: str) -> str:
        return UNK if self.word_level and self._chance(_UNK_RATE) else word

    def _number(self) -> str:
        return "sg" if self._chance(0.5) else "pl"

    def noun(self, number: str) -> str:
        if self.topic and self._chance(0.35):
            lemma = self.nouns[self._pick(self.topic)]
        else:
            lemma = self.nouns[self.draw["noun"]()]
        return self._open_word(lemma if number == "sg" else lemma + "s")

    def noun_phrase(self, number: str, depth: int) -> list[str]:
        words = ["the" if self._chance(0.5) else self._pick(_DETERMINERS[number])]
        for _ in range(2):
            if self._chance(0.3):
                words.append(self._open_word(self.adjectives[self.draw["adjective"]()]))
        words.append(self.noun(number))
        if depth < 2 and self._chance(0.3):
            words += [self._pick(_PREPOSITIONS), *self.noun_phrase(self._number(), depth + 1)]
        return words

    def clause(self) -> list[str]:
        number = self._number()
        words = self.noun_phrase(number, depth=0)
        if self._chance(0.15):
            other = "pl" if number == "sg" else "sg"
            words += ["(", *self.noun_phrase(other, depth=1), ")"]
        # Third person singular takes the -s, as in English ("the dog runs", "the dogs run").
        lemma = self.verbs[self.draw["verb"]()]
        words.append(self._open_word(lemma + "s" if number == "sg" else lemma))
        if self._chance(0.6):
            words += self.noun_phrase(self._number(), depth=1)
        if self._chance(0.3):
            words.append(self._open_word(self.adverbs[self.draw["adverb"]()]))
        return words

    def sentence(self) -> list[str]:
        words = self.clause()
        if self._chance(0.25):
            words += [self._pick(_CONJUNCTIONS), *self.clause()]
        return words + ["."]

    def lines(self, articles: bool):
        """Endless stream of lines (token lists; [] is a blank line)."""
        while True:
            if not articles:
                yield self.sentence() + (self.sentence() if self._chance(0.15) else [])
                continue
            self.topic = [self.draw["noun"]() for _ in range(4)]
            yield []
            yield ["=", *(self.noun("sg") for _ in range(1 + self._chance(0.5))), "="]
            yield []
            for _ in range(2 + int(self.rng.random() * 4)):
                yield [w for _ in range(2 + int(self.rng.random() * 5)) for w in self.sentence()]
                yield []


def generate_word_splits(spec: SyntheticSpec) -> dict[str, list[list[str]]]:
    """Lines of each split; each split holds at least its size in tokens (a line adds <eos>)."""
    stream = _Grammar(random.Random(spec.seed), spec.vocab_size, word_level=True).lines(spec.articles)
    splits: dict[str, list[list[str]]] = {}
    for split, size in zip(SPLITS, spec.sizes):
        lines, tokens = [], 0
        while tokens < size:
            line = next(stream)
            lines.append(line)
            tokens += len(line) + 1
        splits[split] = lines
    return splits


def generate_text(spec: SyntheticSpec) -> str:
    """One text of at least sum(spec.sizes) characters, newline-terminated lines."""
    stream = _Grammar(random.Random(spec.seed), spec.vocab_size, word_level=False).lines(spec.articles)
    parts, length = [], 0
    while length < sum(spec.sizes):
        line = " ".join(next(stream)) + "\n"
        parts.append(line)
        length += len(line)
    return "".join(parts)


def synthetic_bytes(dataset: Dataset) -> bytes:
    """The raw file of a synthetic dataset: a .tgz of three splits (word) or one text (char)."""
    spec = dataset.synthetic
    if dataset.tokenizer == "char":
        return generate_text(spec).encode("utf-8")
    assert isinstance(dataset.splits, SplitMembers)
    splits = generate_word_splits(spec)
    members = dict(zip((dataset.splits.train, dataset.splits.valid, dataset.splits.test), SPLITS))
    return pack("tgz", {member: "".join(" ".join(line) + "\n" for line in splits[split]).encode("utf-8")
                        for member, split in members.items()})

