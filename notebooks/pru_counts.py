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
# # PRU, Table 3 and Figure 5: which cell did the paper count?
#
# Mehta et al., EMNLP 2018, §5. Every Table 3 row and Figure 5 point is built at the paper's sizes
# (one layer, embedding = hidden = 600, tied; PTB and WikiText-2 vocabularies) from
# `config/studies/pru.yaml`, whatever the run's budget, and its parameters are counted exactly (no
# training): once with the authors' released pyramid (`pyramid: released`) and once with every
# pyramid level also split into the cell's g groups (`pyramid: grouped`, cell option
# `pyramid_groups` = g; the same cell where there is no pyramid or g = 1). The paper's printed counts
# sit beside them (`paper_*`: Table 3's totals and recurrent-unit (RU) millions, the text's "R3 ... 75 %
# fewer than R4" and Figure 5's "K = 2, g = 4 learns 77 % fewer than the LSTM").
#
# The R3 row and the Figure 5 saving fit the grouped pyramid; R4, R5 and R6 (no grouped context) fit
# the released one; R2 (GLT/GLT, no pyramid) fits neither. The scorecard's
# `paper_counts_fit_*` claims read this table.

# %% tags=["parameters"]
study = "pru"
artifact = "counts"
metrics_files = []
tables = ["results/tables/pru_counts.csv"]
figures = []

# %%
from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save
from rnnrepro.configuration import load_run_config, load_yaml, project_root
from rnnrepro.grid import load_study

study_config = load_study(study)
run_config = load_run_config(load_yaml(project_root() / "config" / "config.yaml"))
table = pru.ablation_counts(study_config, run_config, artifact)
save(table, tables[0])

# %% [markdown]
# Table 3, PTB: recurrent-unit and total parameters (millions) with each pyramid, against the paper's.

# %%
rows = table[table["table3_row"].notna() & (table["dataset"] == "ptb")]
rows[["table3_row", "pyramid", "pyramid_groups", "params_recurrent", "paper_ru_params_m", "params",
      "paper_params_m", "ru_saving_vs_r4_pct", "paper_ru_saving_vs_r4_pct"]].round(2)

# %% [markdown]
# Figure 5: RU saving against the one-layer LSTM (2,884,800) per (g, K), both pyramids.

# %%
points = table[(table["cell"] == "pru") & (table["dataset"] == "ptb") & table["table3_row"].isin([None, "R3"])]
points.pivot_table(index=["g", "K"], columns="pyramid", values="ru_saving_pct").round(1)
