"""Training one language-model cell (task `lm`): word- or character-level, any recurrent cell.

The AWD-LSTM recipe, as the PRU code runs it. Per batch: a random BPTT length (N(bptt, 5) w.p. 0.95,
N(bptt/2, 5) otherwise, at least 5), the learning rate scaled by seq_len/bptt for that step, loss =
cross entropy + AR + TAR, global gradient clipping, SGD. Per epoch: validation (with averaged weights
once NT-ASGD averaging has started), the non-monotone trigger and the best checkpoint. The LRU recipe
instead runs Adam at a fixed BPTT without clipping, stops early when validation stalls (recipe
`early_stopping`) and also scores the test stream after every epoch (`test_every_epoch`, history.csv
`test_loss`). Zaremba et al. (2014)'s recipe (optimizer `sgd`) runs plain SGD at a fixed BPTT with a
step schedule: the rate is multiplied by `lr_decay` at the start of every epoch from `lr_decay_start`
on (``epoch_lr``; derived from the epoch, so a resumed run continues on the same rates). At the end
the best weights (recipe `score: final`: the last epoch's, as Zaremba et al.'s code) are evaluated on
the validation and test streams with the test batch size. The loop
itself (resume, SIGTERM, divergence, the run files) is rnnrepro.train.loop.

Writes to the run folder: ``config.json``, ``history.csv`` (per epoch), ``metrics.json`` (final
numbers and provenance) and ``model.pt`` (best weights with the config); ``checkpoint/last.pt`` lets a
killed run continue where it stopped, ``checkpoint/best.pt`` holds the weights to score (the best so
far, or the last with `score: final`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .. import console, precision
from ..cells import detach_state
from ..data.corpus import batchify, check_batch_sizes, get_batch, load_corpus
from ..models.language_model import DEFAULT_INIT_RANGE, Dropouts, LanguageModel
from . import checkpoint, optimizers, unigram
from .averaging import WeightAverager
from .loop import Progress, Step, TrainingDiverged, perplexity, run_cell
from .stopping import patience_ended


def build_model(cfg: dict, vocab_size: int) -> LanguageModel:
    a, r = cfg["architecture"], cfg["recipe"]
    dropouts = Dropouts(r["dropout_kind"], r["dropout_embedding"], r["dropout_input"], r["dropout_hidden"],
                        r["dropout_output"], r["weight_drop"], r.get("weight_drop_targets", "recurrent"))
    return LanguageModel(vocab_size, a["cell"], a["embedding_size"], a["hidden_size"], a["layers"],
                         a["tie_weights"], a["cell_options"], dropouts, init=a.get("init", "awd"),
                         init_range=a.get("init_range", DEFAULT_INIT_RANGE), head=a.get("head"),
                         last_hidden_size=a.get("last_hidden_size"))



def make_optimizer(model: LanguageModel, recipe: dict) -> optimizers.SGD | optimizers.Adam:
    """Adam for `adam`; plain SGD otherwise (NT-ASGD's averaging is the WeightAverager's job, the `sgd`
    schedule ``epoch_lr``'s)."""
    if recipe["optimizer"] == "adam":
        return optimizers.Adam(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])
    return optimizers.SGD(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])


def epoch_lr(recipe: dict, epoch: int) -> float:
    """The learning rate of an epoch (counted from 1): `lr`, under `sgd` lowered by its step schedule,
    lr * lr_decay ** max(0, epoch - lr_decay_start + 1)."""
    if recipe["optimizer"] != "sgd":
        return recipe["lr"]
    return recipe["lr"] * recipe["lr_decay"] ** max(0, epoch - recipe["lr_decay_start"] + 1)


def training_step(model: LanguageModel, optimizer: optimizers.SGD | optimizers.Adam, recipe: dict, x: torch.Tensor,
                  y: torch.Tensor, state: list, precision_name: str = precision.DEFAULT,
                  epoch: int = 1) -> tuple[torch.Tensor, list]:
    """One optimizer step on a BPTT window of ``epoch``; returns the window's cross entropy and the
    carried state. The cross entropy is right for both heads: of logits (softmax) and of
    log-probabilities (mixture of softmaxes), whose log-sum-exp is already 0."""
    for group in optimizer.param_groups:
        group["lr"] = epoch_lr(recipe, epoch) * x.size(0) / recipe["bptt"]
    with precision.autocast(precision_name, x.device):
        out = model(x, [detach_state(s) for s in state])
        ce = F.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), y.reshape(-1))
        loss = ce
        if recipe["ar_alpha"]:
            loss = loss + recipe["ar_alpha"] * out.last_dropped.pow(2).mean()
        if recipe["tar_beta"]:
            loss = loss + recipe["tar_beta"] * (out.last_raw[1:] - out.last_raw[:-1]).pow(2).mean()
    if not torch.isfinite(loss):
        raise TrainingDiverged(f"the training loss is {loss.item()}")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if recipe["clip"] is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe["clip"])
    optimizer.step()
    return ce.detach(), out.state


@torch.no_grad()
def evaluate(model: LanguageModel, data: torch.Tensor, batch_size: int, bptt: int, device: torch.device,
             precision_name: str = precision.DEFAULT, what: str = "evaluation") -> float:
    """Mean cross entropy (nats per token) over every prediction in the stream, carrying the state;
    ``what`` names it in the progress lines (a paper-size evaluation at batch 1 takes minutes)."""
    model.eval()
    source = batchify(data, batch_size).to(device)
    state = model.init_state(batch_size)
    total, count = 0.0, 0
    starts = range(0, source.size(0) - 1, bptt)
    with console.progress(len(starts), what, "window") as bar:
        for i in starts:
            x, y = get_batch(source, i, bptt)
            with precision.autocast(precision_name, device):
                out = model(x, state)
                total += F.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), y.reshape(-1),
                                         reduction="sum").item()
            state = out.state
            count += y.numel()
            bar.update()
    return total / count


def is_non_monotone(val_loss: float, earlier: list[dict], nonmono: int) -> bool:
    """AWD-LSTM's test: worse than the best of all but the last `nonmono` earlier epochs."""
    seen = [row["val_loss"] for row in earlier]
    return len(seen) > nonmono and val_loss > min(seen[:-nonmono])


class LanguageModelTask:
    """The language-model task for rnnrepro.train.loop."""
    position_unit = "row"      # of the batchified training stream
    advice = "`lr` or `clip`"
    check_at_start = False

    def __init__(self, cfg: dict, run_dir: Path, device: torch.device):
        self.cfg, self.device, self.recipe = cfg, device, cfg["recipe"]
        self._unigram_loss: float | None = None
        self.precision = cfg["precision"]
        self.corpus = load_corpus(Path(cfg["data"]["dir"]), Path(cfg["data"]["train_file"]))
        r = self.recipe
        check_batch_sizes(self.corpus, {
            "train": ("batch_size", r["batch_size"]), "test": ("test_batch_size", r["test_batch_size"]),
            "valid": max(("eval_batch_size", r["eval_batch_size"]), ("test_batch_size", r["test_batch_size"]),
                         key=lambda pair: pair[1])})
        self.model = build_model(cfg, len(self.corpus.vocab)).to(device)
        self.best_path = checkpoint.checkpoint_dir(run_dir) / checkpoint.BEST
        self.train_data = batchify(self.corpus.train, self.recipe["batch_size"]).to(device)
        self.optimizer = make_optimizer(self.model, self.recipe)
        self.averager = WeightAverager()
        if self.recipe["optimizer"] == "asgd":
            self.averager.start()
        self.bptt_rng = np.random.default_rng(cfg["seed"])
        self.hidden: list | None = None  # the state carried between the BPTT windows of an epoch

    # ---- state ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        hidden = None if self.hidden is None else [detach_state(s) for s in self.hidden]
        return {"averager": self.averager.state_dict(), "bptt_rng": self.bptt_rng.bit_generator.state,
                "hidden": hidden}

    def load_state_dict(self, state: dict, progress: Progress) -> None:
        self.averager.load_state_dict(state["averager"])
        self.bptt_rng.bit_generator.state = state["bptt_rng"]
        self.hidden = state["hidden"]
        if progress.best_val_loss < float("inf"):  # the weights the final evaluation needs
            if not self.best_path.exists():
                raise checkpoint.DamagedCheckpoint(self.best_path, "it is missing")
            checkpoint.load(self.best_path, self.device)

    # ---- training ------------------------------------------------------------------------
    def start(self, progress: Progress) -> None:
        """Finetuning: start from another cell's best weights; they are the first 'best'."""
        if not self.cfg["init_from"]:
            return
        saved = checkpoint.load_weights(Path(self.cfg["init_from"]), self.device, "the cell this one finetunes")
        self.model.load_state_dict(saved["state_dict"])
        progress.best_val_loss, progress.best_epoch = self._validate("validation of the starting weights"), 0
        self.save_best()

    def epoch_length(self) -> int:
        return self.train_data.size(0) - 1

    def fraction_done(self, progress: Progress) -> float:
        length = self.epoch_length()
        return min(1.0, ((progress.epoch - 1) * length + progress.position) / (self.recipe["epochs"] * length))

    def _seq_len(self) -> int:
        r = self.recipe
        if not r["variable_bptt"]:
            return r["bptt"]
        base = r["bptt"] if self.bptt_rng.random() < 0.95 else r["bptt"] / 2
        seq_len = max(5, int(self.bptt_rng.normal(base, 5)))
        return min(seq_len, r["seq_len_cap"]) if r["seq_len_cap"] else seq_len

    def batches(self, progress: Progress) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self.model.train()
        if progress.position == 0:
            self.hidden = None
        # AWD-LSTM's loop bound: every batch has at least two time steps (TAR needs a difference).
        while progress.position < self.train_data.size(0) - 2:
            yield get_batch(self.train_data, progress.position, self._seq_len())

    def step(self, batch: tuple[torch.Tensor, torch.Tensor], progress: Progress) -> Step:
        x, y = batch
        state = self.hidden if self.hidden is not None else self.model.init_state(self.recipe["batch_size"])
        ce, self.hidden = training_step(self.model, self.optimizer, self.recipe, x, y, state, self.precision,
                                        epoch=progress.epoch)
        self.averager.update(self.model)
        return Step(loss=ce.item(), items=y.numel(), advance=x.size(0))

    def check_due(self, progress: Progress) -> bool:
        return progress.position >= self.train_data.size(0) - 2  # the epoch is over

    # ---- validation ----------------------------------------------------------------------
    def evaluate(self, data: torch.Tensor, batch_size: int, what: str) -> float:
        return evaluate(self.model, data, batch_size, self.recipe["bptt"], self.device, self.precision, what)

    def _validate(self, what: str = "validation") -> float:
        with self.averager.averaged(self.model):
            return self.evaluate(self.corpus.valid, self.recipe["eval_batch_size"], what)

    def validate(self, progress: Progress) -> dict:
        r, p = self.recipe, progress
        val_loss = self._validate(f"epoch {p.epoch} validation")
        if r["test_every_epoch"]:
            with self.averager.averaged(self.model):
                test_loss = self.evaluate(self.corpus.test, r["test_batch_size"], f"epoch {p.epoch} test")
        return {
            "epoch": p.epoch,
            "train_loss": p.loss_sum / p.loss_batches,
            "train_ppl": perplexity(p.loss_sum / p.loss_batches),
            "val_loss": val_loss,
            "val_ppl": perplexity(val_loss),
            **({"test_loss": test_loss} if r["test_every_epoch"] else {}),
            "lr": epoch_lr(r, p.epoch),
            "averaging": self.averager.active,
            "seconds": p.check_seconds,
            "tokens_per_s": p.check_items / p.check_seconds,
        }

    def after_validation(self, row: dict, progress: Progress) -> None:
        r, p = self.recipe, progress
        for group in self.optimizer.param_groups:
            group["lr"] = epoch_lr(r, p.epoch)
        val_loss = row["val_loss"]
        non_monotone = is_non_monotone(val_loss, p.history[:-1], r["nonmono"])
        if val_loss < p.best_val_loss:
            p.best_val_loss, p.best_epoch = val_loss, p.epoch
        if p.best_epoch == p.epoch or r.get("score") == "final":
            self.save_best()  # the weights the final evaluation scores
        if non_monotone and r["stop_on_nonmono"]:
            p.finished = True
        elif non_monotone and r["optimizer"] == "nt_asgd" and not self.averager.active:
            self.averager.start()
        if self.patience_ended(p.history) or p.epoch >= r["epochs"]:
            p.finished = True

    def stopped_by_its_rules(self, progress: Progress) -> bool:
        """Whether the recipe's own stopping rules ended training (early stopping, the non-monotone stop),
        rather than its epoch cap: a finished cell whose cap is raised goes on only in the second case."""
        r, history = self.recipe, progress.history
        if not history:
            return False
        non_monotone = r["stop_on_nonmono"] and is_non_monotone(history[-1]["val_loss"], history[:-1], r["nonmono"])
        return non_monotone or self.patience_ended(history)

    def patience_ended(self, history: list[dict]) -> bool:
        return patience_ended(self.recipe["early_stopping"], history, lambda: self.unigram_loss())

    def unigram_loss(self) -> float:
        """The validation loss of predicting the training split's token frequencies (metrics.json's
        ``val_unigram_loss``, and the plateau `early_stopping.after_plateau` waits to leave)."""
        if self._unigram_loss is None:
            self._unigram_loss = unigram.token_loss(self.corpus.train.cpu().numpy(), self.corpus.valid.cpu().numpy(),
                                                    len(self.corpus.vocab))
        return self._unigram_loss

    def report(self, row: dict, progress: Progress) -> str:
        return (f"epoch {row['epoch']}: train ppl {row['train_ppl']:.2f}, val ppl {row['val_ppl']:.2f}, "
                f"{row['seconds']:.1f}s, {row['tokens_per_s']:.0f} tok/s")

    def save_best(self) -> None:
        with self.averager.averaged(self.model):
            checkpoint.save_atomic(self.model.state_dict(), self.best_path)

    # ---- the end -------------------------------------------------------------------------
    def final_metrics(self, progress: Progress) -> dict:
        cfg, r, p, model = self.cfg, self.recipe, progress, self.model
        model.load_state_dict(checkpoint.load(self.best_path, self.device))
        val_loss = self.evaluate(self.corpus.valid, r["test_batch_size"], "final validation")
        test_loss = self.evaluate(self.corpus.test, r["test_batch_size"], "final test")
        return {
            "study": cfg["study"], "dataset": cfg["dataset"], "corpus": cfg["corpus"], "model": cfg["model"],
            "fraction": cfg["fraction"], "seed": cfg["seed"], "budget": cfg["budget"],
            "params": sum(t.numel() for t in model.parameters()),
            "params_recurrent": model.recurrent_parameter_count(),
            "param_budget": cfg["architecture"].get("param_budget"), "train_tokens": self.corpus.train.numel(),
            "epochs": len(p.history), "best_epoch": p.best_epoch,
            "scored_epoch": len(p.history) if r.get("score") == "final" else p.best_epoch,
            "best_val_loss_during_training": p.best_val_loss,
            "val_loss": val_loss, "val_ppl": perplexity(val_loss),
            "test_loss": test_loss, "test_ppl": perplexity(test_loss),
            "val_unigram_loss": self.unigram_loss(),
            "eval_batch_size": r["test_batch_size"],
            "train_seconds": sum(row["seconds"] for row in p.history),
        }

    def summary(self, metrics: dict) -> str:
        return f"val ppl {metrics['val_ppl']:.2f}, test ppl {metrics['test_ppl']:.2f}"


def train_language_model(run_dir: Path, cfg: dict, device: torch.device) -> dict:
    return run_cell(run_dir, cfg, device, LanguageModelTask)
