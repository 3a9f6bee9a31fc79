"""The two update rules the recipes use, SGD and Adam, as torch.optim computes them on a CPU.

Why not torch.optim itself: every torch.optim optimizer imports torch._dynamo (the compiler) when it is
built and at its first step, about 1.1 CPU-seconds in each training process, as much again as importing
torch. A pipeline starts dozens of such processes (the smoke run 34, the test suite some 60), most of
them a few seconds of training each. The updates here are torch.optim's single-tensor code paths
(the ones it takes on a CPU: no momentum, no Nesterov, no AMSGrad, weight decay added to the gradient),
written out; tests/test_optimizers.py checks that they give torch.optim's weights bit for bit, and
that a checkpoint of either loads into the other.

``state_dict()`` has torch.optim's layout ({"state": {index: {...}}, "param_groups": [{..., "params":
[indices]}]}), with the same state names ("step", "exp_avg", "exp_avg_sq" for Adam; SGD keeps none), so
resume checkpoints written by torch.optim optimizers load here, and the other way round.
"""

from __future__ import annotations

from typing import Iterable

import torch

_UNSUPPORTED = ("momentum", "dampening", "nesterov", "maximize", "amsgrad", "differentiable", "capturable",
                "decoupled_weight_decay")


class _Optimizer:
    """The part both rules share: parameter groups, zero_grad, and the checkpoint state."""

    defaults: dict = {}
    torch_only: dict = {}  # the settings torch.optim's state also names, at the values these rules use

    def __init__(self, params: Iterable[torch.Tensor], **hyper) -> None:
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        self.param_groups = [{"params": params, **self.defaults, **hyper}]
        self.state: dict[torch.Tensor, dict] = {}

    def _parameters(self):
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_().zero_()

    def state_dict(self) -> dict:
        index = {id(p): i for i, p in enumerate(self._parameters())}
        groups = [{**self.torch_only, **{k: v for k, v in g.items() if k != "params"},
                   "params": [index[id(p)] for p in g["params"]]} for g in self.param_groups]
        state = {index[id(p)]: dict(s) for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, saved: dict) -> None:
        """Load a state written by this class or by the torch.optim optimizer of the same rule."""
        groups = saved["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(g["params"]) != len(mine["params"]) for g, mine in zip(groups, self.param_groups)):
            raise ValueError("the saved optimizer state has other parameter groups than this model's")
        for g in groups:
            used = [k for k in _UNSUPPORTED if g.get(k) not in (None, False, 0, 0.0)]
            if used:
                raise ValueError(f"the saved optimizer state uses {', '.join(used)}, which "
                                 f"{type(self).__name__} here does not implement")
        params = {i: p for g, mine in zip(groups, self.param_groups) for i, p in zip(g["params"], mine["params"])}
        state = {}
        for i, s in saved["state"].items():
            p = params[int(i)]
            # as torch.optim does: the step count stays where it is, the moments follow the parameter
            state[p] = {k: v if k == "step" or not torch.is_tensor(v) else v.to(dtype=p.dtype, device=p.device)
                        for k, v in s.items()}
        for g, mine in zip(groups, self.param_groups):
            for key in self.defaults:
                if key in g:
                    mine[key] = tuple(g[key]) if isinstance(g[key], list) else g[key]
        self.state = state


class SGD(_Optimizer):
    """Plain SGD: grad + weight_decay * param, then param -= lr * that (torch.optim.SGD without momentum)."""

    defaults = {"lr": 1e-3, "weight_decay": 0.0}
    torch_only = {"momentum": 0, "dampening": 0, "nesterov": False, "maximize": False, "foreach": None,
                  "differentiable": False, "fused": None}

    def __init__(self, params: Iterable[torch.Tensor], lr: float, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr=lr, weight_decay=weight_decay)

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            lr, weight_decay = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad if weight_decay == 0 else p.grad.add(p, alpha=weight_decay)
                p.add_(grad, alpha=-lr)


class Adam(_Optimizer):
    """Adam with bias correction and L2 weight decay added to the gradient (torch.optim.Adam's defaults)."""

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0}
    torch_only = {"amsgrad": False, "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                  "fused": None, "decoupled_weight_decay": False}

    def __init__(self, params: Iterable[torch.Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad if weight_decay == 0 else p.grad.add(p, alpha=weight_decay)
                state = self.state.get(p)
                if not state:
                    # torch.optim keeps the step count as a float32 tensor on the CPU
                    state = self.state[p] = {
                        "step": torch.tensor(0.0, dtype=torch.float32),
                        "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
                state["step"] += 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step = state["step"].item()
                step_size = lr / (1 - beta1 ** step)
                denom = (exp_avg_sq.sqrt() / (1 - beta2 ** step) ** 0.5).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-step_size)
