#!/usr/bin/env bash
# One device call: the whole GPU test suite, then the op report and a time-boxed sweep, logs under $OUT.
export PYTHONPATH=. PYTHONUNBUFFERED=1
SECONDS=0
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch,torchvision;print('torch',torch.__version__,'torchvision',torchvision.__version__,'cuda',torch.version.cuda,'cudnn',torch.backends.cudnn.version())"
timeout 290 python3 -m pytest tests/gpu -m gpu -q -p no:cacheprovider -rfE > "$OUT/pytest_gpu.log" 2>&1; echo "pytest rc=$? after ${SECONDS}s"; tail -15 "$OUT/pytest_gpu.log"
timeout 80 python3 -m opscan report --output-format json -o "$OUT/report.json" 2> "$OUT/report.err"; echo "report rc=$? after ${SECONDS}s"
python3 -m opscan report --load "$OUT/report.json" --output-format markdown -o "$OUT/report.md"
L=$(( 540 - SECONDS )); echo "sweep limit ${L}s"
if [ "$L" -gt 40 ]; then timeout -s INT $((L+25)) python3 -m opscan report --sweep --time-limit "$L" --state "$OUT/sweep-state.jsonl" --output-format json -o "$OUT/sweep.json" 2> "$OUT/sweep.err"; echo "sweep rc=$?"; python3 -m opscan report --load "$OUT/sweep.json" --output-format markdown -o "$OUT/sweep.md"; fi
tail -3 "$OUT/report.md"; tail -3 "$OUT/sweep.md" 2>/dev/null; echo "total ${SECONDS}s"
