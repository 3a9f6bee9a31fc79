"""Next-token entropies of a trained language model over a split (PRU paper, Fig. 3).

For every context c_t = (w_1 ... w_t) of the split the model's next-token distribution
p(· | c_t) has the entropy (natural log, so nats)

    H_t = − Σ_w p(w | c_t) log p(w | c_t)

A lower mean entropy means the model commits to fewer next words (the paper reads PRU's lower mean,
3.80 against LSTM's 3.93, as more confident predictions).

Contexts (the paper says only "3,687 contexts from the PTB validation set"): the split is cut into
``streams`` parallel columns as the training code batchifies it (AWD-LSTM's ``batchify``; the tail
that does not fill a row is dropped) and each column is read left to right with the state carried,
dropout off. Every position but the last of each column is a context: (rows − 1) × streams entropies.
On PTB validation (73,760 tokens) with 20 streams that is 3,687 steps per column — the paper's count,
which suggests one entropy per time step of a 20-column batch; which column(s) is not said, so we
keep all 73,740 and report the mean over all of them and over the first column alone (3,687, the
paper's count). Departure: none beyond that choice; the paper does not give its checkpoints either —
we use the cell's best-validation weights (``model.pt``).

Works for any model ``build_model`` builds: the entropy is taken of ``log_softmax(logits)``, which is
the identity on heads that already return log-probabilities (mixture of softmaxes).
"""

from __future__ import annotations

import torch

from ..data.corpus import batchify, get_batch


@torch.no_grad()
def next_token_entropies(model, tokens: torch.Tensor, streams: int, window: int = 100) -> torch.Tensor:
    """(rows − 1, streams) entropies in nats; row t, column j is the context ending at row t of column j."""
    model.eval()
    source = batchify(tokens, streams).to(next(model.parameters()).device)
    state = model.init_state(streams)
    rows = []
    for i in range(0, source.size(0) - 1, window):
        x, _ = get_batch(source, i, window)
        out = model(x, state)
        state = out.state
        log_p = torch.log_softmax(out.logits.float(), dim=-1)
        rows.append(-(log_p.exp() * log_p).sum(-1))
    return torch.cat(rows).cpu()


def run(model, corpus, spec: dict) -> dict:
    """The ``method: entropy`` evaluation: every entropy (rows × streams, 5 decimals) and their means."""
    entropies = next_token_entropies(model, getattr(corpus, spec["split"]), spec["streams"])
    return {"split": spec["split"], "streams": spec["streams"], "steps": entropies.size(0),
            "contexts": entropies.numel(), "mean_entropy": entropies.mean().item(),
            "mean_entropy_first_stream": entropies[:, 0].mean().item(),
            "entropies": [[round(v, 5) for v in row] for row in entropies.tolist()]}
