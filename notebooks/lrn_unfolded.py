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
# # LRN unfolded: how much of each earlier token reaches the last state
#
# Paper §4: with g = identity and h_0 = 0, an LRN layer's state is h_t = Σ_k w_{k→t} ⊙ v_k with
# w_{k→t} = i_k ⊙ Π_{l=k+1..t} f_l (input gate of token k times every later forget gate): a
# self-attention-like weighting of the values. For a few test sentences, each run alone from a zero
# state, the heatmap shows w_{k→T} for the sentence's last position T, averaged over the units of the
# first LRN layer, for the identity-g model (`lrn_identity`, where the sum is exact) and the LM's own
# tanh model (`lrn`).
#
# What it can and cannot show on a language model, unlike the paper's AmaPolar sentiment classifier:
# - The LM's last state predicts the *next word*, not a label for the sentence, so a recency pattern
#   is what a good LM should learn; there is no "sentiment word" whose weight should stay high.
# - Only the first layer is decomposed exactly (its input is the embedding); the layers above see
#   mixtures of earlier tokens, so their weights do not belong to single tokens.
# - With tanh the product of gates is not a decomposition: tanh rescales the state at every step, so
#   for `lrn` the figure shows the gate pattern, not each token's exact share.
# - Sentences are run without their preceding context (h_0 = 0, the paper's setting); in training the
#   state is carried across sentences.
# Under the smoke budget the model is tiny and the "sentences" are synthetic: the figure only proves
# the pipeline.

# %% tags=["parameters"]
study = "lrn"
artifact = "unfolded"
metrics_files = []
tables = ["results/tables/lrn_unfolded.csv"]
figures = ["results/figures/lrn_unfolded.png"]
sentences = 4          # test lines shown
min_length = 6         # tokens per line (without <eos>)
max_length = 14

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from rnnrepro.analysis.lrn import load_trained, pick_sentences, sentence_weights
from rnnrepro.analysis.notebook import save, save_figure

rows, panels = [], []
for metrics_file in metrics_files:
    model, cfg, corpus = load_trained(metrics_file)
    if cfg["architecture"]["cell"] != "lrn":
        raise ValueError(f"{metrics_file}: the unfolded view needs an LRN model, got {cfg['architecture']['cell']}")
    lines = pick_sentences(corpus.test, corpus.vocab, sentences, min_length, max_length)
    with torch.no_grad():
        for number, line in enumerate(lines):
            result = sentence_weights(model, line)
            for position, (token, weight) in enumerate(zip(line, result["weights"])):
                rows.append({"model": cfg["model"], "dataset": cfg["dataset"], "corpus": cfg["corpus"],
                             "activation": result["activation"], "sentence": number, "position": position,
                             "token": corpus.vocab[token], "weight_to_last": weight})
    panels.append((cfg["model"], result["activation"]))
    budget = cfg.get("budget", "")
table = pd.DataFrame(rows)
save(table, tables[0])
table.head()

# %%
from rnnrepro.analysis.plotting import data_label

budget_words = (f"{budget} budget, " if budget else "") + \
    f"{data_label(table['dataset'].iloc[0], table['corpus'].iloc[0])} test sentences"
fig, axes = plt.subplots(len(panels), 1, figsize=(12, 1.2 + 0.6 * sentences * len(panels)), squeeze=False)
for ax, (model_id, activation) in zip(axes[:, 0], panels):
    part = table[table["model"] == model_id]
    matrix = np.full((sentences, max_length), np.nan)
    for (number, position), weight in part.set_index(["sentence", "position"])["weight_to_last"].items():
        matrix[number, position] = weight
    image = ax.imshow(matrix, aspect="auto", cmap="viridis")
    for (number, position), token in part.set_index(["sentence", "position"])["token"].items():
        ax.text(position, number, token, ha="center", va="center", fontsize=7, color="white")
    ax.set_title(f"LRN with g = {activation}: unit-averaged w(k → last) in layer 1, {budget_words}")
    ax.set_ylabel("test sentence")
    ax.set_xlabel("token position k")
    fig.colorbar(image, ax=ax, label="w(k → last), averaged over units")
fig.tight_layout()
save_figure(fig, figures[0])
