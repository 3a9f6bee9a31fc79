"""A mirror holding an archive's member files instead of the archive.

The project's mirror holds PTB's and WikiText-2's split files (``ptb/ptb.train.txt.gz``,
``wt2/wiki.train.tokens.gz``, ...), not ``simple-examples.tgz`` or ``wikitext-2-v1.zip``. For a dataset
whose registry entry lists the published sha256 of its members (ptb, ptb_char, wt2), each member is
looked for at ``<mirror>/<folder>/<member name>`` or ``.gz`` (folders: the dataset id, then the entry's
``member_folders``), brought in as a raw file is (:func:`transfer.retrieve`) and checked against its
own digest. The archive (the entry's container) is then packed from the checked members
(:func:`archive.pack`: the same members give the same bytes), and prepare reads from it exactly what it
reads from the original archive. pooch has no notion of an archive made of separately checked files,
so this lives here, apart from the download of a raw file.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from .archive import pack
from .registry import Dataset
from .transfer import (MIRROR_HINT, ChecksumError, DownloadError, Source, Unavailable, file_digest, mirror_prefix,
                       retrieve, with_gz)


def member_sources(dataset: Dataset, mirror: str, member: str) -> list[Source]:
    """Where a mirror may hold one archive member of ``dataset`` as a file of its own, in order."""
    prefix = mirror_prefix(mirror)
    name = posixpath.basename(member)
    return [s for folder in (dataset.id, *dataset.member_folders) for s in with_gz(f"{prefix}/{folder}/{name}")]


def _fetch_member(dataset: Dataset, mirror: str, member: str, published: str, folder: Path) -> tuple[Path, str]:
    """One member from the first source that has it, checked against its published sha256."""
    tried = []
    for source in member_sources(dataset, mirror, member):
        try:
            path = retrieve(dataset.id, source, folder, posixpath.basename(member))
        except Unavailable as unavailable:
            tried += unavailable.tried
            continue
        digest = file_digest(path)
        if digest != published:
            raise ChecksumError(
                f"sha256 mismatch for dataset {dataset.id!r}, member {member}, from {source.url}: expected "
                f"{published} ({dataset.member_note}), got {digest}; nothing was kept. Replace that file on "
                f"the mirror with the published one (uncompressed, or gzipped as {posixpath.basename(member)}"
                f".gz), or use another mirror ({MIRROR_HINT})"
            )
        return path, source.url
    raise Unavailable(tried)


def fetch_members(dataset: Dataset, mirror: str, folder: Path) -> tuple[Path, str]:
    """The archive packed from the mirror's member files, written in ``folder``, and where they came from.

    Raises :class:`Unavailable` when the mirror holds none of them. A member that is missing while
    others are there, wrong, truncated or damaged stops the fetch with its name.
    """
    fetched: dict[str, Path] = {}
    origins: dict[str, str] = {}
    missing: dict[str, list[str]] = {}
    for member, published in dataset.member_sha256:
        try:
            fetched[member], origins[member] = _fetch_member(dataset, mirror, member, published, folder)
        except Unavailable as unavailable:
            missing[member] = unavailable.tried
    if not fetched:
        raise Unavailable([url for urls in missing.values() for url in urls])
    if missing:
        looked = "; ".join(f"{m}: {', '.join(urls)}" for m, urls in missing.items())
        raise DownloadError(
            f"the mirror holds member file(s) {', '.join(sorted(origins.values()))} of dataset {dataset.id!r} "
            f"but not {', '.join(missing)} (looked for {looked}); nothing was kept. Add the missing file(s) to "
            f"the mirror, or use another mirror ({MIRROR_HINT})"
        )
    archive = folder / f"{dataset.file_name}.packed"
    archive.write_bytes(pack(dataset.container, {member: path.read_bytes() for member, path in fetched.items()}))
    return archive, f"the member files {', '.join(origins.values())} (assembled into {dataset.file_name})"
