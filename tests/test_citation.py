"""The project can be cited and reused: LICENSE (MIT), CITATION.cff (Citation File Format 1.2.0, read
with a YAML reader) and docs/references.bib (every entry with its key, title, year and authors), which
agree with each other and with pyproject.toml."""

import re
import tomllib

import yaml

from rnnrepro.configuration import REPO_ROOT

PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]


def bibtex_entries(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """key -> (entry type, {field: value}) of every ``@type{key, field = {value}, ...}`` in ``text``
    (values in braces, nested braces kept, or bare numbers); a duplicate key or an unbalanced entry
    fails."""
    entries, position = {}, 0
    while (start := text.find("@", position)) != -1:
        head = re.match(r"@(\w+)\s*\{\s*([^,\s]+)\s*,", text[start:])
        assert head, f"docs/references.bib: no entry head at {text[start:start + 60]!r}"
        kind, key = head.group(1).lower(), head.group(2)
        fields, cursor = {}, start + head.end()
        while True:
            field = re.compile(r"\s*(\w+)\s*=\s*").match(text, cursor)
            if not field:
                break
            cursor = field.end()
            if text[cursor] == "{":
                depth, end = 0, cursor
                for end in range(cursor, len(text)):
                    depth += {"{": 1, "}": -1}.get(text[end], 0)
                    if depth == 0:
                        break
                assert depth == 0, f"docs/references.bib: {key}.{field.group(1)} has unbalanced braces"
                value, cursor = text[cursor + 1:end], end + 1
            else:
                bare = re.compile(r"[\w.-]+").match(text, cursor)
                assert bare, f"docs/references.bib: {key}.{field.group(1)} has no value"
                value, cursor = bare.group(0), bare.end()
            fields[field.group(1).lower()] = value
            cursor = re.compile(r"\s*,?").match(text, cursor).end()
        closing = re.compile(r"\s*\}").match(text, cursor)
        assert closing, f"docs/references.bib: entry {key} does not end where its fields do: {text[cursor:cursor + 60]!r}"
        assert key not in entries, f"docs/references.bib: key {key} twice"
        entries[key] = (kind, fields)
        position = closing.end()
    return entries


ENTRIES = bibtex_entries((REPO_ROOT / "docs/references.bib").read_text())


def test_the_code_is_mit_licensed():
    text = (REPO_ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Permission is hereby granted, free of charge" in text


def test_citation_cff_has_what_the_format_requires_and_matches_the_package():
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"cff-version", "message", "title", "authors"} <= set(cff)
    assert cff["authors"] and all("name" in a or "family-names" in a for a in cff["authors"])
    assert cff["version"] == PROJECT["version"] and cff["license"] == "MIT"
    for reference in cff["references"]:
        assert {"type", "title", "authors"} <= set(reference), reference.get("title")
        assert all("family-names" in a or "name" in a for a in reference["authors"])


def test_every_bibtex_entry_has_key_title_year_and_authors():
    assert len(ENTRIES) >= 15
    for key, (kind, fields) in ENTRIES.items():
        assert re.fullmatch(r"[a-z][a-z0-9]*", key), key
        assert fields.get("title") and fields.get("author"), key
        assert re.fullmatch(r"(19|20)\d\d", fields.get("year", "")), f"{key}: year {fields.get('year')!r}"
        if kind == "inproceedings":
            assert fields.get("booktitle"), key
        if kind == "article":
            assert fields.get("journal"), key


def test_the_citations_agree():
    """The project's entry is CITATION.cff's, and every paper CITATION.cff names has its BibTeX entry."""
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    project = ENTRIES["rnnrepro"][1]
    assert project["title"] == cff["title"] and project["version"] == cff["version"]
    words = {key: re.sub(r"[{}]", "", fields["title"]).lower() for key, (_, fields) in ENTRIES.items()}
    for reference in cff["references"]:
        matches = [key for key, title in words.items() if title == reference["title"].lower()]
        assert matches, f"{reference['title']} (CITATION.cff) has no entry in docs/references.bib"
        families = [a["family-names"] for a in reference["authors"]]
        assert all(family in ENTRIES[matches[0]][1]["author"] for family in families), matches[0]
