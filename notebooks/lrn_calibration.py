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
# # Calibration: the mixture of softmaxes on PTB, trained by this project's trainer
#
# The LRN authors' language models are built on the mixture-of-softmaxes code (Yang et al., ICLR 2018;
# github.com/zihangdai/mos). Its issue 12 published a training log of the PTB command
# `--dropouti 0.4 --dropoutl 0.29 --dropouth 0.225 --seed 28 --batch_size 12 --lr 20.0 --nhid 960
# --nhidlast 620 --emsize 280 --n_experts 16` (PyTorch 0.4.0): 21,675,120 parameters, 1,106 batches an
# epoch, validation perplexity 267.77 after epoch 1 and 183.90 after epoch 2. Model `mos`, recipe
# `mos_published` in `config/studies/lrn.yaml` (which says how each value was read from that code): three
# nn.LSTM layers 280 -> 960 -> 960 -> 620, 16 experts through the tied decoder, every AWD regulariser,
# weight drop 0.5 on the recurrent matrices, lr 20, NT-ASGD.
#
# The paper_start budget trains its first two epochs at that size on a CPU (two seeds); the paper budget
# all of them. `val_ppl_epoch1` and `val_ppl_epoch2` are every run's validation after those epochs (the
# validation split read as 10 streams, as the authors' code). Agreement there says the model, its
# regularisers, its schedule and the data pipeline behave like the authors' at their size in the first
# epochs; it says nothing of the final perplexity (claims `mos_first_epoch_calibration`,
# `mos_second_epoch_calibration`; docs/studies/lrn.md).

# %% tags=["parameters"]
study = "lrn"
artifact = "calibration"
metrics_files = []
tables = ["results/tables/lrn_calibration.csv"]
figures = ["results/figures/lrn_calibration.png"]

# %%
from rnnrepro.analysis import calibration
from rnnrepro.analysis.notebook import save, save_figure, setup
from rnnrepro.analysis.pru import read_histories

study_config, cells = setup(study, metrics_files)
histories = read_histories(metrics_files)
table = calibration.calibration_table(cells, histories, study_config)
save(table, tables[0], complete=["val_ppl_epoch1", "params"])
table

# %% [markdown]
# Every seed's validation perplexity per epoch beside the points the authors' log printed after epochs 1
# and 2, each with the ±10 % band its claim allows.

# %%
fig = calibration.calibration_figure(table, histories, "Our trainer against the mixture of softmaxes' "
                                                       "published training log (zihangdai/mos issue 12)")
save_figure(fig, figures[0])
