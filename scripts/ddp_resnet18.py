"""DDP ResNet18 training for issue 13's NCCL check: `torchrun --nproc-per-node 2 scripts/ddp_resnet18.py`.

NCCL where CUDA is there (one GPU per rank), gloo on the CPU otherwise. Each
rank draws its own batches from a generator seeded by its rank (data parallel).
`--deterministic` turns determinism on and pins NCCL_ALGO=Ring (what
Megatron-Core's deterministic mode asks for); `--drift-step K` makes rank
`--drift-rank` (1) add noise to `fc.bias`'s gradient after the all-reduce
at step K, so that the replicas part there.

    torchrun --nproc-per-node 2 -m opscan -- record --steps 50 -o run.jsonl --run scripts/ddp_resnet18.py --deterministic
    opscan compare --ranks run.rank0.jsonl run.rank1.jsonl
"""

import argparse
import os

import torch
import torch.distributed as dist
import torchvision


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--drift-step", type=int, default=None)
    parser.add_argument("--drift-rank", type=int, default=1)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    if args.deterministic:
        os.environ.setdefault("NCCL_ALGO", "Ring")  # before the process group: NCCL reads it at communicator creation
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).to(device)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator(device=device).manual_seed(1000 + rank)
    for step in range(args.steps):
        x = torch.randn(args.batch, 3, args.size, args.size, generator=gen, device=device)
        y = torch.randint(0, 10, (args.batch,), generator=gen, device=device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step == args.drift_step and rank == args.drift_rank:
            with torch.no_grad():
                grad = model.module.fc.bias.grad
                grad.add_(torch.randn(grad.shape, generator=gen, device=device) * 1e-3)  # this rank alone
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
