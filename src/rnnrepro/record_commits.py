"""``records grow --commit``: git-commit exactly the files grow packed, and nothing else.

A grow commits each unit's records as it packs them: ``git add`` and ``git commit`` of exactly the files
it wrote, never of a folder, so a change to another record in the working tree (a record folder deleted
to retrain it, a line-ending change an editor made, a file of your own) is never committed with them.

Before packing a unit, grow lists the files it is about to write in ``<logs>/grow/packed.json`` (written
atomically) and takes them off once they are committed. A grow stopped between packing and committing
(killed, or the session ended) leaves them listed, and the next ``grow --commit`` commits those of them
that still exist and differ from the last commit: deletions are never committed.

Commits need a branch: on a detached HEAD they would belong to no branch and be lost at the next
checkout, so ``--commit`` refuses to start there.
"""

from __future__ import annotations

import functools
import json
import subprocess
import threading
from pathlib import Path

from . import grid
from .train.files import write_text_atomic

_LOCK = threading.Lock()  # grow's workers pack and commit side by side


def journal(budget: str) -> Path:
    """Where grow lists the files it packed but has not committed yet."""
    return Path(grid.logs_dir(budget)) / "grow" / "packed.json"


def _read(budget: str) -> list[str]:
    path = journal(budget)
    try:
        listed = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RuntimeError(f"{path} is damaged ({e}): it lists the records an earlier grow packed but did not "
                           f"commit. Commit what `git status records/` shows that you mean to keep, then delete "
                           f"{path} and grow again") from None
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
        raise RuntimeError(f"{path} is not a list of paths: delete it (after committing what `git status "
                           f"records/` shows that you mean to keep) and grow again")
    return listed


def _write(budget: str, paths: list[str]) -> None:
    path = journal(budget)
    if paths:
        write_text_atomic(path, json.dumps(sorted(set(paths)), indent=1) + "\n")
    else:
        path.unlink(missing_ok=True)


def note_packing(budget: str, paths: list[Path]) -> None:
    """List ``paths`` (files grow is about to pack) as packed and not yet committed."""
    with _LOCK:
        _write(budget, _read(budget) + [str(p) for p in paths])


def note_committed(budget: str, paths: list[Path]) -> None:
    with _LOCK:
        done = {str(p) for p in paths}
        _write(budget, [p for p in _read(budget) if p not in done])


@functools.lru_cache(maxsize=1)
def _history_is_whole() -> bool:
    """Whether this is a git repository with its whole history (not a shallow clone, not a copy)."""
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], capture_output=True, text=True)
    return shallow.returncode == 0 and shallow.stdout.strip() == "false"


@functools.lru_cache(maxsize=None)
def in_history(sha: str) -> bool:
    """Whether commit ``sha`` (a ``-dirty`` suffix aside) is in this repository. True where that cannot be
    told: outside a git repository (a copy of the files) or in a shallow clone, which lacks old commits."""
    if not _history_is_whole():
        return True
    found = subprocess.run(["git", "cat-file", "-e", f"{sha.removesuffix('-dirty')}^{{commit}}"],
                           capture_output=True, text=True)
    return found.returncode == 0


def check_branch() -> None:
    """Refuse ``--commit`` on a detached HEAD (or outside a git repository), saying what to do."""
    inside = subprocess.run(["git", "rev-parse", "--git-dir"], capture_output=True, text=True)
    if inside.returncode != 0:
        raise RuntimeError("--commit: this folder is not in a git repository, so there is nothing to commit the "
                           "records to; grow without --commit, or from a clone of the project")
    branch = subprocess.run(["git", "symbolic-ref", "-q", "--short", "HEAD"], capture_output=True, text=True)
    if branch.returncode != 0:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        raise RuntimeError(f"--commit: HEAD is detached (at {head or 'no commit'}): the records' commits would "
                           f"belong to no branch and be lost at the next checkout. Make a branch here "
                           f"(`git switch -c records-grow`) or switch to one, then grow again")


def changed(paths: list[Path]) -> list[Path]:
    """Those of ``paths`` that exist and are new or differ from the last commit."""
    present = [Path(p) for p in paths if Path(p).is_file()]
    if not present:
        return []
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    listed = subprocess.run(["git", "status", "--porcelain", "-z", "--untracked-files=all", "--", *map(str, present)],
                            capture_output=True, text=True)
    if top.returncode != 0 or listed.returncode != 0:
        return []
    root = Path(top.stdout.strip()).resolve()
    differing = {root / entry[3:] for entry in listed.stdout.split("\0") if entry[3:]}
    return [p for p in present if p.resolve() in differing]


def commit(paths: list[Path], message: str) -> str | None:
    """Commit exactly ``paths`` (those changed) with ``message``; a warning, or None when all went well."""
    with _LOCK:
        files = changed(paths)
        if not files:
            return None
        added = subprocess.run(["git", "add", "--", *map(str, files)], capture_output=True, text=True)
        result = added if added.returncode else subprocess.run(
            ["git", "commit", "-q", "-m", message, "--only", "--", *map(str, files)], capture_output=True, text=True)
        if result.returncode != 0:
            return (result.stderr or result.stdout).strip()
        return None


def commit_leftovers(budget: str, tree: Path, say) -> None:
    """Commit the files an earlier grow packed but was stopped before committing, so that no finished
    unit stays only in the working tree: only those it listed, only where they still exist."""
    listed = [Path(p) for p in _read(budget)]
    inside = Path(tree).resolve()
    files = changed([p for p in listed if p.resolve().is_relative_to(inside)])  # records of this budget only
    if files:
        problem = commit(files, f"records: {budget}, {len(files)} files packed by an earlier grow that stopped "
                                f"before committing them")
        if problem:
            say(f"warning: could not commit the {len(files)} files an earlier grow packed: {problem}")
            return
        say(f"committed {len(files)} file{'s' if len(files) != 1 else ''} an earlier grow packed into {tree} but "
            f"did not commit")
    note_committed(budget, listed)
