"""A tiny DDP training loop on gloo: MaxUnpool1d in forward (a DET100 on every rank), SGD.

`--drift` makes rank 1 add noise to its gradients after the all-reduce, so the replicas part.
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
        opt.step()
        print(f"RANK {rank} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
