#!/usr/bin/env bash
# One prepared GPU session: every GPU figure of benchmarks/README.md, in one run.
#
# On a machine with a CUDA jax and the project's dependencies (netCDF4 as wheels in .whl/ where
# pip cannot reach an index):  OUT=/tmp/out bash benchmarks/gpu_session.sh
# Each part has its own time limit, so one slow part does not take the others with it.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/jaxattn-gpu}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
log() { echo "=== $* ($(date +%T))"; }

log env
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
python3 -c "import jax, jaxattn; print('jax', jax.__version__, jax.devices())"

log "sweep throughput against grid size"
timeout 170 python3 benchmarks/sweep_throughput.py --block 65536 --sizes 1,16,256,1024,4096,16384 \
  --json "$OUT/sweep_gpu.json"

log "SGLD: chains vmapped against one chain at a time"
timeout 90 python3 - <<'EOF'
import sys, json
sys.path.insert(0, "benchmarks")
import copy_throughput as c
rows = {}
for n in (256, 4096):
    v, s = c.sgld_rates(700, n, 1000)
    rows[n] = dict(vmapped=v, one_chain=s, ratio=v / s)
    print(f"| SGLD | {n} chains vmapped | P = 700 | {v:,.0f} | one chain {s:,.0f} | {v / s:.1f}x |", flush=True)
json.dump(rows, open(sys.argv[1] if len(sys.argv) > 1 else "/dev/null", "w"))
EOF

log "online SGD throughput and the draw-only bound"
timeout 100 python3 - <<'EOF'
import sys
sys.path.insert(0, "benchmarks")
import slm_throughput as s
for case in [(1000, 8, 4, 64, 1000, 300), (1000, 8, 4, 4096, 1000, 300), (100, 8, 4, 16384, 2000, 300)]:
    r = s.bench(*case, repeats=3)
    print(f"| {r['D']} | {r['L']} | {r['H']} | {r['runs']} | {r['jaxattn']:,.0f} | {r['draw_only']:,.0f} | "
          f"{r['torch_loop']:,.0f} | {r['frac_of_draw']:.0%} | {r['x_torch']:.1f}x |", flush=True)
EOF

log "order-parameter ODEs: diffrax grid against scipy"
timeout 150 python3 benchmarks/slm_ode_throughput.py --scipy-points 8

if [ -f benchmarks/copy_theory_throughput.py ]; then
  log "copy-head phase diagram"
  timeout 100 python3 benchmarks/copy_theory_throughput.py
fi
log done
