import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"

# Lint targets the installed torch where a project declares none; the suite runs with and
# without torch installed, so it reads none (this process and the ones it starts).
# tests/lint/test_torch_target.py turns it back on where it tests that source.
os.environ["OPSCAN_IGNORE_INSTALLED_TORCH"] = "1"
# Likewise the frameworks whose release a fix depends on (opscan.lint.target.PackageVersions):
# accelerate may or may not be installed here. tests/lint/test_package_versions.py reads a fake one.
IDIOM_PACKAGES = ("accelerate", "transformers", "pytorch-lightning", "lightning")
for _name in IDIOM_PACKAGES:
    os.environ["OPSCAN_IGNORE_INSTALLED_" + _name.upper().replace("-", "_")] = "1"


def pytest_collection_modifyitems(config, items):
    """GPU tests skip cleanly where there is no CUDA device (CI), without importing torch for lint-only runs."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if not has_cuda:
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in gpu_items:
            item.add_marker(skip)
