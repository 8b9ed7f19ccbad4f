#!/usr/bin/env bash
# Issue 13's NCCL acceptance, on a machine with 2 GPUs (nvidia-h200-x2): DDP ResNet18, determinism on,
# ranks equal and two runs equal over 50 steps; an injected drift found at its step and parameter.
# Usage: PYTHONPATH=. scripts/gpu_ddp_check.sh OUT_DIR
set -uo pipefail
out=${1:-/tmp/ddp-check}
mkdir -p "$out"
run() { torchrun --nproc-per-node 2 --master-port "$1" -m opscan -- record --steps "${STEPS:-50}" -o "$out/$2.jsonl" --run scripts/ddp_resnet18.py --deterministic "${@:3}"; }
python3 -c "import torch; print(torch.__version__, torch.cuda.nccl.version(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])" | tee "$out/env.txt"
run 29511 a > "$out/a.log" 2>&1; echo "record a rc=$?"
run 29512 b > "$out/b.log" 2>&1; echo "record b rc=$?"
python3 -m opscan compare --ranks "$out"/a.rank*.jsonl > "$out/ranks_a.txt" 2>&1; echo "ranks of a equal: rc=$? (0 = equal)"
python3 -m opscan compare "$out/a.rank0.jsonl" "$out/b.rank0.jsonl" > "$out/ab0.txt" 2>&1; echo "a vs b rank 0: rc=$? (0 = equal)"
python3 -m opscan compare "$out/a.rank1.jsonl" "$out/b.rank1.jsonl" > "$out/ab1.txt" 2>&1; echo "a vs b rank 1: rc=$? (0 = equal)"
STEPS=10 run 29513 drift --drift-step 4 > "$out/drift.log" 2>&1; echo "record drift rc=$?"
python3 -m opscan compare --ranks "$out"/drift.rank*.jsonl > "$out/ranks_drift.txt" 2>&1; echo "drift found: rc=$? (1 = found)"
head -30 "$out/ranks_drift.txt"
