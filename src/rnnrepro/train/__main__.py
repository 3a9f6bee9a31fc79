"""Train one cell: ``python -m rnnrepro.train --run-dir DIR --config CONFIG``.

CONFIG is the cell's resolved config (JSON text or a path to a JSON file), as the train rule builds it
from the study file. Writes to DIR: ``config.json``, ``history.csv`` (per epoch), ``metrics.json``
(final numbers and provenance) and ``model.pt`` (best weights with the config). The resume checkpoint
in ``DIR/checkpoint/`` lets a killed run continue where it stopped.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from ..configuration import REPO_ROOT, ConfigError, validate_cell_config
from ..data.corpus import load_corpus
from ..models.language_model import Dropouts, LanguageModel
from . import checkpoint
from .loop import Trainer, TrainingDiverged, TrainingInterrupted

EXIT_INTERRUPTED = 143  # 128 + SIGTERM, what a scheduler expects from a job it terminated


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", required=True, type=Path, help="the cell's run folder")
    parser.add_argument("--config", required=True, help="resolved cell config: JSON text or a .json file")
    return parser.parse_args(argv)


def read_config(text: str) -> dict:
    source = "--config"
    if not text.lstrip().startswith("{"):
        source = text
        try:
            text = Path(text).read_text()
        except OSError as e:
            raise ConfigError(f"--config {source}: cannot read it ({e.strerror})") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{source}: not valid JSON ({e})") from None
    return validate_cell_config(cfg, source)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda was asked for but no CUDA device is visible; use `device: auto` or cpu")
    return torch.device(name)


def build_model(cfg: dict, vocab_size: int) -> LanguageModel:
    a, r = cfg["architecture"], cfg["recipe"]
    dropouts = Dropouts(r["dropout_kind"], r["dropout_embedding"], r["dropout_input"], r["dropout_hidden"],
                        r["dropout_output"], r["weight_drop"])
    return LanguageModel(vocab_size, a["cell"], a["embedding_size"], a["hidden_size"], a["layers"],
                         a["tie_weights"], a["cell_options"], dropouts)


def git_sha() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


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
        "epochs": len(p.history), "best_epoch": p.best_epoch,
        "best_val_loss_during_training": p.best_val_loss,
        "val_loss": val_loss, "val_ppl": math.exp(val_loss),
        "test_loss": test_loss, "test_ppl": math.exp(test_loss),
        "eval_batch_size": r["test_batch_size"],
        "train_seconds": sum(row["seconds"] for row in p.history),
        "wall_seconds": wall_seconds,
        "git_sha": git_sha(), "torch_version": torch.__version__, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    torch.save({"config": cfg, "state_dict": model.state_dict()}, run_dir / "model.pt")
    with open(run_dir / "history.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(p.history[0]))
        writer.writeheader()
        writer.writerows(p.history)
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def train(run_dir: Path, cfg: dict) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])
    device = pick_device(cfg["device"])
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
    return write_outputs(run_dir, cfg, trainer, trainer.wall_seconds(), device)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        cfg = read_config(args.config)
        metrics = train(args.run_dir, cfg)
    except (ConfigError, TrainingDiverged, FileNotFoundError) as e:
        print(f"[rnnrepro] error: {e}", file=sys.stderr)
        return 1
    except TrainingInterrupted as e:
        print(f"[rnnrepro] {e}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"[rnnrepro] done: val ppl {metrics['val_ppl']:.2f}, test ppl {metrics['test_ppl']:.2f}, "
          f"{metrics['params']:,} params, {metrics['wall_seconds']:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
