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
# # The claims scorecard
#
# Every claim each study file lists under `claims:` (docs/claims.md), checked against the study's
# artifact tables: `held`, `not held` or `inconclusive` by the seed rule (held when every seed of a row
# beats every seed of the row it is compared with; docs/claims.md), or `not tested` (with the reason:
# synthetic data, a budget that cannot answer the claim and the GPU-hours that would, a row the budget
# leaves out, a table that could not be built), beside the paper's numbers, the mean difference and
# seed-to-seed spread, the models' scale against the paper's, the budget, the data and the seeds.
# `paper_check` is the same check on the paper's own numbers.

# %% tags=["parameters"]
run_config = {"budget": "paper", "seeds": [1111], "studies": ["pru"]}
table_files = []
unrendered = {}  # table -> why it could not be built (rendering from recorded runs)
tables = ["results/tables/claims.csv"]
figures = ["results/figures/claims.png"]

# %%
import matplotlib.pyplot as plt
import pandas as pd

from rnnrepro.analysis.claims import HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTED, scorecard
from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.configuration import load_study

studies = {name: load_study(name) for name in run_config["studies"]}
card = scorecard(studies, run_config, table_files, unrendered)
save(card, tables[0])
pd.set_option("display.max_colwidth", 80)
card[["study", "claim", "paper", "ours", "verdict", "reason", "difference", "spread", "scale", "paper_check"]]

# %% [markdown]
# Verdicts per study (not tested split by its reason).

# %%
def kind(row) -> str:
    if row.verdict != NOT_TESTED:
        return row.verdict
    if row.reason.startswith("synthetic"):
        return "not tested: synthetic data"
    if row.reason.startswith("not testable"):
        return "not tested: needs a larger budget"
    return "not tested: no result"


colours = {HELD: "tab:green", NOT_HELD: "tab:red", INCONCLUSIVE: "tab:olive", "not tested: synthetic data": "0.75",
           "not tested: needs a larger budget": "tab:orange", "not tested: no result": "0.45"}
counts = (card.assign(kind=[kind(r) for r in card.itertuples()])
          .groupby(["study", "kind"]).size().unstack(fill_value=0)
          .reindex(columns=[k for k in colours], fill_value=0))
fig, ax = plt.subplots(figsize=(8, 0.6 + 0.5 * max(len(counts), 1)))
counts.plot.barh(stacked=True, color=[colours[k] for k in counts.columns], ax=ax, width=0.6)
ax.set_xlabel("claims (one per dataset / combination)")
ax.set_ylabel("")
ax.set_title(f"Claims scorecard, budget {run_config['budget']}")
ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
save_figure(fig, figures[0])
