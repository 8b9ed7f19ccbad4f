"""Train a small CNN on CIFAR-shaped data, reproducibly: the corrected twin of train_bad.py."""
import os

# cuBLAS reads this once, when it starts: set it before torch does any CUDA work.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

from seeding import seed_everything


class SmallNet(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        # The feature map is 16x16 here: a fixed 4x4 average pool gives the same 4x4 output
        # as AdaptiveAvgPool2d((4, 4)), and its CUDA backward is deterministic.
        self.pool = nn.AvgPool2d(4)
        self.head = nn.Linear(64 * 4 * 4, num_classes)

    def forward(self, x):
        # Bilinear has a deterministic CUDA backward under use_deterministic_algorithms; bicubic does not.
        x = F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)
        x = self.features(x)
        x = self.pool(x)
        return self.head(torch.flatten(x, 1))


def augment(images: torch.Tensor, rng: random.Random) -> torch.Tensor:
    if rng.random() < 0.5:
        images = images.flip(-1)
    return images


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    # PYTHONHASHSEED only works when set before Python starts: `PYTHONHASHSEED=0 python train_fixed.py`.
    seed_everything(args.seed)
    rng = random.Random(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = SmallNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for step in range(args.steps):
        images = augment(torch.randn(64, 3, 32, 32, device=device), rng)
        labels = torch.randint(0, 10, (64,), device=device)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
