"""Gradient saliency of the input words for the next-word prediction, and the top-5 next words
(PRU paper, Table 2).

For a word sequence w_1 ... w_T read from a zero state (dropout off) and the word w_{T+1} that follows
it in the text, the loss is L = − log p(w_{T+1} | w_1 ... w_T) and the saliency of input word t is the
squared norm of the loss gradient at its embedding e_t = E[w_t]:

    s_t = || ∂L / ∂e_t ||²

(the gradient at the embedding *output* of position t, not at the embedding matrix: a word that
occurs twice gets two saliencies, and with tied weights the decoder's use of E does not enter).
Beside it, the model's five most probable next words after w_T with their probabilities, and the
probability it gives the true w_{T+1}.

Sequences (the paper shows a few PTB test sentences and does not say how they were picked): the
first ``sequences`` sentences (lines, split at ``<eos>``) of the split that have at least ``length``
+ 1 words; each gives its first ``length`` words as the input and word ``length`` + 1 as the target.
A fixed rule, so LSTM and PRU are shown the same sequences.

Works for any model ``build_model`` builds (``log_softmax`` is the identity on log-probabilities).
"""

from __future__ import annotations

import torch

from ..data.registry import EOS
from .dynamic import eval_mode_with_gradients


def pick_sequences(tokens: torch.Tensor, eos_id: int, count: int, length: int) -> list[torch.Tensor]:
    """The first ``count`` sentences with at least ``length`` + 1 words, cut to ``length`` + 1 tokens."""
    picked, start = [], 0
    ends = (tokens == eos_id).nonzero().flatten().tolist() + [tokens.numel()]
    for end in ends:
        if end - start >= length + 1:
            picked.append(tokens[start : start + length + 1])
            if len(picked) == count:
                return picked
        start = end + 1
    raise ValueError(f"only {len(picked)} sentences of the split have at least {length + 1} words; "
                     f"{count} were asked for: lower `sequences` or `length` in the study's saliency evaluation")


def saliency(model, words: torch.Tensor, target: int, top: int = 5) -> dict:
    """Saliency of each input word for predicting ``target`` after ``words``, and the top next words."""
    captured = {}

    def keep_embedding(module, inputs, output):
        output.retain_grad()
        captured["embedded"] = output

    device = next(model.parameters()).device
    handle = model.embedding.register_forward_hook(keep_embedding)
    try:
        with eval_mode_with_gradients(model):
            out = model(words.reshape(-1, 1).to(device), model.init_state(1))
            log_p = torch.log_softmax(out.logits[-1, 0].float(), dim=-1)
            loss = -log_p[target]
            model.zero_grad(set_to_none=True)
            loss.backward()
    finally:
        handle.remove()
    grad = captured["embedded"].grad[:, 0]
    probabilities, indices = log_p.detach().exp().topk(top)
    return {"saliency": grad.pow(2).sum(-1).tolist(), "top_ids": indices.tolist(),
            "top_probabilities": probabilities.tolist(), "target_probability": log_p[target].exp().item()}


def run(model, corpus, spec: dict) -> dict:
    """The ``method: saliency`` evaluation: per sequence its words, the target, saliencies, top-5."""
    vocab = corpus.vocab
    if EOS not in vocab:
        raise ValueError(f"saliency picks sentences at {EOS}, which this vocabulary lacks: it needs a word-level "
                         "corpus; remove the saliency evaluation from this cell's artifacts")
    sequences = pick_sequences(getattr(corpus, spec["split"]), vocab.index(EOS), spec["sequences"], spec["length"])
    rows = []
    for sequence in sequences:
        words, target = sequence[:-1], int(sequence[-1])
        result = saliency(model, words, target)
        rows.append({"words": [vocab[i] for i in words.tolist()], "target": vocab[target],
                     "saliency": result["saliency"], "top_words": [vocab[i] for i in result["top_ids"]],
                     "top_probabilities": result["top_probabilities"],
                     "target_probability": result["target_probability"]})
    model.zero_grad(set_to_none=True)
    return {"split": spec["split"], "length": spec["length"], "sequences": rows}
