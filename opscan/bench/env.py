"""Where a bench ran: GPU, clocks (read, never set), torch, CUDA, cuDNN, the date; and the cuBLAS workspace set-up.

Clocks come from pynvml where it is installed, else from `nvidia-smi
--query-gpu`; both only read. The GPU is found by its UUID
(`torch.cuda.get_device_properties(i).uuid`), so `CUDA_VISIBLE_DEVICES`
renumbering does not pick the wrong one.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone

from opscan.versions import parse_version

CUBLAS_VAR, CUBLAS_VALUE = "CUBLAS_WORKSPACE_CONFIG", ":4096:8"
# torch 2.10 removed the workspace check in deterministic mode (pytorch/pytorch#161749).
CUBLAS_CHECK_REMOVED_IN = (2, 10, 0)

_SMI_FIELDS = (
    ("sm_clock_mhz", "clocks.sm"),
    ("mem_clock_mhz", "clocks.mem"),
    ("max_sm_clock_mhz", "clocks.max.sm"),
    ("max_mem_clock_mhz", "clocks.max.mem"),
    ("gpu_temperature_c", "temperature.gpu"),
    ("power_w", "power.draw"),
    ("driver", "driver_version"),
)


def prepare_cublas(torch_version: str, cuda_started: bool) -> str | None:
    """Set CUBLAS_WORKSPACE_CONFIG=:4096:8 where this torch checks it and CUDA has not started; say who set it.

    Returns "environment" if it was already set, "opscan" if set here, None if
    not needed (torch 2.10 and later) or too late (CUDA already started: the
    deterministic variants then meet the cuBLAS alert and report it).
    The variable stays set until the bench ends (bench() puts the environment back): cuBLAS reads it once.
    """
    if os.environ.get(CUBLAS_VAR) is not None:
        return "environment"
    if parse_version(torch_version) >= CUBLAS_CHECK_REMOVED_IN or cuda_started:
        return None
    os.environ[CUBLAS_VAR] = CUBLAS_VALUE
    return "opscan"


def _number(text: str):
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        return None if text.startswith("[") or not text else text  # "[N/A]", or a version string
    return int(value) if value.is_integer() else value


def parse_smi(line: str) -> dict:
    """One `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` line, as env values."""
    values = [part.strip() for part in line.split(",")]
    out = {}
    for (key, _), value in zip(_SMI_FIELDS, values):
        out[key] = value if key == "driver" and value and not value.startswith("[") else _number(value)
    return out


def _smi(gpu: str) -> dict | None:
    query = ",".join(field for _, field in _SMI_FIELDS)
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", gpu],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or len(lines) != 1:
        return None
    return {**parse_smi(lines[0]), "clocks_from": "nvidia-smi"}


def _pynvml(gpu: str) -> dict | None:
    try:
        import pynvml
    except ImportError:
        return None
    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(int(gpu)) if gpu.isdigit() else pynvml.nvmlDeviceGetHandleByUUID(gpu)
        driver = pynvml.nvmlSystemGetDriverVersion()
        return {
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "max_mem_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "gpu_temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": round(pynvml.nvmlDeviceGetPowerUsage(h) / 1000, 1),
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "clocks_from": "pynvml",
        }
    finally:
        pynvml.nvmlShutdown()


def gpu_id(device) -> str | None:
    """How nvidia-smi and NVML name this torch device: its UUID, or its index where no device is hidden."""
    import torch

    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is not None:
        text = str(uuid)
        return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
    if os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        index = torch.device(device).index
        return str(torch.cuda.current_device() if index is None else index)
    return None


def gpu_clocks(device) -> dict:
    """The GPU's clocks, temperature, power and driver as they are now; {"clocks_from": None} if unreadable."""
    gpu = gpu_id(device)
    if gpu is None:
        return {"clocks_from": None}
    for reader in (_pynvml, _smi):
        try:
            found = reader(gpu)
        except Exception:  # noqa: BLE001 - an NVML error, an old driver: clocks are a nice-to-have
            found = None
        if found:
            return found
    return {"clocks_from": None}


def collect(device: str, *, cublas_set_by: str | None) -> dict:
    """The bench's env: date, versions, GPU and its clocks, and the settings every variant shares."""
    import torch

    cuda = torch.device(device).type == "cuda"
    env = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": platform.python_version(),
        "device": device,
        "gpu": torch.cuda.get_device_name(torch.device(device)) if cuda else None,
    }
    if cuda:
        env.update(gpu_clocks(torch.device(device)))
    deterministic_fill = getattr(getattr(torch.utils, "deterministic", None), "fill_uninitialized_memory", None)
    env.update(
        {
            "cublas_workspace_config": os.environ.get(CUBLAS_VAR),
            "cublas_workspace_config_set_by": cublas_set_by,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "fill_uninitialized_memory": deterministic_fill,
        }
    )
    return env
