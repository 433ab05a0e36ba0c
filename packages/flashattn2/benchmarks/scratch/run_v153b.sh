#!/usr/bin/env bash
# the Hopper backward at its own thresholds, (1, 16, N, 64) causal: N = 2049 (1 row in the last 64-row half,
# N % 4 == 1) and 2083 (35 rows, N % 4 == 3)
export PYTHONPATH=$PWD/packages/flashattn2/src PYTHONUNBUFFERED=1 CUDA_LAUNCH_BLOCKING=1 PYTHONWARNINGS=error::RuntimeWarning
cat > /tmp/p.py <<'PY'
import sys, torch
from flashattn2 import flash_attention
import flashattn2._triton_backward as backward
from flashattn2._inputs import check_attention_inputs
n = int(sys.argv[1])
q, k, v = (torch.randn(1, 16, n, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
print("hopper" if backward.plan_for(q, q, k, v, q, True, check_attention_inputs(q, k, v)).hopper is not None else "triton", flush=True)
flash_attention(q, k, v, causal=True).sum().backward(); torch.cuda.synchronize(); print("ok", n, flush=True)
PY
for n in 2049 2083; do echo "$n: $(timeout 28 python /tmp/p.py $n 2>&1 | grep -E '^ok|^hopper|^triton|illegal|Error' | head -2 | tr '\n' ' ' | cut -c1-160)"; done
