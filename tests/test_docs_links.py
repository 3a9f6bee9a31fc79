"""Every relative link of the README and docs/ leads to a file of the repository (a page moved to
another folder keeps its links working)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rnnrepro.configuration import REPO_ROOT

PAGES = sorted([REPO_ROOT / "README.md", REPO_ROOT / "CHANGELOG.md", REPO_ROOT / "records/README.md",
                *(REPO_ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO_ROOT)))
def test_relative_links_lead_to_files(page: Path):
    broken = [target for target in LINK.findall(page.read_text())
              if not target.startswith(("http://", "https://", "mailto:"))
              and not (page.parent / target).exists()]
    assert not broken, f"{page.relative_to(REPO_ROOT)} links to files that do not exist: {broken}"
