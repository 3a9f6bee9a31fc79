"""Training one language-model cell (task `lm`): word- or character-level, any recurrent cell.

Writes to the run folder: ``config.json``, ``history.csv`` (per epoch), ``metrics.json`` (final
numbers and provenance) and ``model.pt`` (best weights with the config); the resume checkpoint in
``checkpoint/`` lets a killed run continue where it stopped (rnnrepro.train.loop).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from ..data.corpus import load_corpus
from ..models.language_model import Dropouts, LanguageModel
from . import checkpoint
from .common import provenance, start_run, write_run_outputs
from .loop import Trainer


def build_model(cfg: dict, vocab_size: int) -> LanguageModel:
    a, r = cfg["architecture"], cfg["recipe"]
    dropouts = Dropouts(r["dropout_kind"], r["dropout_embedding"], r["dropout_input"], r["dropout_hidden"],
                        r["dropout_output"], r["weight_drop"])
    return LanguageModel(vocab_size, a["cell"], a["embedding_size"], a["hidden_size"], a["layers"],
                         a["tie_weights"], a["cell_options"], dropouts, init=a.get("init", "awd"))


def write_outputs(run_dir: Path, cfg: dict, trainer: Trainer, wall_seconds: float, device: torch.device) -> dict:
    p, model, r = trainer.progress, trainer.model, trainer.recipe
    trainer.load_best()
    val_loss = trainer.evaluate(trainer.corpus.valid, r["test_batch_size"])
    test_loss = trainer.evaluate(trainer.corpus.test, r["test_batch_size"])
    params = sum(t.numel() for t in model.parameters())
    metrics = {
        "study": cfg["study"], "dataset": cfg["dataset"], "corpus": cfg["corpus"], "model": cfg["model"],
        "fraction": cfg["fraction"], "seed": cfg["seed"], "budget": cfg["budget"],
        "params": params, "params_recurrent": model.recurrent_parameter_count(),
        "param_budget": cfg["architecture"].get("param_budget"), "train_tokens": trainer.corpus.train.numel(),
        "epochs": len(p.history), "best_epoch": p.best_epoch,
        "best_val_loss_during_training": p.best_val_loss,
        "val_loss": val_loss, "val_ppl": math.exp(val_loss),
        "test_loss": test_loss, "test_ppl": math.exp(test_loss),
        "eval_batch_size": r["test_batch_size"],
        "train_seconds": sum(row["seconds"] for row in p.history),
        "wall_seconds": wall_seconds,
        **provenance(device),
    }
    write_run_outputs(run_dir, cfg, model.state_dict(), p.history, metrics)
    return metrics


def train_language_model(run_dir: Path, cfg: dict) -> dict:
    device = start_run(run_dir, cfg)
    corpus = load_corpus(Path(cfg["data"]["dir"]), Path(cfg["data"]["train_file"]))
    model = build_model(cfg, len(corpus.vocab)).to(device)
    trainer = Trainer(cfg, model, corpus, run_dir, device)
    if not trainer.try_resume():
        for stale in (checkpoint.LAST, checkpoint.BEST):
            (checkpoint.checkpoint_dir(run_dir) / stale).unlink(missing_ok=True)
        if cfg["init_from"]:
            trainer.initialise_from(Path(cfg["init_from"]))
        trainer.save()
    trainer.fit()
    metrics = write_outputs(run_dir, cfg, trainer, trainer.wall_seconds(), device)
    print(f"[rnnrepro] done: val ppl {metrics['val_ppl']:.2f}, test ppl {metrics['test_ppl']:.2f}, "
          f"{metrics['params']:,} params, {metrics['wall_seconds']:.0f}s", file=sys.stderr)
    return metrics
