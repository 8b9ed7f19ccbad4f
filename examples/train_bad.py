"""Train a small CNN on CIFAR-shaped data. Seeded, yet two runs give two different models.

Run `opscan lint examples/` to see why; train_fixed.py is the corrected twin.
"""
import argparse
import os
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
        self.pool = nn.AdaptiveAvgPool2d((4, 4))
        self.head = nn.Linear(64 * 4 * 4, num_classes)

    def forward(self, x):
        x = F.interpolate(x, size=(64, 64), mode="bicubic", align_corners=False)
        x = self.features(x)
        x = self.pool(x)
        return self.head(torch.flatten(x, 1))


def augment(images: torch.Tensor) -> torch.Tensor:
    if random.random() < 0.5:
        images = images.flip(-1)
    return images


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    os.environ["PYTHONHASHSEED"] = str(args.seed)
    seed_everything(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = True

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = SmallNet().to(device)
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:2"
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for step in range(args.steps):
        images = augment(torch.randn(64, 3, 32, 32, device=device))
        labels = torch.randint(0, 10, (64,), device=device)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
