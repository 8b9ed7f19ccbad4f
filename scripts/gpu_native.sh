#!/bin/bash
# One device call for the native record engine: build it, its GPU tests, the record benchmark (docs in BENCHMARKS.md).
# Usage (on the GPU machine, from the repo root): bash scripts/gpu_native.sh OUT_DIR [pytest files...]
set -o pipefail
OUT=${1:?OUT_DIR}; shift
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} OPSCAN_NATIVE_DIR=${OPSCAN_NATIVE_DIR:-$PWD/.native}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"
python3 - <<'PY' 2>&1 | tee "$OUT/build.log"
import time
from opscan.trace import native
t = time.time()
ext = native.load(cuda=True)
print(f"native build/load: {time.time() - t:.1f} s; problem: {native.why_not(True)}")
PY
if grep -q "problem: None" "$OUT/build.log"; then :; else
  for d in "$OPSCAN_NATIVE_DIR"/record_*; do (cd "$d" && ninja 2>&1 | grep -E "error|Error" | head -40) | tee -a "$OUT/build.log"; done
  exit 1
fi
python3 -m pytest -q -m gpu -p no:cacheprovider -s "${@:-tests/gpu/test_record_native_gpu.py}" 2>&1 | tee "$OUT/tests.log"
python3 benchmarks/bench_record.py --rounds ${ROUNDS:-10} --json "$OUT/bench_record.json" 2>&1 | grep -v Warning | tee "$OUT/bench_record.log"
tar czf "$OUT/native.tgz" -C "$OPSCAN_NATIVE_DIR" . 2>/dev/null
