"""Run one evaluation over one trained cell:

    python -m rnnrepro.evaluation --run-dir RUN_DIR --name NAME --config SPEC --output FILE --device auto --threads 2

SPEC is the evaluation's resolved settings (JSON text or a .json file) as ``evaluate.smk`` builds them
from the study file (``rnnrepro.evaluation.plan.evaluation_spec``): ``method`` (dynamic, entropy,
saliency) and that method's settings. RUN_DIR holds the cell's ``model.pt``
(weights and the config they were trained with); the data are read from that config's ``data`` paths.
FILE gets one JSON object: the cell's identity, the settings and the method's results
(docs/evaluation.md lists the keys).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from .. import console
from ..configuration import ConfigError, check_checkout, read_json_argument
from ..data.corpus import load_corpus
from ..data.registry import DataError
from ..runtime import add_runtime_arguments, start_runtime
from ..train.checkpoint import DamagedCheckpoint, load_weights
from ..train.common import provenance
from ..train.language_model import build_model
from . import dynamic, entropy, saliency
from .plan import settings_errors

RUNNERS = {"dynamic": dynamic.run, "entropy": entropy.run, "saliency": saliency.run}
CELL_KEYS = ("study", "dataset", "corpus", "model", "fraction", "seed", "budget")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.evaluation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", required=True, type=Path, help="the trained cell's run folder (model.pt)")
    parser.add_argument("--name", required=True, help="the evaluation's name in the study file")
    parser.add_argument("--config", required=True, help="resolved evaluation settings: JSON text or a .json file")
    parser.add_argument("--output", required=True, type=Path, help="JSON file to write")
    add_runtime_arguments(parser)
    return parser.parse_args(argv)


def read_spec(text: str) -> dict:
    """Parse and check the settings against the study schema's definition of an evaluation."""
    spec, source = read_json_argument(text)
    run_keys = {"name"}
    missing = sorted(run_keys - set(spec))
    if missing:
        raise ConfigError(f"{source}: missing {', '.join(missing)} (build it with rnnrepro.evaluation.plan)")
    errors = settings_errors({k: v for k, v in spec.items() if k not in run_keys})
    if errors:
        raise ConfigError(f"{source}: invalid evaluation settings:\n  " + "\n  ".join(errors[:5]))
    return spec


def load_trained(run_dir: Path, device: torch.device):
    """The cell's language model with its best weights (eval mode), its data and its training config."""
    path = run_dir / "model.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: train the cell first (snakemake {run_dir}/metrics.json)")
    saved = load_weights(path, device, "the cell this evaluation reads")
    cfg = saved["config"]
    if cfg["task"] != "lm":
        raise ConfigError(f"{path}: evaluations need a language model (task lm); this cell's task is {cfg['task']!r}")
    corpus = load_corpus(Path(cfg["data"]["dir"]), Path(cfg["data"]["train_file"]))
    model = build_model(cfg, len(corpus.vocab)).to(device)
    model.load_state_dict(saved["state_dict"])
    model.eval()
    return model, corpus, cfg


def evaluate_cell(run_dir: Path, spec: dict, device: torch.device) -> dict:
    model, corpus, cfg = load_trained(run_dir, device)
    started = time.perf_counter()
    result = RUNNERS[spec["method"]](model, corpus, spec)
    return {**{k: cfg[k] for k in CELL_KEYS}, "evaluation": spec["name"], "method": spec["method"],
            "settings": {k: v for k, v in spec.items() if k not in ("name", "method")},
            **result, "wall_seconds": time.perf_counter() - started, **provenance(device)}


def main(argv=None) -> int:
    args = parse_args(argv)
    console.setup_logging()
    try:
        check_checkout()
        spec = read_spec(args.config)
        out = evaluate_cell(args.run_dir, spec, start_runtime(args))
    except (ConfigError, DataError, FileNotFoundError, ValueError, DamagedCheckpoint) as e:
        print(f"[rnnrepro] error: {e}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_name(args.output.name + ".tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n")
    tmp.replace(args.output)
    print(f"[rnnrepro] {spec['name']} ({spec['method']}) of {args.run_dir}: {out['wall_seconds']:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
