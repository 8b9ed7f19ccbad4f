"""Project helper shared by the example scripts."""
import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed NumPy and torch (CPU and every GPU)."""
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
