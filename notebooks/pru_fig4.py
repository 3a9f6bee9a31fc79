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
# # PRU, Figure 4: variance of the learned word embeddings per part-of-speech category
#
# Mehta et al., EMNLP 2018, Figure 4: LSTM (M = 1000) against the PRU (g = 4, K = 2, M = 1400)
# pyramid levels 1 and 2, standard dropout, PTB; the trained Table 1 cells' `model.pt`, no training.
#
# What the paper leaves open, and our choice (`rnnrepro.analysis.pru`): the variance of a word is
# the variance across the dimensions of its vector; a category's bar is the mean over its words.
# Level 1 is the PRU's embedding, level 2 that embedding sub-sampled exactly as the trained first
# layer does it (avg pool, kernel 3, stride 2). A word's category is its most frequent tag in the
# training split, tagged in context by TextBlob's bundled tagger (pattern's Brill-style tagger, Penn
# Treebank tags, shipped in the package; the paper used NLTK's, whose model is a separate download
# we cannot install), folded into coarse categories; PTB's number token `N` is NUM; `<unk>` and
# `<eos>` have none. Under the smoke budget the corpus is synthetic, so the tagger's categories mean
# nothing: the figure then only proves the pipeline.

# %% tags=["parameters"]
study = "pru"
artifact = "fig4"
metrics_files = []
tables = ["results/tables/pru_fig4.csv"]
figures = ["results/figures/pru_fig4.png"]

# %%
from pathlib import Path

import seaborn as sns

from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.analysis.run_files import read_run_config
from rnnrepro.data.preprocess import read_text, split_lines

train_files = {read_run_config(Path(p).parent)["data"]["train_file"] for p in metrics_files}
assert len(train_files) == 1, f"the cells were trained on different corpora: {train_files}"
categories = pru.word_categories(split_lines(read_text(Path(train_files.pop()))))
table = pru.fig4_table(metrics_files, categories)
save(table, tables[0], complete=["variance"])
table

# %%
order = table.groupby("category")["words"].max().sort_values(ascending=False).index
grid = sns.catplot(data=table, kind="bar", x="category", y="variance", hue="series", order=order,
                   height=4, aspect=2.2)
grid.set_axis_labels("part of speech (words per category in brackets below)", "mean variance of a word vector")
grid.ax.set_xticks(range(len(order)),
                   [f"{c}\n({int(table.loc[table['category'] == c, 'words'].max())})" for c in order])
grid.figure.suptitle(f"PRU Figure 4: embedding variance by part of speech (corpus {table['corpus'].iloc[0]}, "
                     f"{table['budget'].iloc[0]} budget)", y=1.03)
save_figure(grid.figure, figures[0])
