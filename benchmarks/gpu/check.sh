#!/usr/bin/env bash
# The GPU check: everything netbench can only show on a GPU, in one command on a lent GPU machine (one
# H100 or H200, its python3 3.12 with torch, CUDA's nvcc, no package index). From the repo root there:
#     benchmarks/gpu/check.sh          (the device call carries .whl and third_party)
# Steps, each bounded by `timeout`, the whole within 9 minutes (DEADLINE_S=535 s: what is cut by it fails):
#   setup     the carried wheels (.whl/) and this tree into /tmp/site; versions; the imports the rest needs;
#             nccl-tests' build starts in the background (CPU only) if its sources are carried
#   gputests  every GPU-only test (GPU_TESTS), pytest without xdist, each test's verdict printed; a GPU-only
#             test that skips here fails the step, and so does a test file that asks for a GPU but is not
#             in GPU_TESTS (grep -l "needs a CUDA GPU" tests/)
#   smoke     `netbench sweep` with no arguments, --engine both, nccl-tests' -G 1 -c 0, `netbench inventory`
#   compare   if third_party/nccl-tests is carried (sources, built here against the NCCL torch loads, sm_90;
#             or a build from an earlier check as third_party/ntb/ntb.tgz): nccl-tests with the no-argument
#             sweep's arguments beside that sweep's rows, benchmarks/gpu/compare.py (a measurement: its
#             MISS verdicts are reported, they do not fail the step)
# $OUT/check.txt: a line per step (`=== STEP ok|FAIL|skipped Ns: what`), then the details; $OUT/gputests.txt,
# $OUT/compare.md, $OUT/logs.tgz (every log and run directory's small files), $OUT/ntb.tgz (the nccl-tests
# build, to carry as third_party/ntb/ntb.tgz next time). Exit 1 if a step failed.
#
# The machine's image has torch, numpy, pandas, pyarrow, click, pytest, hypothesis, packaging,
# cuda-bindings, cuda-core and nvidia-nccl-cu13; what netbench needs beyond them is made here, where
# pip reaches a package index (14 MB, 2026-12-07; the device carries at most 64 MiB):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl plotly narwhals nccl4py
# and nccl-tests' sources: git archive of NVIDIA/nccl-tests (2.19.6 measured) into third_party/nccl-tests.
set -u
OUT=${OUT:-/tmp/netbench-check}; mkdir -p "$OUT"
W=/tmp/netbench-check-work; rm -rf "$W"; mkdir -p "$W/logs" "$W/compare"
SUMMARY=$OUT/check.txt; : > "$SUMMARY"
DEADLINE_S=${DEADLINE_S:-535}
FAILED=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# netbench installs from this tree (its top folders map to netbench.* only when installed); PYTHONSAFEPATH,
# inherited by the ranks, keeps the checkout's own netbench/ folder off sys.path
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONSAFEPATH=1
REPO=$PWD
NT=/tmp/ntb  # nccl-tests' binaries
GPU_TESTS=(
  test_engines.py::test_native_engine_on_a_gpu
  test_engines.py::test_the_compiled_loop_runs_nccl_on_every_slot
  test_engines.py::test_native_engine_graphs_are_made_with_cudas_own_api
  test_gpu_copy_matrix.py::test_copy_matrix_on_local_gpus
  test_group_resources.py::test_a_thousand_nccl_groups_on_one_gpu_keep_nccl_memory_within_2_gib
)

left() { echo $((DEADLINE_S - SECONDS)); }
verdict() {  # verdict STEP RC T0 WHAT: the step's summary line; a non-zero RC fails the check
  local word=ok
  [ "$2" = skip ] && word=skipped
  [ "$2" != skip ] && [ "$2" != 0 ] && { word="FAIL (rc $2)"; FAILED=1; }
  echo "=== $1 $word $((SECONDS - $3))s: $4" | tee -a "$SUMMARY"
}
bounded() {  # bounded LIMIT LOG CMD...: CMD under min(LIMIT, time left), its output in LOG
  local limit=$1 log=$2; shift 2
  local t; t=$(left); [ "$t" -lt "$limit" ] && limit=$t
  [ "$limit" -lt 5 ] && { echo "no time left for: $*" >> "$log"; return 124; }
  timeout -k 10 "$limit" "$@" >> "$log" 2>&1
}

step_setup() {
  local t0=$SECONDS rc=0 log=$W/logs/setup.txt
  if ls .whl/*.whl > /dev/null 2>&1; then
    bounded 120 "$log" python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || rc=$?
  fi
  bounded 120 "$log" python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade \
    --target /tmp/site . || rc=$?
  { nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
    python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, \
'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
  } > "$W/logs/versions.txt" 2>&1
  cat "$W/logs/versions.txt" >> "$SUMMARY"
  (cd /tmp && bounded 60 "$log" python3 -c "import click, hypothesis, numpy, pandas, plotly, pyarrow, pytest
import cuda.bindings.runtime, nccl.bindings.nccl, netbench.cli, torch
assert torch.cuda.is_available(), 'torch sees no GPU'
print('imports ok; netbench from', netbench.cli.__file__)") || rc=$?
  verdict setup "$rc" "$t0" "wheels and netbench into /tmp/site, imports ($(tail -n 1 "$log"))"
  build_start
}

nccl_dir() {  # the NCCL torch loads: pip's nvidia-nccl-cu13 when present, else the system one
  python3 -c "import nvidia.nccl as m, os
d = list(m.__path__)[0]; print(d if os.path.isdir(d + '/lib') else '')" 2>/dev/null
}

cuda_home() {  # the toolkit's folder: an nvcc on PATH may be a wrapper script (/usr/local/bin/nvcc)
  local d
  for d in "${CUDA_HOME:-}" /usr/local/cuda $(ls -d /usr/local/cuda-* 2>/dev/null | sort -V -r); do
    [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && { echo "$d"; return; }
  done
  d=$(command -v nvcc) && dirname "$(dirname "$(readlink -f "$d")")"
}

build_start() {  # nccl-tests in the background, against the NCCL torch loads (both tools run one libnccl)
  BUILD_PID=
  [ -x $NT/all_reduce_perf ] || [ -f third_party/ntb/ntb.tgz ] || [ -d third_party/nccl-tests/src ] || return
  local pipd; pipd=$(nccl_dir)
  mkdir -p /tmp/nccl/lib; rm -rf /tmp/nccl/include
  # nccl.h includes nccl_device.h, which includes nccl_device/...: link the whole folder, never copy files
  if [ -n "$pipd" ] && [ -d "$pipd/include/nccl_device" ]; then ln -sfn "$pipd/include" /tmp/nccl/include
  else ln -sfn /usr/include /tmp/nccl/include; fi
  if [ -n "$pipd" ]; then ln -sf "$pipd"/lib/libnccl.so.2 /tmp/nccl/lib/libnccl.so
  else ln -sf "$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2* | head -1)" /tmp/nccl/lib/libnccl.so; fi
  ln -sf libnccl.so /tmp/nccl/lib/libnccl.so.2
  [ -x $NT/all_reduce_perf ] && return
  if [ -f third_party/ntb/ntb.tgz ]; then mkdir -p $NT && tar xzf third_party/ntb/ntb.tgz -C $NT; return; fi
  # niced, 6 jobs: the GPU tests run beside it (the group test's lanes are threads of the rank)
  nice -n 19 timeout 400 make -C third_party/nccl-tests/src -j 6 MPI=0 NCCL_HOME=/tmp/nccl \
    CUDA_HOME="$(cuda_home)" BUILDDIR=$NT \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
    $NT/all_reduce_perf $NT/all_gather_perf > "$W/logs/build.txt" 2>&1 &
  BUILD_PID=$!
}

step_gputests() {
  local t0=$SECONDS rc=0 log=$W/logs/gputests.txt f missing=
  for f in $(cd tests && grep -l "needs a CUDA GPU" test_*.py); do
    printf '%s\n' "${GPU_TESTS[@]}" | grep -q "^$f::" || missing="$missing $f"
  done
  # addopts cleared: no xdist workers (the group test reads the whole GPU's memory, nothing may run beside it)
  (cd tests && bounded 420 "$log" python3 -m pytest -o addopts="" -p no:cacheprovider -v -rA \
    "${GPU_TESTS[@]}") || rc=$?
  grep -E "^test_.*::.* (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)" "$log" | sed 's/ *\[ *[0-9]*%\]//' \
    > "$W/logs/gputests-verdicts.txt"
  local ran skipped; ran=$(wc -l < "$W/logs/gputests-verdicts.txt")
  skipped=$(grep -c -v " PASSED" "$W/logs/gputests-verdicts.txt")
  [ "$rc" = 0 ] && [ "$skipped" != 0 ] && rc=1   # a GPU-only test that skips on a GPU is a failure
  [ "$rc" = 0 ] && [ -n "$missing" ] && rc=1
  [ "$rc" = 0 ] && [ "$ran" = 0 ] && rc=1
  verdict gputests "$rc" "$t0" \
    "$ran GPU-only tests, $skipped not passed${missing:+; ask for a GPU, not in GPU_TESTS:$missing}"
  { cat "$W/logs/gputests-verdicts.txt"; grep -E "GPU memory above|made ahead|^(SKIPPED|FAILED|ERROR) " "$log"
    tail -n 1 "$log"; } | tee -a "$SUMMARY"
  cp "$log" "$OUT/gputests.txt"
}

sweep() {  # sweep NAME LIMIT CHECK ARGS...: netbench ARGS in $W/NAME; CHECK: python over its rows
  local name=$1 limit=$2 check=$3 t0=$SECONDS rc=0; shift 3
  mkdir -p "$W/$name"
  (cd "$W/$name" && bounded "$limit" "$W/logs/$name.txt" python3 -m netbench "$@") || rc=$?
  if [ "$rc" = 0 ] && [ -n "$check" ]; then
    python3 -c "import glob, sys
from pathlib import Path
from netbench.common.rundir import RunDir
runs = sorted({Path(f).parent for f in glob.glob(sys.argv[1] + '/**/run.json', recursive=True)})
rows = [r for d in runs for r in RunDir(d, '').read_rows()]  # results.parquet or an older results.jsonl
$check" "$W/$name" >> "$W/logs/$name.txt" 2>&1 || rc=$?
  fi
  local how; how=$(grep -E '^(PASS|WARN|FAIL)|# rows:|^check:' "$W/logs/$name.txt" | tail -n 2 | tr '\n' ' ')
  [ "$rc" = 0 ] || how="$how; $(tail -n 1 "$W/logs/$name.txt")"
  verdict "smoke:$name" "$rc" "$t0" "netbench $* ($how)"
}

step_smoke() {
  local ok="assert rows and all(r['status'] == 'ok' and not r.get('wrong') for r in rows), rows[:1]"
  # no arguments at all, as a user types it (its rows are the comparison's below)
  sweep plain 150 "$ok; print('check:', len(rows), 'rows ok')" sweep
  sweep both 90 "$ok; e = {r['engine'] for r in rows}; assert e == {'nccl', 'torch'}, e
print('check: engines', e)" sweep --engine both -b 1M -e 64M -n 10 -w 3 --no-report --out both-run
  sweep graph 90 "$ok; assert all(r['cuda_graph'] for r in rows); print('check: every row a CUDA graph')" \
    sweep -G 1 -c 0 -k all_reduce -b 1M -e 64M -n 10 -w 3 --fail-on warn --out graph-run
  local t0=$SECONDS rc=0
  (cd "$W" && bounded 90 "$W/logs/inventory.txt" python3 -m netbench inventory --json --out inv-run) || rc=$?
  local inv="import json, sys
r = [json.loads(x) for x in open(sys.argv[1])][0]
print(r['status'], len(r['gpus'] or []), 'GPU(s), driver', r['driver_version'],
      'nccl4py', r['nccl4py_version'])"
  local got; got=$(python3 -c "$inv" "$W/inv-run/inventory.jsonl" 2>&1 | tail -n 1)
  verdict smoke:inventory "$rc" "$t0" "netbench inventory ($got)"
}

step_compare() {
  local t0=$SECONDS rc=0 log=$W/logs/compare.txt c run
  if [ ! -x $NT/all_reduce_perf ] && [ -z "${BUILD_PID:-}" ]; then
    verdict compare skip "$t0" "no nccl-tests carried (third_party/nccl-tests, third_party/ntb/ntb.tgz)"
    return
  fi
  if [ -n "${BUILD_PID:-}" ]; then
    wait "$BUILD_PID" || rc=$?
    { echo "nccl-tests build rc=$rc:"; tail -n 3 "$W/logs/build.txt"; } >> "$log"
    [ "$rc" = 0 ] && tar czf "$OUT/ntb.tgz" -C $NT all_reduce_perf all_gather_perf
  fi
  run=$(ls -d "$W"/plain/netbench-runs/*/ 2>/dev/null | head -n 1)
  [ -n "$run" ] || { echo "no rows of the no-argument sweep to compare with" >> "$log"; rc=1; }
  [ "$rc" = 0 ] && ln -sfn "$run" "$W/compare/nb_plain_g0"
  for c in all_reduce all_gather; do  # the no-argument sweep's collectives and arguments, check on
    [ "$rc" = 0 ] || break
    LD_LIBRARY_PATH=/tmp/nccl/lib:${LD_LIBRARY_PATH:-} bounded 90 "$W/compare/nt_plain_${c}_g0.txt" \
      $NT/${c}_perf -b 8 -e 8G -f 2 -n 20 -w 5 -c 1 -g 1 -G 0 || rc=$?
  done
  if [ "$rc" = 0 ]; then
    bounded 60 "$log" python3 benchmarks/gpu/compare.py "$W/compare" --markdown "$OUT/compare.md" || rc=$?
  fi
  local all misses
  all=$(grep -c "^- " "$OUT/compare.md" 2>/dev/null)
  misses=$(grep -c "^- .*MISS" "$OUT/compare.md" 2>/dev/null)
  verdict compare "$rc" "$t0" "nccl-tests vs the no-argument sweep: ${all:-0} verdicts, ${misses:-0} MISS"
  grep "^- " "$OUT/compare.md" 2>/dev/null | tee -a "$SUMMARY"
  [ "$rc" = 0 ] || tail -n 5 "$log" | tee -a "$SUMMARY"
}

step_setup
step_gputests
step_smoke
step_compare
cd "$REPO" || exit 1
# the run directories' small files, not their reports or per-iteration samples (8 files come back)
tar czf "$OUT/logs.tgz" -C "$W" --exclude='*.html' --exclude='*.gz' . 2>/dev/null
echo "=== check $([ $FAILED = 0 ] && echo passed || echo FAILED) in ${SECONDS}s" | tee -a "$SUMMARY"
exit $FAILED
