"""Weight averaging for NT-ASGD (Merity et al., 2018).

Plain SGD trains the iterate; once averaging starts, a running mean of the iterates after every step
is kept, and validation, the best checkpoint and the final evaluation use the mean (AWD-LSTM's
torch.optim.ASGD with t0=0, lambd=0 does the same; its mean starts one step later, a negligible
difference we accept for a simpler, optimizer-independent implementation).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn


class WeightAverager:
    def __init__(self):
        self.active = False
        self.count = 0
        self.mean: dict[str, torch.Tensor] = {}

    def start(self) -> None:
        self.active, self.count, self.mean = True, 0, {}

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        if not self.active:
            return
        self.count += 1
        for name, param in model.named_parameters():
            if self.count == 1:
                self.mean[name] = param.detach().clone()
            else:
                self.mean[name].add_(param.detach() - self.mean[name], alpha=1.0 / self.count)

    @contextmanager
    def averaged(self, model: nn.Module):
        """Temporarily load the mean weights into ``model`` (no-op before averaging has started)."""
        if not self.active or self.count == 0:
            yield
            return
        params = dict(model.named_parameters())
        saved = {name: p.detach().clone() for name, p in params.items()}
        with torch.no_grad():
            for name, value in self.mean.items():
                params[name].copy_(value)
        try:
            yield
        finally:
            with torch.no_grad():
                for name, value in saved.items():
                    params[name].copy_(value)

    def state_dict(self) -> dict:
        return {"active": self.active, "count": self.count, "mean": self.mean}

    def load_state_dict(self, state: dict) -> None:
        self.active, self.count, self.mean = state["active"], state["count"], state["mean"]
