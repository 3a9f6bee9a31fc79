"""The training's own SGD and Adam against torch.optim's: the same weights bit for bit, step after step,
and checkpoints that load either way."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import torch
from torch import nn

from rnnrepro.train.optimizers import SGD, Adam

STEPS = 25


def model_and_batches(seed: int = 0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Embedding(50, 8), nn.LSTM(8, 16))
    head = nn.Linear(16, 50)
    tokens = torch.randint(50, (STEPS + 1, 12, 4))
    return nn.ModuleList([model, head]), tokens


def loss_of(modules, batch):
    embed_lstm, head = modules
    out, _ = embed_lstm[1](embed_lstm[0](batch[:-1]))
    return nn.functional.cross_entropy(head(out).reshape(-1, 50), batch[1:].reshape(-1))


def train(modules, optimizer, tokens, steps=STEPS, lr_schedule=None):
    for i in range(steps):
        if lr_schedule:
            for group in optimizer.param_groups:
                group["lr"] = lr_schedule(i)
        optimizer.zero_grad(set_to_none=True)
        loss_of(modules, tokens[i]).backward()
        torch.nn.utils.clip_grad_norm_(modules.parameters(), 0.25)
        optimizer.step()
    return [p.detach().clone() for p in modules.parameters()]


RULES = [
    ("sgd", lambda p: SGD(p, lr=20.0, weight_decay=1.2e-6), lambda p: torch.optim.SGD(p, lr=20.0, weight_decay=1.2e-6)),
    ("sgd without weight decay", lambda p: SGD(p, lr=1.0), lambda p: torch.optim.SGD(p, lr=1.0)),
    ("adam", lambda p: Adam(p, lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-4),
     lambda p: torch.optim.Adam(p, lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-4)),
    ("adam at its defaults", lambda p: Adam(p, lr=1e-3), lambda p: torch.optim.Adam(p, lr=1e-3)),
]


@pytest.mark.parametrize("name, ours, theirs", RULES, ids=[r[0] for r in RULES])
def test_each_step_gives_torch_optims_weights_bit_for_bit(name, ours, theirs):
    a, tokens = model_and_batches()
    b, _ = model_and_batches()
    schedule = lambda i: (0.5 if i > 10 else 1.0) * (20.0 if "sgd" in name else 3e-3)  # noqa: E731
    got = train(a, ours(a.parameters()), tokens, lr_schedule=schedule)
    want = train(b, theirs(b.parameters()), tokens, lr_schedule=schedule)
    assert all(torch.equal(x, y) for x, y in zip(got, want))
    assert not all(torch.equal(x, y) for x, y in zip(got, model_and_batches()[0].parameters()))  # it trained


@pytest.mark.parametrize("name, ours, theirs", RULES, ids=[r[0] for r in RULES])
@pytest.mark.parametrize("direction", ["torch.optim to ours", "ours to torch.optim"])
def test_a_checkpoint_of_either_goes_on_in_the_other_bit_for_bit(name, ours, theirs, direction):
    """A resume checkpoint written by torch.optim (the runs recorded before the training had its own
    optimizers) goes on here as if never stopped; and the other way round."""
    first, second = (theirs, ours) if direction == "torch.optim to ours" else (ours, theirs)
    a, tokens = model_and_batches()
    opt = first(a.parameters())
    train(a, opt, tokens, steps=10)
    saved = {"model": {k: v.clone() for k, v in a.state_dict().items()}, "optimizer": opt.state_dict()}
    saved = torch.load(_round_trip(saved), weights_only=True)
    b, _ = model_and_batches(seed=1)
    b.load_state_dict(saved["model"])
    opt_b = second(b.parameters())
    opt_b.load_state_dict(saved["optimizer"])
    got = train(b, opt_b, tokens[10:], steps=STEPS - 10)

    c, _ = model_and_batches()
    want = train(c, theirs(c.parameters()), tokens)
    assert all(torch.equal(x, y) for x, y in zip(got, want))


def _round_trip(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_a_state_with_momentum_is_refused_in_words():
    model, _ = model_and_batches()
    state = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.9).state_dict()
    with pytest.raises(ValueError, match="uses momentum, which SGD here does not implement"):
        SGD(model.parameters(), lr=1.0).load_state_dict(state)


def test_a_state_of_another_model_is_refused():
    model, _ = model_and_batches()
    state = SGD(list(model.parameters())[:2], lr=1.0).state_dict()
    with pytest.raises(ValueError, match="other parameter groups"):
        SGD(model.parameters(), lr=1.0).load_state_dict(state)


def test_training_imports_no_compiler():
    """What the own optimizers are for: a training process never imports torch._dynamo (a second of CPU
    in every process); if a change brings it back, this says so."""
    code = ("import sys, torch; from torch import nn; from rnnrepro.train import language_model, autocomplete; "
            "m = nn.Linear(3, 2); "
            "o = language_model.make_optimizer(m, {'optimizer': 'sgd', 'lr': 1.0, 'weight_decay': 0.0}); "
            "m(torch.ones(1, 3)).sum().backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); o.step(); "
            "o.load_state_dict(o.state_dict()); o.zero_grad(); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
