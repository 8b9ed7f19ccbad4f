"""Fine-tune a linear probe, reproducibly: the corrected twin of finetune_bad.py."""
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch

from seeding import seed_everything

if __name__ == "__main__":
    seed_everything(1234)
    torch.use_deterministic_algorithms(True)
    probe = torch.nn.Linear(512, 10)
    features = torch.randn(256, 512)
    targets = torch.randint(0, 10, (256,))
    optimizer = torch.optim.AdamW(probe.parameters(), lr=1e-3)
    for _ in range(100):
        loss = torch.nn.functional.cross_entropy(probe(features), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
