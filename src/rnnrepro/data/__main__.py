"""Command line of the data layer, as the workflow's data rules call it.

    python -m rnnrepro.data fetch DATASET --dest data/raw/DATASET [--mirror M] [--trust-unverified]
    python -m rnnrepro.data prepare DATASET --raw data/raw/DATASET/FILE --out data/processed/DATASET
    python -m rnnrepro.data fraction --train data/processed/DATASET/train.txt --tokenizer word \\
        --percent 20 --out data/processed/DATASET/train.fraction20.txt
    python -m rnnrepro.data text8style DATASET --raw data/raw/SOURCE/FILE --out data/processed/DATASET
    python -m rnnrepro.data autocomplete DATASET --source data/processed/SOURCE --out data/processed/DATASET
    python -m rnnrepro.data info

Expected failures print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path

from .. import console
from .autocomplete import AUTOCOMPLETE_DATASETS, build
from .download import MIRROR_ENV, TRUST_ENV, fetch
from .preprocess import fraction, prepare, write_error
from .registry import DATASETS, DataError
from .text8style import TEXT8STYLE_DATASETS
from .text8style import build as build_text8style


def _verification(d) -> str:
    if d.archive == "synthetic":
        return "generated"
    if d.sha256 and d.member_sha256:
        return "verified (archive or members)"
    if d.sha256:
        return "verified"
    if d.member_sha256:
        return "verified (members)"
    return "NONE (needs --trust-unverified)"


def _info() -> None:
    header = ("id", "tokenizer", "archive", "file", "sha256", "source")
    rows = [
        (d.id, d.tokenizer, d.archive, d.file_name,
         _verification(d),
         d.urls[0] if d.urls else f"seed {d.synthetic.seed}")
        for d in DATASETS.values()
    ]
    rows += [(name, "char", "derived", "-", f"from {spec.source}'s raw file", "wikifil.pl's rules (text8's format)")
             for name, spec in TEXT8STYLE_DATASETS.items()]
    rows += [(name, "autocomplete", "derived", "-", f"from processed {spec.source}", "word per character")
             for name, spec in AUTOCOMPLETE_DATASETS.items()]
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.data", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("fetch", help="download a dataset's raw file and check its sha256")
    p.add_argument("dataset", choices=DATASETS)
    p.add_argument("--dest", required=True, help="folder to write the raw file into")
    p.add_argument("--mirror", help=f"directory or URL prefix holding the raw file or, where the registry "
                                    "publishes their digests, the archive's member files (default: "
                                    f"${MIRROR_ENV}, else the canonical URLs); see docs/data.md")
    p.add_argument("--trust-unverified", action="store_true", default=bool(os.environ.get(TRUST_ENV)),
                   help=f"accept a dataset whose registry entry has no sha256 (default: set when ${TRUST_ENV} is "
                        "not empty, as the workflow sets it from the config's trust_unverified_downloads)")

    p = commands.add_parser("prepare", help="write the processed splits, vocab.txt and stats.json")
    p.add_argument("dataset", choices=DATASETS)
    p.add_argument("--raw", required=True, help="the raw file fetch wrote")
    p.add_argument("--out", required=True, help="folder for the processed files")

    p = commands.add_parser("fraction", help="write the first P %% of a training split")
    p.add_argument("--train", required=True, help="processed train.txt")
    p.add_argument("--tokenizer", required=True, choices=("word", "char"))
    p.add_argument("--percent", required=True, type=int, help="1..100")
    p.add_argument("--out", required=True, help="output file, e.g. train.fraction20.txt")

    p = commands.add_parser("text8style", help="clean a Wikipedia corpus's splits into text8's format (a-z and "
                                               "single spaces, by wikifil.pl's rules)")
    p.add_argument("dataset", choices=TEXT8STYLE_DATASETS)
    p.add_argument("--raw", required=True, help="the source dataset's raw file, as fetch wrote it")
    p.add_argument("--out", required=True, help="folder for the processed splits, vocab.txt and stats.json")

    p = commands.add_parser("autocomplete", help="derive an autocomplete dataset (word per character) from "
                                                 "a processed character-level dataset")
    p.add_argument("dataset", choices=AUTOCOMPLETE_DATASETS)
    p.add_argument("--source", required=True, help="the processed source dataset's folder")
    p.add_argument("--out", required=True, help="folder for the autocomplete splits, vocab.txt and stats.json")

    commands.add_parser("info", help="list the dataset registry")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch(args.dataset, args.dest, mirror=args.mirror, trust_unverified=args.trust_unverified))
        elif args.command == "prepare":
            stats = prepare(args.dataset, args.raw, args.out)
            tokens = ", ".join(f"{split} {count:,}" for split, count in stats["tokens"].items())
            print(f"{args.dataset}: {tokens} tokens; vocabulary {stats['vocab_size']:,} -> {args.out}")
        elif args.command == "fraction":
            kept = fraction(args.train, args.percent, args.out, tokenizer=args.tokenizer)
            print(f"{args.out}: {kept['tokens']:,} of {kept['of_tokens']:,} tokens ({args.percent} %)")
        elif args.command == "text8style":
            stats = build_text8style(args.dataset, args.raw, args.out)
            chars = ", ".join(f"{split} {count:,}" for split, count in stats["tokens"].items())
            print(f"{args.dataset}: {chars} characters; {stats['distinct_words']:,} distinct words -> {args.out}")
        elif args.command == "autocomplete":
            stats = build(args.dataset, args.source, args.out)
            sizes = ", ".join(f"{split} {count:,}" for split, count in stats["observations"].items())
            print(f"{args.dataset}: {sizes} observations; {stats['classes']:,} classes -> {args.out}")
        else:
            _info()
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk outside write_text: an archive member extracted to scratch, say
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = Path(exc.filename) if exc.filename else Path(getattr(args, "out", None) or getattr(args, "dest", "."))
        print(f"error: {write_error(where, exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
