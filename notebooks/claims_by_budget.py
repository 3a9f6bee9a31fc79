# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The claims at every budget
#
# Each claim's verdict at every budget that has a scorecard here (rendered from recorded runs by
# `python -m rnnrepro.records render`, or built by a run), side by side: where it holds, and at which
# scale of model (the `scale` column: width and parameters against the paper's). `smoke` is left out:
# its synthetic corpora test the pipeline, not the papers.

# %% tags=["parameters"]
scorecards = {}  # budget -> its claims.csv
tables = ["results/claims_by_budget.csv"]
figures = ["results/claims_by_budget.png"]

# %%
import matplotlib.pyplot as plt
import pandas as pd

from rnnrepro.analysis.claims import HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, NOT_TESTED, read_scorecard
from rnnrepro.analysis.notebook import save, save_figure

ORDER = ["cpu", "cpu_wide", "reduced", "paper"]
budgets = sorted(scorecards, key=lambda b: (ORDER.index(b) if b in ORDER else len(ORDER), b))
cards = pd.concat([read_scorecard(scorecards[b]).assign(budget=b) for b in budgets], ignore_index=True)
wide = cards.pivot_table(index=["study", "claim"], columns="budget", values="verdict", aggfunc="first", sort=False)
scale = cards[cards["verdict"] != NOT_TESTED].pivot_table(index=["study", "claim"], columns="budget",
                                                           values="scale", aggfunc="first", sort=False)
table = wide.reindex(columns=budgets).join(scale.reindex(columns=budgets).add_suffix("_scale"))
save(table.reset_index(), tables[0])
decided = table[wide.reindex(columns=budgets).ne(NOT_TESTED).any(axis=1)]
decided

# %% [markdown]
# One row per claim that has a verdict at some budget, one column per budget.

# %%
colours = {HELD: "tab:green", NOT_HELD: "tab:red", INCONCLUSIVE: "tab:olive", NOT_TESTABLE: "tab:purple",
           NOT_TESTED: "0.9"}
shown = wide.loc[decided.index, budgets] if len(decided) else wide.iloc[:0][budgets]
fig, ax = plt.subplots(figsize=(2.2 + 1.3 * len(budgets), 0.6 + 0.24 * max(len(shown), 1)))
for y, (key, verdicts) in enumerate(shown.iterrows()):
    for x, budget in enumerate(budgets):
        verdict = verdicts[budget] if isinstance(verdicts[budget], str) else NOT_TESTED
        ax.add_patch(plt.Rectangle((x, y), 0.95, 0.9, color=colours[verdict]))
        ax.text(x + 0.47, y + 0.45, verdict.replace(" at this scale", ""), ha="center", va="center", fontsize=6)
ax.set_xlim(0, len(budgets))
ax.set_ylim(len(shown), 0)
ax.set_xticks([x + 0.47 for x in range(len(budgets))], budgets)
ax.set_yticks([y + 0.45 for y in range(len(shown))], [f"{s}: {c}" for s, c in shown.index], fontsize=6)
ax.xaxis.tick_top()
ax.set_title("Verdicts by budget (claims with a verdict at some budget)", fontsize=9)
for side in ("top", "right", "bottom", "left"):
    ax.spines[side].set_visible(False)
save_figure(fig, figures[0], dpi=140)
