"""A tiny DDP training loop on gloo: MaxUnpool1d in forward (a DET100 on every rank), SGD.

`--drift` makes rank 1 add noise to its gradients after the all-reduce, so the replicas part;
`--drift-step K --drift-param NAME` makes it add noise to one parameter's gradient (`fc.bias`) at step K only
(`--drift-rank R` for another rank than 1).
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn


class Replica(nn.Module):
    """Linear, then MaxUnpool1d over fixed indices: the one op the CPU's strict mode refuses."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.unpool = nn.MaxUnpool1d(2)

    def forward(self, x):
        idx = torch.arange(0, 16, 2).expand(x.shape[0], 1, 8)
        return self.unpool(self.fc(x).unsqueeze(1), idx).sum(dim=(1, 2))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--drift", action="store_true")
    parser.add_argument("--drift-step", type=int, default=None)
    parser.add_argument("--drift-param", default="fc.bias")
    parser.add_argument("--drift-rank", type=int, default=1)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Replica())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1234 + rank)
    for step in range(args.steps):
        loss = model(torch.randn(8, 4, generator=gen)).sum()
        opt.zero_grad()
        loss.backward()
        if args.drift and rank == 1:
            with torch.no_grad():
                for p in model.parameters():
                    p.grad.add_(torch.randn(p.grad.shape, generator=gen) * 1e-3)
        if step == args.drift_step and rank == args.drift_rank:
            grad = dict(model.module.named_parameters())[args.drift_param].grad
            with torch.no_grad():
                grad.add_(torch.randn(grad.shape, generator=gen) * 1e-3)  # after the all-reduce: this rank alone
        opt.step()
        print(f"RANK {rank} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
