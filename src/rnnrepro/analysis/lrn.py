"""The `lrn` study's analyses: the LM table, the speed benchmark and the unfolded LRN.

- :func:`lm_table` joins each finetuned cell's metrics, its base cell's metrics (the checkpoint it was
  finetuned from, named in its ``config.json``) and its dynamic evaluation into one row per dataset,
  model, stage and seed: validation and test perplexity for Base, +Finetune, +Dynamic, the paper's test
  perplexities beside them (Table 6 of the paper, also in the authors' lm/README.md,
  github.com/bzhangGo/lrn); :func:`lm_summary` makes it the published table, one row per dataset, model
  and stage over its seeds.
- :func:`measure_speed` (``python -m rnnrepro.analysis.lrn speed``, run by the ``speed`` rule) times
  one training batch of each model's whole LM and one layer's forward + backward on the device it runs
  on (rnnrepro.timing), logging what it times, how far it is and about how long it should still take;
  :func:`speed_table` puts them as ratios to the first model (the LSTM) beside the paper's
  training-time ratios (the paper's Tables 1 and 2: SNLI and document classification).
- :func:`unfolded_weights`: with h_0 = 0 and g = identity an LRN layer's state is
  h_t = Σ_{k≤t} w_{k→t} ⊙ v_k with w_{k→t} = i_k ⊙ Π_{l=k+1..t} f_l (paper §4), computed
  from the gates of one pass (:func:`lrn_gates`) through cumulative sums of log f. With g = tanh the
  same product is only the gates' share of the path (tanh rescales the state at every step), so the
  notebook reads it as a gate pattern, not as an exact decomposition.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from .. import console
from ..cells import implementation
from .results import paper_values, read_cells, summarise_seeds
from .run_files import read_run_config
from ..train.files import write_text_atomic

STAGES = ("base", "finetune", "dynamic")
LOGGER = console.LOGGER.getChild("speed")  # by name: run as `python -m`, this module is __main__


# ---------------------------------------------------------------- the LM table (torch-free)

def lm_table(metrics_files: list[str], dynamic: pd.DataFrame | None, study: dict, artifact: str = "lm") -> pd.DataFrame:
    """One row per (dataset, model, stage, seed): params, val/test perplexity, the paper's test perplexity.

    Stages: ``base`` (the checkpoint a finetuned cell started from, named by ``init_from`` in its
    config.json), ``finetune`` (the cell itself) and ``dynamic`` (its dynamic evaluation, one row per
    finetuned cell in ``dynamic``; None where it was not run: then no dynamic rows, never made-up ones).
    Rows keep the finetuned model's id, so one selector names a cell across its three stages.
    """
    finetuned = read_cells(metrics_files)
    base_files, heads = [], []
    for path in map(Path, metrics_files):
        config = read_run_config(path.parent)
        init_from = config["init_from"]
        heads.append(head_name(config["architecture"].get("head")))
        if init_from is None:
            raise ValueError(f"{path.parent}: the lm table lists finetuned models only, but this cell was "
                             f"not finetuned from anything (no init_from); list its *_ft model instead")
        base_files.append(str(Path(init_from).parent / "metrics.json"))
    base = read_cells(base_files)
    keys = ["dataset", "corpus", "model", "fraction", "seed", "cell", "params", "embedding_size", "hidden_size"]
    stages = [
        finetuned[keys].assign(stage="base", val_ppl=base["val_ppl"].to_numpy(), test_ppl=base["test_ppl"].to_numpy(),
                               epochs=base["epochs"].to_numpy(), recipe=base["recipe"].to_numpy(),
                               budget=base["budget"].to_numpy()),
        finetuned[keys + ["val_ppl", "test_ppl", "epochs", "recipe", "budget"]].assign(stage="finetune"),
    ]
    if dynamic is not None:
        dyn = dynamic.rename(columns={"dynamic_valid_ppl": "val_ppl", "dynamic_test_ppl": "test_ppl",
                                      "lr": "dynamic_lr", "decay": "dynamic_decay"})
        if "val_ppl" not in dyn:  # the budget scored the test split only
            dyn["val_ppl"] = float("nan")
        dyn = finetuned[keys + ["recipe", "budget"]].merge(
            dyn[["dataset", "model", "seed", "val_ppl", "test_ppl", "dynamic_lr", "dynamic_decay"]],
            on=["dataset", "model", "seed"], how="inner")
        stages.append(dyn.assign(stage="dynamic"))
    table = pd.concat(stages, ignore_index=True)
    head_of = dict(zip(zip(finetuned["dataset"], finetuned["model"], finetuned["seed"]), heads))
    table["head"] = [head_of[key] for key in zip(table["dataset"], table["model"], table["seed"])]
    recipes = study["recipes"]
    table["weight_drop"] = [
        "as released (none)" if recipes[r]["weight_drop"] == 0
        else f"as intended ({recipes[r]['weight_drop']} on {recipes[r].get('weight_drop_targets', 'recurrent')})"
        for r in table["recipe"]]
    table["params_m"] = table["params"] / 1e6
    paper = paper_values(study, artifact)
    if not paper.empty:
        table = table.merge(paper, on=["dataset", "model"], how="left")
        for stage in STAGES:
            column = f"paper_{stage}_test_ppl"
            if column in table:
                table.loc[table["stage"] == stage, "paper_test_ppl"] = table.loc[table["stage"] == stage, column]
        table = table.drop(columns=[f"paper_{stage}_test_ppl" for stage in STAGES if f"paper_{stage}_test_ppl" in table])
    order = {m: i for i, m in enumerate(study["artifacts"][artifact]["models"])}
    datasets = {d: i for i, d in enumerate(study["artifacts"][artifact]["datasets"])}
    stage_order = {s: i for i, s in enumerate(STAGES)}
    ranks = {"dataset": datasets, "model": order, "stage": stage_order}
    return (table.sort_values(["dataset", "model", "stage", "seed"],
                              key=lambda s: s.map(ranks[s.name]) if s.name in ranks else s)
            .reset_index(drop=True))


def lm_summary(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`lm_table` over seeds, one row per (dataset, model, stage) in its order: the mean, standard
    deviation and per-seed values (``<value>_samples``, seed order: what the scorecard reads) of the
    validation and test perplexity and of the epochs trained, and the seed count."""
    values = ["val_ppl", "test_ppl", "epochs"]
    keys = [c for c in table.columns if c not in (*values, "seed")]
    summary = summarise_seeds(table, keys, values)
    order = ["val_ppl", "val_ppl_std", "test_ppl", "test_ppl_std", "paper_test_ppl", "epochs", "epochs_std", "seeds",
             "val_ppl_samples", "test_ppl_samples", "epochs_samples"]
    return summary[[c for c in summary.columns if c not in order] + order]


def capped_stages(metrics_files: list[str]) -> dict[tuple, bool]:
    """(dataset, model, stage, seed) -> whether the epoch cap stopped that stage's training run
    (``run_endings.stopped_by_epoch_cap``): the finetuned cell's for ``finetune``, the cell it was finetuned
    from for ``base``. Dynamic evaluation trains nothing and is absent."""
    finetuned = read_cells(metrics_files)
    parents = [str(Path(json.loads((Path(path).parent / "config.json").read_text())["init_from"]).parent / "metrics.json")
               for path in metrics_files]
    base = read_cells(parents)
    capped = {}
    for stage, runs in (("base", base), ("finetune", finetuned)):
        for run, own in zip(finetuned.itertuples(), runs.itertuples()):
            capped[(run.dataset, run.model, stage, run.seed)] = bool(own.capped)
    return capped


def head_name(head: dict | None) -> str:
    """The output layer a cell was trained with, as the lm table names it."""
    if head is None or head["type"] == "softmax":
        return "softmax"
    return f"mixture of {head['experts']} softmaxes"


# ---------------------------------------------------------------- parameter counts (no training)

def params_table(study: dict, run_config: dict, artifact: str) -> pd.DataFrame:
    """Exact parameter counts of the artifact's models at the paper's sizes, whatever the budget: each
    built on torch's meta device (shapes, no weights, no training) with the dataset's published
    vocabulary, beside the paper's rounded #Params (``paper.<artifact>``)."""
    import torch

    from .. import grid
    from ..data.registry import get_dataset
    from ..train.language_model import build_model

    spec, paper_config = study["artifacts"][artifact], {**run_config, "budget": "paper"}
    rows = []
    for dataset in spec["datasets"]:
        vocab = get_dataset(dataset).expected.vocab_size
        for model in spec["models"]:
            cfg = grid.resolve_cell(study, paper_config, grid.Cell(study["study"], dataset, model, 100, 0, "paper"))
            with torch.device("meta"):
                built = build_model(cfg, vocab)
            params = sum(p.numel() for p in built.parameters())
            rows.append({"dataset": dataset, "model": model, "cell": cfg["architecture"]["cell"], "vocab": vocab,
                         "params": params, "params_m": params / 1e6})
    table = pd.DataFrame(rows)
    return table.merge(paper_values(study, artifact), on=["dataset", "model"], how="left")


# ---------------------------------------------------------------- speed

def measure_speed(settings: dict, device) -> dict:
    """Seconds per training batch of each model's LM and of one of its middle layers (fwd + bwd).

    ``settings``: the study's ``speed`` block with, per model, its resolved ``architecture`` and
    ``recipe`` (the speed rule resolves them like a training cell). ``device``: where to time them.
    Random tokens, no data: speed does not depend on the text.
    """
    import torch
    import torch.nn.functional as F

    from ..cells import build_layer
    from ..timing import seconds_per_call
    from ..train.common import keep_freed_memory, provenance
    from ..train.language_model import build_model
    from ..train.optimizers import SGD

    keep_freed_memory()
    torch.manual_seed(0)
    batch, bptt, vocab = settings["batch_size"], settings["bptt"], settings["vocab_size"]
    warmup, repeats = settings["warmup"], settings["repeats"]
    threads = torch.get_num_threads()
    where = (torch.cuda.get_device_name(device) if device.type == "cuda" else
             f"cpu, {threads} thread{'' if threads == 1 else 's'}")
    LOGGER.info(f"timing the LM training batch and one layer's forward + backward of {len(settings['models'])} "
                f"models ({', '.join(settings['models'])}) at batch {batch}, BPTT {bptt}, vocabulary {vocab}, on "
                f"{where}: {warmup} warm-up calls, then about {repeats} timed calls of each")
    bar = console.progress(2 * len(settings["models"]), "speed", "measurement")

    def timed(step, what: str) -> float:
        seconds = seconds_per_call(step, warmup, repeats, what)
        bar.update()
        return seconds

    rows = []
    for model_id in settings["models"]:
        cfg = settings["cells"][model_id]
        arch, recipe = cfg["architecture"], cfg["recipe"]
        model = build_model(cfg, vocab).to(device).train()
        optimizer = SGD(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])
        tokens = torch.randint(vocab, (bptt + 1, batch), device=device)

        def lm_step():
            optimizer.zero_grad(set_to_none=True)
            out = model(tokens[:-1], model.init_state(batch))
            loss = F.cross_entropy(out.logits.reshape(-1, vocab), tokens[1:].reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe["clip"])
            optimizer.step()

        hidden = arch["hidden_size"]
        layer = build_layer(arch["cell"], hidden, hidden, **arch["cell_options"]).to(device).train()
        x = torch.randn(bptt, batch, hidden, device=device, requires_grad=True)

        def layer_step():
            layer.zero_grad(set_to_none=True)
            output, _ = layer(x, layer.init_state(batch, device))
            output.sum().backward()

        rows.append({"model": model_id, "cell": arch["cell"], "params": sum(p.numel() for p in model.parameters()),
                     "lm_seconds_per_batch": timed(lm_step, f"{model_id}: LM training batch"),
                     "layer_seconds": timed(layer_step, f"{model_id}: one layer's forward + backward"),
                     "layer_shape": f"{bptt}x{batch}x{hidden}->{hidden}"})
        LOGGER.info(f"{model_id}: LM {rows[-1]['lm_seconds_per_batch'] * 1e3:.1f} ms/batch, "
                    f"layer {rows[-1]['layer_seconds'] * 1e3:.1f} ms")
    bar.close()
    meta = {key: settings[key] for key in ("dataset", "vocab_size", "batch_size", "bptt", "warmup", "repeats")}
    return {"rows": rows, **meta, "threads": torch.get_num_threads(), **provenance(device)}


def speed_table(speed: dict, study: dict, artifact: str = "speed") -> pd.DataFrame:
    """Our seconds and ratios to the first model, beside the paper's training-time ratios per task."""
    table = pd.DataFrame(speed["rows"])
    reference = table.iloc[0]
    table["lm_ratio"] = table["lm_seconds_per_batch"] / reference["lm_seconds_per_batch"]
    table["layer_ratio"] = table["layer_seconds"] / reference["layer_seconds"]
    # the GPU's name, or the CPU's model and threads (older results name only "cpu")
    machine = speed.get("machine", {})
    threads = machine.get("threads")
    table["device"] = (f"{machine['cpu']} CPU, {threads} thread{'' if threads == 1 else 's'}"
                       if speed["device_name"] == "cpu" and machine.get("cpu") else speed["device_name"])
    table["implementation"] = [implementation(cell, speed["device"].split(":")[0]) for cell in table["cell"]]
    paper = study["paper"].get(artifact, {})
    for task, models in paper.items():
        reference_time = models[reference["model"]]["time_s"]
        table[f"paper_{task}_ratio"] = [models[m]["time_s"] / reference_time if m in models else float("nan")
                                        for m in table["model"]]
    return table


# ---------------------------------------------------------------- unfolded LRN

def lrn_gates(layer, x, h0=None) -> dict:
    """Input gates i, forget gates f, values v and states h (each (T, B, M)) of an LRN layer on x."""
    import torch

    if type(layer).__name__ != "LRNLayer":
        raise TypeError(f"the unfolded view needs an LRN layer, got {type(layer).__name__}")
    with torch.no_grad():
        q, k, v = layer.project(x).chunk(3, dim=2)
        h = layer.init_state(x.size(1), x.device, x.dtype) if h0 is None else h0
        gates_i, gates_f, states = [], [], []
        for t in range(x.size(0)):
            i, f = torch.sigmoid(k[t] + h), torch.sigmoid(q[t] - h)
            h = i * v[t] + f * h
            if layer.activation == "tanh":
                h = torch.tanh(h)
            gates_i.append(i), gates_f.append(f), states.append(h)
    return {"i": torch.stack(gates_i), "f": torch.stack(gates_f), "v": v, "h": torch.stack(states)}


def unfolded_weights(input_gates, forget_gates):
    """w[k, t] = i_k ⊙ Π_{l=k+1..t} f_l for k ≤ t, 0 for k > t; shape (T, T, B, M) from (T, B, M) gates.

    Through cumulative sums of log f (no products of many small numbers): log w[k, t] = log i_k +
    S_t - S_k with S_t = Σ_{l≤t} log f_l.
    """
    import torch

    steps = input_gates.size(0)
    cumulative = torch.cumsum(torch.log(forget_gates), dim=0)                          # S_t
    log_w = torch.log(input_gates).unsqueeze(1) + cumulative.unsqueeze(0) - cumulative.unsqueeze(1)
    later = torch.ones(steps, steps, dtype=torch.bool, device=input_gates.device).triu()  # k ≤ t
    return torch.where(later.view(steps, steps, *([1] * (input_gates.dim() - 1))), log_w.exp(),
                       torch.zeros((), dtype=log_w.dtype, device=log_w.device))


def final_state_weights(input_gates, forget_gates):
    """w[k, T] for every k: (T, B, M), the weight of each token's value in the last state."""
    import torch

    later_forget = torch.flip(torch.cumsum(torch.flip(torch.log(forget_gates), [0]), 0), [0])   # Σ_{l≥k} log f_l
    return torch.exp(torch.log(input_gates) + later_forget - torch.log(forget_gates))


def pick_sentences(tokens, vocab: list[str], count: int, min_length: int, max_length: int) -> list[list[int]]:
    """The first ``count`` lines of a token stream with min_length..max_length tokens (without <eos>)."""
    eos = vocab.index("<eos>")
    sentences, current = [], []
    for token in tokens.tolist():
        if token == eos:
            if min_length <= len(current) <= max_length:
                sentences.append(current)
                if len(sentences) == count:
                    break
            current = []
        else:
            current.append(token)
    if len(sentences) < count:
        raise ValueError(f"only {len(sentences)} test lines have {min_length}..{max_length} tokens; "
                         f"{count} were asked for: widen the range or ask for fewer")
    return sentences


def load_trained(metrics_file: str | Path):
    """(model in eval mode, config, corpus) of a trained cell, from the model.pt beside its metrics.json."""
    from ..data.corpus import load_corpus
    from ..train.checkpoint import load_weights
    from ..train.language_model import build_model

    run_dir = Path(metrics_file).parent
    saved = load_weights(run_dir / "model.pt", "cpu", "a cell whose gates this analysis reads")
    cfg = saved["config"]
    corpus = load_corpus(Path(cfg["data"]["dir"]), Path(cfg["data"]["train_file"]))
    model = build_model(cfg, len(corpus.vocab))
    model.load_state_dict(saved["state_dict"])
    return model.eval(), cfg, corpus


def sentence_weights(model, sentence: list[int]) -> dict:
    """Unit-averaged weights of each token's value in the first LRN layer's final state (h_0 = 0)."""
    import torch

    x = model.embedding(torch.tensor(sentence).unsqueeze(1))
    gates = lrn_gates(model.layers[0], x)
    weights = final_state_weights(gates["i"], gates["f"])[:, 0]          # (T, M)
    return {"weights": weights.mean(dim=1).tolist(), "activation": model.layers[0].activation}


# ---------------------------------------------------------------- command line (the speed rule)

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.analysis.lrn", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    speed = sub.add_parser("speed", help="time each model's LM and one layer; write JSON")
    speed.add_argument("--settings", required=True, help="resolved speed settings (JSON text)")
    speed.add_argument("--output", required=True, type=Path)
    from ..runtime import add_runtime_arguments, start_runtime

    add_runtime_arguments(speed)
    args = parser.parse_args(argv)
    console.setup_logging()
    try:
        settings = json.loads(args.settings)
    except json.JSONDecodeError as e:
        print(f"[rnnrepro] error: --settings is not valid JSON ({e})", file=sys.stderr)
        return 1
    result = measure_speed(settings, start_runtime(args))
    # The budget of the run (its shapes, or the paper's where `widths: paper`)
    result["budget"] = settings["budget"]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.output, json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
