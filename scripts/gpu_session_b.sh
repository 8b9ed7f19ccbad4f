#!/usr/bin/env bash
# One device call: the record benchmark, the record GPU tests but the 200-step one, and a one-rank NCCL
# record under torchrun (real NCCL collectives on the GPU's torch), twice, compared.
# Usage: PYTHONPATH=. scripts/gpu_session_b.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
date -u | tee "$out/date.txt"
timeout 120 python3 benchmarks/bench_record.py --rounds 15 --json "$out/bench_record.json" 2>&1 | tail -4 | tee "$out/bench.txt"
timeout 60 python3 -m pytest tests/gpu/test_record_gpu.py -m gpu -q -x -p no:cacheprovider -k "not 200_steps" 2>&1 | tail -3 | tee "$out/tests.txt"
port=29520
for run in a b; do
  port=$((port + 1))
  timeout 40 torchrun --nproc-per-node 1 --master-port $port -m opscan -- record --steps 4 -o "$out/nccl_$run.jsonl" \
    --run scripts/ddp_resnet18.py --deterministic --batch 8 --size 64 > "$out/nccl_$run.log" 2>&1
  echo "nccl record $run rc=$?" | tee -a "$out/nccl.txt"
done
python3 - "$out" <<'PY' | tee -a "$out/nccl.txt"
import json, sys
ops = [json.loads(l) for l in open(f"{sys.argv[1]}/nccl_a.rank0.jsonl") if '"type":"op"' in l]
print("c10d ops:", sorted({o["op"] for o in ops if o["op"].startswith(("c10d", "_c10d"))}))
head = json.loads(open(f"{sys.argv[1]}/nccl_a.rank0.jsonl").readline())["env"]
print({k: head.get(k) for k in ("nccl", "world_size", "backend", "gpu", "torch")})
PY
python3 -m opscan compare "$out/nccl_a.rank0.jsonl" "$out/nccl_b.rank0.jsonl" > "$out/nccl_compare.txt" 2>&1
echo "compare a b rc=$? (0: the two runs are equal)" | tee -a "$out/nccl.txt"
tail -5 "$out/nccl_compare.txt"
