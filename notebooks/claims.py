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
# artifact tables: `held`, `not held` or `inconclusive` by the decision rule (independent rows: every
# seed of a row beyond every seed of the other, and the 90 % Welch interval of the difference on that
# side of zero; paired by seed where both rows come from the same seed's model: the 90 % paired t
# interval; a claim that states a size: that size too), `not testable at this scale` (with the reason:
# models that do not keep the paper's ratio of recurrent parameters or its output head, a regime the
# budget's models do not reach, rows that measure something else, a single measurement within its
# noise), or `not tested` (with the reason: synthetic data, a budget that cannot answer the claim and
# the GPU-hours that would, a row the budget leaves out, a table that could not be built). Beside each:
# the paper's numbers, our effect and the paper's (in nats for perplexities), the interval, the ratio
# ours / paper, the minimum detectable effect, the flags (fragile, still improving, capped, rate at grid
# edge, stalled), the models' parameters and scale against the paper's, and the same claim at the budget's other
# scale where the study has one. `paper_check` is the same check on the paper's own numbers.

# %% tags=["parameters"]
run_config = {"budget": "paper", "seeds": [1111], "studies": ["pru"]}
table_files = []
unrendered = {}  # table -> why it could not be built (rendering from recorded runs)
tables = ["results/tables/claims.csv", "results/tables/claims_effects.csv"]
figures = ["results/figures/claims.png", "results/figures/claims_effects_pru.png"]

# %%
import math
import os

import matplotlib.pyplot as plt
import pandas as pd

from rnnrepro.analysis.claims import (COUNTED, HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, NOT_TESTED, NOT_YET_RUN,
                                      beside_other_scales, evaluate, other_scale_files, other_scales,
                                      read_effects, read_scorecard)
from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.analysis.run_endings import run_endings
from rnnrepro.grid import load_study

budget = run_config["budget"]
studies = {name: load_study(name) for name in run_config["studies"]}
runs = run_endings(studies, run_config)
card, pairs = evaluate(studies, run_config, table_files, unrendered, runs)
# the same claims at this budget's other scale (cpu_wide beside cpu), where its scorecard exists yet
scale_files = other_scale_files(studies, budget)
other_cards = {name: read_scorecard(files["claims"]) if os.path.exists(files["claims"]) else None
               for name, files in scale_files.items()}
card = beside_other_scales(card, studies, budget, other_cards)
other_pairs = [read_effects(files["effects"]) for files in scale_files.values() if os.path.exists(files["effects"])]
pairs = pd.concat([pairs, *other_pairs], ignore_index=True) if other_pairs else pairs
save(card, tables[0])
save(pairs, tables[1])
pd.set_option("display.max_colwidth", 80)
card[["study", "claim", "paper", "ours", "verdict", "unit", "difference", "paper_difference", "interval", "ratio",
      "mde", "flags", "other_scale_verdict", "reason"]]

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


colours = {HELD: "tab:green", NOT_HELD: "tab:red", INCONCLUSIVE: "tab:olive", NOT_TESTABLE: "tab:purple",
           "not tested: synthetic data": "0.75", "not tested: needs a larger budget": "tab:orange",
           "not tested: no result": "0.45"}
counts = (card.assign(kind=[kind(r) for r in card.itertuples()])
          .groupby(["study", "kind"]).size().unstack(fill_value=0)
          .reindex(columns=[k for k in colours], fill_value=0))
fig, ax = plt.subplots(figsize=(8, 0.6 + 0.5 * max(len(counts), 1)))
counts.plot.barh(stacked=True, color=[colours[k] for k in counts.columns], ax=ax, width=0.6)
ax.set_xlabel("claims (one per dataset / combination)")
ax.set_ylabel("")
ax.set_title(f"Claims scorecard, budget {budget}")
ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
save_figure(fig, figures[0])

# %% [markdown]
# Effect against parameters, one figure per study: each compared pair of each claim measured over seeds
# (claims on exact counts aside), our effect (first row minus second, in the claim's unit: nats for a
# perplexity) with its 90 % interval at this budget and at its other scale, against the mean parameter
# count of the two rows' models (log axis), and the paper's effect at the paper's size (a star). Pairs
# of one claim at the same size are set side by side (dodged along the axis) so that none hides another.
# A dotted line joins a pair's scales only where three scales or more measure it: two points are no
# trend toward the paper's value. The horizontal line is no difference.

# %%
measured = pairs[pairs["verdict"].isin([HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE])
                 & pairs["params"].notna()].merge(card[["study", "claim", "data"]].drop_duplicates(),
                                                  on=["study", "claim"], how="left")
measured = measured[measured["data"] != COUNTED]
markers = {name: marker for name, marker in zip(dict.fromkeys([budget, *scale_files]), "osD^v")}
for study, figure in zip(studies, figures[1:]):
    mine = measured[measured["study"] == study]
    panels = list(dict.fromkeys(mine["claim"]))
    columns = min(3, max(len(panels), 1))
    rows = max(1, math.ceil(len(panels) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.8 * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    if not panels:
        scales = ", ".join([budget, *other_scales(studies[study], budget)])
        axes[0][0].text(0.5, 0.5, f"no claim of {study} has an effect measured over seeds at {scales}",
                        ha="center", va="center", wrap=True)
    for ax, claim in zip(axes.flat, panels):
        claim_pairs = mine[mine["claim"] == claim]
        groups = list(claim_pairs.groupby("pair", sort=False))
        for index, (pair, points) in enumerate(groups):
            colour = f"C{index}"
            dodge = 10 ** (0.04 * (index - (len(groups) - 1) / 2))  # a few per cent along the log axis
            points = points.sort_values("params")
            if points["budget"].nunique() >= 3:
                ax.plot(points["params"] * dodge, points["difference"], ":", color=colour, linewidth=1)
            for point in points.itertuples():
                low = point.difference - point.low if not math.isnan(point.low) else 0
                high = point.high - point.difference if not math.isnan(point.high) else 0
                ax.errorbar(point.params * dodge, point.difference, yerr=[[low], [high]],
                            fmt=markers.get(point.budget, "o"), color=colour, capsize=3, label=f"{pair} ({point.budget})")
            paper = points.dropna(subset=["paper_params", "paper_difference"])
            if len(paper):
                ax.plot(paper["paper_params"].iloc[0] * dodge, paper["paper_difference"].iloc[0], "*", color=colour,
                        markersize=11, label=f"{pair} (paper)")
        ax.axhline(0, color="0.5", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("parameters")
        units = claim_pairs["unit"].dropna().astype(str)
        unit = units.iloc[0] if len(units) and units.iloc[0] else claim_pairs["value"].iloc[0]
        ax.set_ylabel(f"effect in {unit}" + (" (difference of mean log-perplexity)" if unit == "nats" else ""))
        ax.set_title(claim, fontsize=8)
        ax.legend(fontsize=6)
    mine_scales = other_scales(studies[study], budget)
    waiting = [name for name in mine_scales if not os.path.exists(scale_files[name]["effects"])]
    shown = [budget, *(name for name in mine_scales if name not in waiting), "paper"]
    fig.suptitle(f"{study}: effect against parameters ({', '.join(shown)}"
                 + (f"; {', '.join(waiting)}: {NOT_YET_RUN}" if waiting else "") + ")")
    save_figure(fig, figure)
