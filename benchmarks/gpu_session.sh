#!/usr/bin/env bash
# One prepared GPU session (issue 35, item 6): the GPU figures of benchmarks/README.md in one
# device lease, at most 9 minutes of wall time with the install of the wheels the device lacks.
#
#   OUT=$OUT bash benchmarks/gpu_session.sh     on the device (the run tool, carry [".whl"])
#   bash benchmarks/gpu_session.sh --dry        every part at toy size on the CPU, the tests collected only (CI; under 3 minutes)
#
# The parts, the most important first, so that a run cut short still has them: env; the main job
# (`jaxattn slm train`) cold, then warm; online SGD against the draw-only bound, D = 1000 and 100,
# 64 to 16384 runs; the sweep, 1 to 65536 points; SGLD, 256 to 65536 chains; the ODE grid, 32 to
# 4096 points, against scipy; the landscape sampler (--quick); the L = 32 phase-diagram sweep
# (examples/copy_phase_diagram.toml, in full on the device, target 63 s, cut at 70 s); the
# default tests. Each part runs under its own time limit (the PARTS table at the bottom: seconds
# on the device, seconds dry). On the device the parts run one after another, and the limits of
# all of them but the tests sum to 470 s; the tests get what is left of the 540 s budget (at least
# 70 s), and a part that would start with under 10 s left is skipped. A part stopped by its limit
# gets rc 124 (137 if it had to be killed), and the run goes on. Dry, on the CPU, the parts run in
# two lanes side by side (two cores; there the figures mean nothing).
#
# Results: one JSON object, rewritten after every part (a run cut short keeps the parts done):
# the revision, then per part its name, rc, wall seconds, limit, the figures from the benchmark's
# own JSON file, the JSON objects it printed, and the tail of its output.
#   device run: benchmarks/results/DATE-gpu.json, and $OUT/DATE-gpu.json when OUT is set, with
#     $OUT/session.log (everything printed), $OUT/tests.log and $OUT/main.nc beside it, and nothing
#     else there (at most 8 files come back from the device). It exits 0 whatever failed.
#   --dry: $OUT/DATE-gpu-dry.json, OUT a new temporary folder unless set; nothing is written into
#     benchmarks/results. It exits 1 if any part failed, so CI catches a stale script.
#
# Wheels: the device's image lacks blackjax, pymbar, netCDF4, cftime, numexpr, arviz,
# xarray-einstats, h5netcdf, submitit and platformdirs (arviz needs it). They travel as wheels in
# .whl/ (git ignores it through .git/info/exclude), one version each, made once with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     --platform manylinux1_x86_64 -d .whl NAME==VERSION
# and are installed with --no-deps into a folder put first on PYTHONPATH; the project itself
# travels as source (PYTHONPATH=$PWD, `python3 -m jaxattn` for the command line). Without .whl/
# (CI) the install is skipped.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
DRY=0
for a in "$@"; do
  case $a in
    --dry) DRY=1 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: bash benchmarks/gpu_session.sh [--dry]" >&2; exit 2 ;;
  esac
done
export DRY PYTHONUNBUFFERED=1
BUDGET=540      # seconds from the start to the end of the last part, the install included
DATE=$(date +%F)
WORK=$(mktemp -d /tmp/jaxattn-gpu-session.XXXXXX)  # scratch: stores, caches, each part's output
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/parts"
if [ "$DRY" = 1 ]; then
  OUT=${OUT:-$(mktemp -d /tmp/jaxattn-gpu-dry.XXXXXX)}
  RESULTS=("$OUT/$DATE-gpu-dry.json")
else
  RESULTS=("benchmarks/results/$DATE-gpu.json")
  [ -n "${OUT:-}" ] && RESULTS+=("$OUT/$DATE-gpu.json")
fi
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT" benchmarks/results
if [ "$DRY" = 0 ]; then
  exec > >(tee -a "$OUT/session.log") 2>&1
  TEE=$!
fi
export OUT WORK
# one fresh cache for the run (the main job's cold start is cold), nothing left in ~/.cache
export JAXATTN_CACHE_DIR=$WORK/cache
log() { echo "=== $* ($(date +%T), $(( $(date +%s) - T0 )) s)"; }

# the revision: git where the checkout has it (the device's copy may not), and always a hash of
# the package's source (rerun that pipeline on a checkout to match it)
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$REV" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  REV="$REV+dirty"
fi
SRC=$(find jaxattn -name '*.py' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
export REV SRC T0 DATE

# --------------------------------------------------------------------------- the record
cat > "$WORK/assemble.py" <<'EOF'
"""Rewrite the session's JSON from $WORK/parts: one entry per part, whatever state it is in."""
import glob, json, os, platform, re, sys, time

work, dry = os.environ["WORK"], os.environ["DRY"] == "1"
parts = []
for meta in sorted(glob.glob(os.path.join(work, "parts", "*.meta"))):
    base = meta[:-5]
    m = dict(line.split("=", 1) for line in open(meta).read().split())
    p = {"name": m["name"], "rc": None if m["rc"] == "" else int(m["rc"]), "wall_s": float(m["wall"]),
         "limit_s": int(m["limit"])}
    p["status"] = ("skipped" if m["rc"] == "" else "ok" if p["rc"] == 0
                   else "timeout" if p["rc"] in (124, 137) else "failed")
    if os.path.exists(base + ".json"):  # the benchmark's own JSON file
        try:
            p["figures"] = json.load(open(base + ".json"))
        except ValueError as e:
            p["figures_error"] = str(e)
    if os.path.exists(base + ".jsonl"):  # or its rows, one a line, as they came
        rows = []
        for line in open(base + ".jsonl").read().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass  # a line cut by the time limit
        p["figures"] = rows
    lines = open(base + ".log", errors="replace").read().splitlines() if os.path.exists(base + ".log") else []
    printed = []
    for line in lines:
        if line.startswith("{") and line.rstrip().endswith("}"):
            try:
                printed.append(json.loads(line))
            except ValueError:
                pass
    if printed:
        p["printed_json"] = printed
    if m["name"] == "tests":  # per-test results (-v): they survive a run stopped by its limit
        res = {}
        for line in lines:
            g = re.search(r"\b(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b (tests/\S+)", line)
            if g:
                res[g.group(2)] = g.group(1)
        counts = {}
        for v in res.values():
            counts[v] = counts.get(v, 0) + 1
        p["counts"] = counts
        p["failed"] = sorted(k for k, v in res.items() if v in ("FAILED", "ERROR"))
        p["summary"] = [l for l in lines if re.match(r"^=+ .*\d+ (passed|failed|error)", l)]
    p["tail"] = [l[:400] for l in lines[-40:]]
    parts.append(p)
doc = {"session": "dry" if dry else "gpu", "date": os.environ["DATE"], "revision": os.environ["REV"],
       "source_sha256_16": os.environ["SRC"], "machine": f"{platform.machine()}, {os.cpu_count()} cores",
       "elapsed_s": int(time.time()) - int(os.environ["T0"]),
       "failed": [p["name"] for p in parts if p["status"] in ("failed", "timeout")],
       "skipped": [p["name"] for p in parts if p["status"] == "skipped"], "parts": parts}
for path in sys.argv[1:]:
    tmp = f"{path}.{os.getpid()}.tmp"  # two lanes (dry) may write at once
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)
EOF
# part ID NAME LIMIT DRY_LIMIT FUNCTION: FUNCTION under its limit, its output in $WORK/parts (and
# $OUT/tests.log for the tests); the function may write its figures to PART_JSON (one JSON
# document) or PART_JSONL (one JSON object a line, appended as they come).
# On the device the output is shown as it comes; dry, where two parts run at a time, once done.
part() {
  local id name=$2 limit=$3 fn=$5 left start rc wall
  [ "$DRY" = 1 ] && limit=$4
  id=$(printf '%02d-%s' "$1" "$name")
  if [ "$DRY" = 0 ]; then
    left=$(( BUDGET - ($(date +%s) - T0) ))
    [ "$name" = tests ] && limit=$left
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 10 ]; then
      log "$name: skipped, ${left} s left"
      printf 'name=%s rc= wall=0 limit=0\n' "$name" > "$WORK/parts/$id.meta"
      python3 "$WORK/assemble.py" "${RESULTS[@]}"
      return
    fi
  fi
  export PART_JSON=$WORK/parts/$id.json PART_JSONL=$WORK/parts/$id.jsonl
  local logf=$WORK/parts/$id.log
  start=$(date +%s.%N)
  if [ "$DRY" = 0 ]; then
    log "$name (limit $limit s)"
    timeout -k 5 "$limit" bash -c "$fn" 2>&1 | tee "$logf"
    rc=${PIPESTATUS[0]}
  else
    timeout -k 5 "$limit" bash -c "$fn" > "$logf" 2>&1
    rc=$?
  fi
  wall=$(echo "$start $(date +%s.%N)" | awk '{printf "%.2f", $2 - $1}')
  [ "$name" = tests ] && [ "$DRY" = 0 ] && cp "$logf" "$OUT/tests.log"
  if [ "$DRY" = 1 ]; then  # in one write, so that the two lanes' outputs do not mix
    { log "$name (limit $limit s)"; cat "$logf"; echo "--- $name: rc $rc, $wall s"; } > "$logf.shown"
    cat "$logf.shown"
  else
    echo "--- $name: rc $rc, $wall s"
  fi
  printf 'name=%s rc=%s wall=%s limit=%s\n' "$name" "$rc" "$wall" "$limit" > "$WORK/parts/$id.meta"
  python3 "$WORK/assemble.py" "${RESULTS[@]}"
}

# --------------------------------------------------------------------------- the parts
SITE=/tmp/site
[ "$DRY" = 1 ] && SITE=$WORK/site
export SITE
wheels() {  # dry: only that the wheels install for the device's python (3.12); they are not used here
  local flags=()
  [ "$DRY" = 1 ] && flags=(--only-binary=:all: --python-version 3.12 --implementation cp
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64)
  ls .whl/*.whl &&
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "${flags[@]}" \
      --target "$SITE" .whl/*.whl
}

env_() {
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
  else
    echo "no nvidia-smi"
  fi
  echo "revision $REV, source sha256 $SRC, $(nproc) cores, python $(python3 -c 'import sys; print(sys.version.split()[0])')"
  python3 - <<'EOF'
import importlib.metadata as md, json
import jax, jaxattn
names = ["jax", "jaxlib", "jax-cuda13-plugin", "numpy", "scipy", "diffrax", "equinox", "optax", "numpyro",
         "flax", "xarray", "blackjax", "pymbar", "netCDF4", "cftime", "numexpr", "arviz", "h5netcdf",
         "submitit", "torch"]
def version(n):
    try:
        return md.version(n)
    except md.PackageNotFoundError:
        return None
d, pkg = jax.devices(), jaxattn  # the checkout's package, run from source
print(json.dumps({"backend": jax.default_backend(), "devices": [str(x) for x in d], "device_kind": d[0].device_kind,
                  "jaxattn": getattr(pkg, "__version__"), "jaxattn_from": pkg.__file__,
                  "versions": {n: version(n) for n in names}}))
EOF
}

main_job() {  # the defaults of `jaxattn slm train` (the README's first command); dry: a short one
  local size=() nc=$OUT/main.nc
  [ "$DRY" = 1 ] && size=(--D 50 --t-max 2 --n-records 4 --n-test 100) && nc=$WORK/main.nc
  python3 -m jaxattn slm train "${size[@]}" --no-progress --json --out "$nc" --figure "$WORK/main.png"
}

online_sgd() {
  python3 - <<'EOF'
# online SGD against the draw-only bound (benchmarks/slm_throughput.py's bench), one row a line
# in PART_JSONL as each finishes; the 4096-run row at D = 1000 (the target) first
import json, os, sys
sys.path.insert(0, "benchmarks")
import slm_throughput as s
if os.environ["DRY"] == "1":
    cases, L, H, repeats, torch_steps = [(100, 8)], 4, 2, 1, 10
else:
    cases = [(1000, 4096), (1000, 64), (1000, 16384), (100, 64), (100, 4096), (100, 16384), (1000, 1024)]
    L, H, repeats, torch_steps = 8, 4, 3, 100
for D, n in cases:
    # the shorter run's steps: about 1M samples a run (enough time to measure), 100 to 1000
    steps = 20 if os.environ["DRY"] == "1" else max(100, min(1000, 2**20 // n))
    r = s.bench(D, L, H, n, steps, torch_steps, repeats=repeats, scan=())
    r["steps"] = steps
    with open(os.environ["PART_JSONL"], "a") as f:
        f.write(json.dumps(r) + "\n")
    print(f"D={D} runs={n} steps={steps} default_block={r['default_block']} jaxattn={r['jaxattn']:,.0f} "
          f"draw_only={r['draw_only']:,.0f} of_draw={r['frac_of_draw']:.0%} torch={r['torch_loop']} "
          f"kernels_per_step={r['kernels_per_step']}", flush=True)
EOF
}

sweep() {
  if [ "$DRY" = 1 ]; then
    python3 benchmarks/sweep_throughput.py --sizes 1,8 --t-max 0.5 --block 65536 --json "$PART_JSON"
  else
    python3 benchmarks/sweep_throughput.py --sizes 1,64,4096,16384,65536 --block 65536 --json "$PART_JSON"
  fi
}

sgld() {
  python3 - <<'EOF'
# SGLD chains vmapped (benchmarks/copy_throughput.py's sgld_rates) against one chain at a time (at
# the first size only) and against the noise-only bound, one row a line in PART_JSONL
import json, os, sys
sys.path.insert(0, "benchmarks")
import copy_throughput as c
sizes, steps = ([16, 32], 20) if os.environ["DRY"] == "1" else ([256, 4096, 16384, 65536], 200)
for i, n in enumerate(sizes):
    v, one = c.sgld_rates(700, n, steps, one_chain=i == 0)
    bound = c.noise_only_rate(n, steps)
    r = dict(P=700, chains=n, steps=steps, vmapped=v, one_chain=one, noise_only=bound, of_bound=v / bound)
    with open(os.environ["PART_JSONL"], "a") as f:
        f.write(json.dumps(r) + "\n")
    print(f"SGLD P=700 chains={n}: vmapped {v:,.0f} chain-steps/s, noise-only bound {bound:,.0f} ({v / bound:.0%})"
          + (f", one chain {one:,.0f} ({v / one:.1f}x)" if one else ""), flush=True)
EOF
}

ode() {
  local p rc=0
  if [ "$DRY" = 1 ]; then
    for p in 8; do python3 benchmarks/slm_ode_throughput.py --quick --points "$p" || rc=1; done
  else
    for p in 32 4096; do python3 benchmarks/slm_ode_throughput.py --points "$p" --scipy-points 4 --repeats 2 || rc=1; done
  fi
  return $rc
}

landscape() {  # dry, this is also the benchmark's CI smoke test (.ci/scripts_quick leaves it out)
  python3 benchmarks/copy_landscape_speed.py --quick --out-dir "$WORK/landscape" &&
    cp "$WORK/landscape/copy_landscape_speed.json" "$PART_JSON"
}

phase_diagram() {
  local toml=examples/copy_phase_diagram.toml
  if [ "$DRY" = 1 ]; then  # the same file with short chains and two ladders a point
    toml=$WORK/copy_phase_diagram_dry.toml
    python3 - "$toml" <<'EOF' || return 1
import re, sys
text = open("examples/copy_phase_diagram.toml").read()
for old, new in (("burn_in = 4000", "burn_in = 20"), ("n_draws = 800", "n_draws = 10"),
                 ("chain = { range = [0, 4] }", "chain = { range = [0, 2] }")):
    if old not in text:
        sys.exit(f"examples/copy_phase_diagram.toml has no '{old}': update gpu_session.sh")
    text = text.replace(old, new)
open(sys.argv[1], "w").write(text)
EOF
  fi
  python3 -m jaxattn sweep run "$toml" --out "$WORK/phase" --no-progress --json
}

phase_status() {  # how far the phase-diagram sweep got (finished or stopped by its limit)
  python3 -m jaxattn sweep status "$WORK/phase" --json
}

tests() {
  export XLA_PYTHON_CLIENT_PREALLOCATE=false  # 15 processes share the GPU
  unset JAXATTN_CACHE_DIR  # the tests as CI runs them, not with the session's warm cache
  if [ "$DRY" = 1 ]; then  # the command's options and the collection; CI's test runs run the tests
    python3 -m pytest -n 2 --dist worksteal -p no:cacheprovider -rfE --collect-only -qq
  else
    python3 -m pytest -n 15 --dist worksteal -v -p no:cacheprovider -rfE --durations=20
  fi
}
export -f wheels env_ main_job online_sgd sweep sgld ode landscape phase_diagram phase_status tests

# On the device the parts run one after another, in this order. Dry, on the CPU, lane a and lane b
# run side by side (two cores; the figures mean nothing there), each in this order.
#  name        device  dry  lane  function
PARTS="
wheels          30     60    a    wheels
env             20     60    b    env_
main_cold       60     90    a    main_job
main_warm       40     60    a    main_job
online_sgd      75     90    a    online_sgd
sweep           60     60    a    sweep
sgld            30     60    a    sgld
ode             40     90    b    ode
landscape       35    150    b    landscape
phase           70     90    b    phase_diagram
phase_status    10     30    b    phase_status
tests            0     60    a    tests
"
# The device limits before the tests sum to 470 s; the tests get the rest of the 540 s (at least
# 70 s, and about 170 s where the parts before them take the time they are expected to).
lane() {  # lane a|b|all
  local i=0 name dev dry ln fn
  while read -r name dev dry ln fn; do
    [ -n "$name" ] || continue
    i=$(( i + 1 ))
    [ "$1" = all ] || [ "$1" = "$ln" ] || continue
    if [ "$name" = wheels ] && ! ls .whl/*.whl >/dev/null 2>&1; then
      continue  # no wheels to carry (CI): the packages are installed
    fi
    part "$i" "$name" "$dev" "$dry" "$fn" < /dev/null  # not the table: a part may read its stdin
    # the wheels, once installed on the device, come first on the path of every later part
    if [ "$name" = wheels ] && [ "$DRY" = 0 ]; then export PYTHONPATH=$SITE:$PYTHONPATH; fi
  done <<< "$PARTS"
}
export PYTHONPATH=$PWD
if [ "$DRY" = 1 ]; then
  lane b &
  lane a
  wait
else
  lane all
fi
python3 "$WORK/assemble.py" "${RESULTS[@]}"
log "done: ${RESULTS[*]}"
python3 - "${RESULTS[0]}" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["parts"]:
    print(f"{p['name']:14} {p['status']:8} rc {p['rc']!s:4} {p['wall_s']:7.1f} s of {p['limit_s']} s")
print("failed:", ", ".join(d["failed"]) or "none", "; skipped:", ", ".join(d["skipped"]) or "none",
      f"({d['elapsed_s']} s in all)")
EOF
if [ "$DRY" = 1 ]; then
  python3 -c 'import json, sys; sys.exit(1 if json.load(open(sys.argv[1]))["failed"] else 0)' "${RESULTS[0]}"
else
  exec >&- 2>&-  # the end of session.log: tee writes it all before the run returns
  wait "$TEE"
  exit 0
fi
