#!/usr/bin/env bash
# The one pipeline on a GPU machine (the lent H200): `netbench sweep` with no arguments (the `here`
# site: NCCL, the engine the plan decides, the inventory probe with its NCCL section), the same with
# --engine both, mpirun as the launcher, nccl-tests' flags (-G 1: CUDA graphs, -c 0: no check), and
# `netbench inventory`. Run from the repo root there, with
# .whl carried (plotly, paramiko, nccl4py and what they need): benchmarks/gpu/check_sites.sh
# Each command's output, exit status, run.json and inventory land in $OUT.
set -u
OUT=${OUT:-/tmp/netbench-sites}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONSAFEPATH=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site .
run() {  # run NAME ARGS...: netbench ARGS in /tmp/NAME-run, its output and files in $OUT
  local name=$1; shift; local t0=$SECONDS
  (cd /tmp && rm -rf "/tmp/$name-run" && timeout "${STEP_TIMEOUT:-200}" python3 -m netbench "$@" \
      --out "/tmp/$name-run") > "$OUT/$name.txt" 2>&1
  local rc=$?
  echo "=== $name rc=$rc $((SECONDS - t0))s: netbench $*" | tee -a "$OUT/summary.txt"
  tail -n 6 "$OUT/$name.txt"
  for f in run.json inventory.jsonl env.json findings.json; do
    [ -f "/tmp/$name-run/$f" ] && cp "/tmp/$name-run/$f" "$OUT/$name-$f"
  done
}
run here sweep -b 8 -e 256M -n 10 -w 3
run both sweep --engine both -b 1M -e 64M -n 10 -w 3 --no-report
run mpi sweep --launcher mpi -b 8 -e 16M -n 5 -w 2
run flags sweep -G 1 -c 0 -k all_reduce -b 1M -e 64M -n 10 -w 3 --fail-on warn  # nccl-tests' -G/-c
(cd /tmp && timeout 120 python3 -m netbench inventory --json > "$OUT/inventory.json" 2> "$OUT/inventory.err")
echo "=== inventory rc=$?" | tee -a "$OUT/summary.txt"
