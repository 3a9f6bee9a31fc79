"""The README's scorecard section, written from the rendered scorecards so it cannot drift from them.

``python -m rnnrepro.records readme`` replaces the text between the two markers in README.md
(:data:`BEGIN`, :data:`END`) with :func:`section`: a count of the scorecard's rows with a verdict from real
data per budget, then one table row per such verdict (exact parameter counts aside, counted in a line),
each with the paper's numbers and ours, the effect (ours and the paper's; nats for a perplexity), its
90 % interval, the ratio ours / paper, the minimum detectable effect, the verdict, the flags and, where
the study has one, the verdict, effect, interval and flags at the budget's other scale. It reads
``<results>/tables/claims.csv`` of every recorded budget (``records/<budget>``) that is not another
scale of one (those are shown beside theirs). ``--check`` writes nothing and fails when the README
differs; the test suite runs it on the repository's records.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import grid
from .analysis.claims import COUNTED, HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, read_scorecard
from .configuration import load_study
from .train.files import write_text_atomic

BEGIN = "<!-- scorecard: written by `python -m rnnrepro.records readme` from the rendered claims.csv; do not edit -->"
END = "<!-- scorecard: end -->"
VERDICTS = (HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE)


def shown_budgets(records: Path, studies: list[str]) -> list[str]:
    """The recorded budgets whose verdicts the README lists: every one but another scale of one."""
    scales = {name for study in studies for name, spec in load_study(study)["budgets"].items() if "scale_of" in spec}
    return [path.name for path in sorted(records.iterdir()) if path.is_dir() and path.name not in scales]


def _cell(text) -> str:
    return "" if pd.isna(text) else str(text).replace("|", "\\|").replace("\n", " ")


def _claim_text(row) -> str:
    per = row.claim.partition("[")[2].rstrip("]")
    where = f"{row.budget}" + (f"; {per}" if per else "")
    return f"{row.statement} (`{row.claim.partition('[')[0]}`, {where})"


def _effect(row) -> str:
    unit = " nats" if _cell(getattr(row, "unit", "")) == "nats" else ""
    return f"{_cell(row.difference)} (paper {_cell(row.paper_difference)}){unit}"


def _ratio(row) -> str:
    ratio, interval = _cell(getattr(row, "ratio", "")), _cell(getattr(row, "ratio_interval", ""))
    if not ratio or set(ratio.split("; ")) == {"n/a"}:
        return ""
    return ratio + (f" {interval}" if interval and set(interval.split("; ")) != {"n/a"} else "")


def section(cards: dict[str, pd.DataFrame]) -> str:
    """The section's Markdown for these budgets' scorecards (budget -> claims.csv), in their order."""
    lines = []
    real = {budget: card[card["verdict"].isin(VERDICTS) & (card["data"] != COUNTED)] for budget, card in cards.items()}
    counted = {budget: card[card["verdict"].isin(VERDICTS) & (card["data"] == COUNTED)] for budget, card in cards.items()}
    total = sum(len(card) for card in cards.values())
    per_budget = ", ".join(f"{len(rows)} at `{budget}`" for budget, rows in real.items())
    lines.append(f"Of the {total} scorecard rows of these budgets, {sum(len(r) for r in real.values())} have a "
                 f"verdict from real data ({per_budget}):")
    lines.append("")
    with_other = any(card["other_scale"].fillna("").astype(str).str.len().gt(0).any() for card in real.values())
    header = ["claim", "paper", "ours", "effect: ours (paper)", "90 % interval", "ours / paper", "MDE (80 % power)",
              "verdict", "flags"]
    if with_other:
        header.append("other scale")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for rows in real.values():
        for row in rows.itertuples():
            mde = _cell(getattr(row, "mde", ""))
            cells = [_claim_text(row), _cell(row.paper), _cell(row.ours), _effect(row), _cell(row.interval),
                     _ratio(row), "" if set(mde.split("; ")) <= {"n/a", ""} else mde, row.verdict, _cell(row.flags)]
            if with_other:
                other = _cell(row.other_scale)
                effect = " ".join(t for t in (_cell(row.other_scale_difference), _cell(row.other_scale_interval)) if t)
                flags = _cell(row.other_scale_flags)
                effect += f" ({flags})" if flags else ""
                cells.append(f"{other}: {_cell(row.other_scale_verdict)}" + (f", {effect}" if effect else "")
                             if other else "")
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines.append("")
    decided = ", ".join(f"{len(rows)} at `{budget}`" for budget, rows in counted.items())
    lines.append(f"Decided from exact parameter counts, without training: {decided}. The reasons, the flags' "
                 f"numbers and the rest of the rows: `{grid.results_dir('<budget>')}/tables/claims.csv`.")
    return "\n".join(lines) + "\n"


def read_cards(budgets: list[str]) -> dict[str, pd.DataFrame]:
    """Each budget's rendered scorecard; an error naming the command when one is missing."""
    cards = {}
    for budget in budgets:
        path = Path(grid.results_dir(budget)) / "tables/claims.csv"
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: render it first "
                                    f"(python -m rnnrepro.records render --budget {budget})")
        cards[budget] = read_scorecard(path)
    return cards


def replaced(readme: str, text: str, source: str = "README.md") -> str:
    """``readme`` with the text between the markers replaced by ``text``."""
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise ValueError(f"{source}: needs exactly one pair of scorecard markers, {BEGIN!r} then {END!r}, "
                         f"around the section this command writes")
    start = readme.index(BEGIN) + len(BEGIN)
    return readme[:start] + "\n" + text + readme[readme.index(END):]


def update(readme_file: Path, budgets: list[str], check: bool) -> tuple[bool, str]:
    """Write (or, with ``check``, compare) the README's section. Returns (up to date, message)."""
    text = readme_file.read_text()
    wanted = replaced(text, section(read_cards(budgets)), str(readme_file))
    if wanted == text:
        return True, f"{readme_file}: the scorecard section matches {', '.join(budgets)}"
    if check:
        return False, (f"{readme_file}: the scorecard section differs from the rendered scorecards of "
                       f"{', '.join(budgets)}; write it with `python -m rnnrepro.records readme` and commit it")
    write_text_atomic(readme_file, wanted)
    return True, f"{readme_file}: scorecard section written from {', '.join(budgets)}"
