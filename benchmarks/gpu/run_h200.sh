#!/usr/bin/env bash
# netbench against nccl-tests on the lent H200 machine (issues 7 and 8). Runs from the repo root there:
#   benchmarks/gpu/run_h200.sh STAGE...      stages: setup build smoke gpu1 gpu2 extra compare
# setup    wheels from .whl (if carried) and this tree into /tmp/site, versions, nvidia-smi, topo -m
# engines  one GPU: nccl-tests and netbench --engine both (nccl4py and torch), with and without graphs
# build    (buildbg + wait: in the background, while smoke runs) nccl-tests from third_party/nccl-tests (git archive of NVIDIA/nccl-tests), sm_90 only, against
#          the NCCL library torch loads (so both tools run the same libnccl), or unpack a carried build
# smoke    netbench on 2 GPUs, every collective, small sizes, with and without --cuda-graph
# gpu1     CUDA_VISIBLE_DEVICES=0: nccl-tests and netbench, all_reduce/all_gather/reduce_scatter,
#          8 B..8 GiB, with and without CUDA graphs (nccl-tests -G 20 / netbench --cuda-graph)
# gpu2     both GPUs: + sendrecv, NCCL default and NCCL_ALGO=Ring; `netbench sweep` with no arguments
# intra, dtypes: the parts of extra that one GPU can run
# extra    --pattern copy-matrix (GPU copy matrix), a pairwise sweep with one "host" per GPU, dtypes bf16/half/int8
# i28      issue 28: nccl-tests vs netbench (rotating and hot buffers), eager and graphs, alternated
# probe    issue 28: launch_probe.py (PROBE_ARGS=--harness: netbench's own measure() too), nccl-tests at 8 B
# gprobe   issue 28: graph_probe.py (layout, stream, warm replay of a graph at 2 and 16 MiB)
# graph    issue 28: nccl-tests -G 20 (and -G 0) and netbench --cuda-graph at 2 MiB-1 GiB alternated ROUNDS times (into $R/graph/)
# hist     issue 28: netbench's measure() alone in a process at 2 and 16 MiB (graphs), with and without
#          empty_cache between points; nccl-tests and netbench from 16 MiB up (16 MiB measured first)
# raw      issue 28: graph_raw.py (CuPy graphs, with and without torch), nccl-tests -N 6 (graph after graph)
# fix      issue 28: graphs captured on one stream / reset at once (graph_probe --bare-only), the harness,
#          then nccl-tests -G 20 and netbench --cuda-graph alternated ROUNDS times, 8 B-1 GiB (into $R/g28/)
# empty    issue 28: netbench --cuda-graph with --in-place out and both, beside nccl-tests -G 20 (into $R/empty/)
# forked   issue 28: graph_probe --harness-only over a sweep's sizes, plain and in a fork (as netbench's ranks)
# trace    issue 28: which graph class a real --cuda-graph sweep's ranks make (trace_graphs/sitecustomize.py),
#          and its times; cuda-bindings' presence
# bisect   issue 28: graph_probe --harness-only with what a rank does beside measure() (--rank-like parts),
#          against the sweep itself
# gather   issue 28: which part of the rank's per-point gather slows the process's later graphs
# eager    issue 28: small eager sizes, nccl-tests, the sweep and measure() alone in a process, alternated
# cloop    issue 28: the eager loop made from C against the binding's Python loop (loop_probe.py), then
#          nccl-tests, netbench and netbench NETBENCH_NATIVE_LOOP=python alternated ROUNDS times (into $R/cloop/)
# cstate   issue 28: loop_probe.py on torch's stream and a non-blocking one, with and without the process
#          group, 50 and 1,000 operations a loop, alternated with nccl-tests (into $R/cstate/)
# gputests the GPU-only tests (tests/test_engines.py on a GPU, tests/test_gpu_copy_matrix.py); pytest from
#          third_party/pytest-whl where the machine lacks it
# pin      issue 28: small eager sizes, nccl-tests and netbench alternated ROUNDS times, free and
#          pinned to PINCPUS (taskset, both tools alike), into $R/free/ and $R/pin/ (rounds.py reads each)
# i27      issue 27: per-operation stamps on a GPU (--per-iter, --step-work), one rank
# compare  benchmarks/gpu/compare.py over everything measured
# Everything lands in /tmp/netbench-gpu-work/r (tarred to $OUT/results.tgz after each step, so a killed run still returns).
set -u
OUT=${OUT:-/tmp/netbench-gpu}; mkdir -p "$OUT"
WORK=/tmp/netbench-gpu-work; R=$WORK/r; rm -rf "$WORK"; mkdir -p "$R"  # only the tarball goes to $OUT (8 files come back)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# netbench is installed into /tmp/site from this tree (its folders map to netbench.* only when
# installed); PYTHONSAFEPATH (python -P, inherited by the ranks netbench starts) keeps the
# checkout's own netbench/ folder off sys.path
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONSAFEPATH=1
PY=python3
NT=/tmp/ntb           # nccl-tests binaries
RANGE=${RANGE:-"-b 8 -e 8G -f 2 -n 20 -w 5"}
NTARGS=${NTARGS:-"-b 8 -e 8G -f 2 -n 20 -w 5 -c 1"}
snap() { tar czf "$OUT/results.tgz" -C "$WORK" r 2>/dev/null; }
step() {  # step NAME CMD... : run with a time limit, log to $R/NAME.txt, show the tail
  local name=$1; shift; local t0=$SECONDS
  echo "=== $name: $*"
  timeout "${STEP_TIMEOUT:-240}" "$@" > "$R/$name.txt" 2>&1; local rc=$?
  echo "=== $name rc=$rc $((SECONDS - t0))s"; tail -n "${TAILN:-4}" "$R/$name.txt"; snap; return $rc
}
NB="$PY -m netbench sweep"  # word-split on purpose: timeout runs programs, not functions

stage_setup() {
  if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  fi
  $PY -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site .
  { date -u; uname -a; nvidia-smi; nvcc --version; $PY -c "import torch, sys; print(sys.version); \
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), \
'gpus', torch.cuda.device_count())"; lscpu | head -24; mpirun --version 2>&1 | head -1; ls /usr/include/nccl*.h 2>&1;
    $PY -c "import nvidia.nccl as m; print(list(m.__path__))" 2>&1; } > "$R/versions.txt" 2>&1
  nvidia-smi topo -m > "$R/nvidia-smi-topo-m.txt" 2>&1
  nvidia-smi topo -p2p r > "$R/nvidia-smi-topo-p2p-r.txt" 2>&1
  nvidia-smi nvlink --status > "$R/nvidia-smi-nvlink-status.txt" 2>&1
  cat "$R/versions.txt" "$R/nvidia-smi-topo-m.txt"; snap
}

nccl_dir() {  # the NCCL torch loads: pip's nvidia-nccl-cu13 when present, else the system one
  $PY -c "import nvidia.nccl as m, os; d=list(m.__path__)[0]; print(d if os.path.isdir(d+'/lib') else '')" 2>/dev/null
}

stage_build() {
  local pipd; pipd=$(nccl_dir); mkdir -p /tmp/nccl/lib; rm -rf /tmp/nccl/include
  # nccl.h includes nccl_device.h, which includes nccl_device/...: link the whole folder, never copy files
  if [ -n "$pipd" ] && [ -d "$pipd/include/nccl_device" ]; then ln -sfn "$pipd/include" /tmp/nccl/include;
  else ln -sfn /usr/include /tmp/nccl/include; fi
  grep -h "define NCCL_\(MAJOR\|MINOR\|PATCH\) " /tmp/nccl/include/nccl.h
  if [ -n "$pipd" ]; then ln -sf "$pipd"/lib/libnccl.so.2 /tmp/nccl/lib/libnccl.so;
  else ln -sf "$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2* | head -1)" /tmp/nccl/lib/libnccl.so; fi
  ln -sf libnccl.so /tmp/nccl/lib/libnccl.so.2
  if [ -x $NT/all_reduce_perf ]; then echo "nccl-tests: built already"; return; fi
  if [ -f third_party/ntb/ntb.tgz ]; then mkdir -p $NT && tar xzf third_party/ntb/ntb.tgz -C $NT && echo "nccl-tests: carried build"; return; fi
  STEP_TIMEOUT=420 step build make -C third_party/nccl-tests/src -j "$(nproc)" MPI=0 NCCL_HOME=/tmp/nccl CUDA_HOME=/usr/local/cuda \
    BUILDDIR=$NT NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
    $NT/all_reduce_perf $NT/all_gather_perf $NT/reduce_scatter_perf $NT/sendrecv_perf $NT/broadcast_perf
  tar czf "$OUT/ntb.tgz" -C $NT all_reduce_perf all_gather_perf reduce_scatter_perf sendrecv_perf broadcast_perf
}

nt() {  # nt TAG COLL GRAPH [nccl-tests args]: LD_LIBRARY_PATH = torch's NCCL, so both run one library
  local tag=$1 coll=$2 g=$3; shift 3
  LD_LIBRARY_PATH=/tmp/nccl/lib:${LD_LIBRARY_PATH:-} step "nt_${tag}_${coll}_g$g" $NT/${coll}_perf $NTARGS -G "$g" "$@"
}

stage_buildbg() { stage_build > "$R/build_bg.txt" 2>&1 & BUILD_PID=$!; }
stage_wait() { wait "$BUILD_PID"; cat "$R/build_bg.txt"; ls -la $NT; }

stage_smoke() {
  step smoke_g0 $NB -k all_reduce,all_gather,reduce_scatter,sendrecv,broadcast,reduce,all_to_all \
    -b 8 -e 64M -f 32 -n 5 -w 2 --no-report --out "$R/nb_smoke_g0"
  step smoke_g1 $NB -k all_reduce,all_gather,reduce_scatter,sendrecv -b 8 -e 64M -f 32 -n 5 -w 2 \
    --cuda-graph --no-report --out "$R/nb_smoke_g1"
}

stage_gpu1() {
  export CUDA_VISIBLE_DEVICES=0
  for g in 0 20; do for c in all_reduce all_gather reduce_scatter; do nt 1gpu $c $g -g 1; done; done
  step nb_1gpu_g0 $NB -k all_reduce,all_gather,reduce_scatter $RANGE --out "$R/nb_1gpu_g0"
  step nb_1gpu_g20 $NB -k all_reduce,all_gather,reduce_scatter $RANGE --cuda-graph --no-report \
    --out "$R/nb_1gpu_g20"
  unset CUDA_VISIBLE_DEVICES
}

stage_gpu2() {
  for c in all_reduce all_gather reduce_scatter sendrecv; do nt 2gpu $c 0 -t 2 -g 1; done
  for c in all_reduce all_gather reduce_scatter sendrecv; do NCCL_ALGO=Ring nt 2gpu-ring $c 0 -t 2 -g 1; done
  rm -rf netbench-runs
  step nb_2gpu_g0 $NB         # `netbench sweep`, no arguments: every GPU, all_reduce + all_gather, 8 B..8 GiB
  mv netbench-runs/* "$R/nb_2gpu_g0"; rmdir netbench-runs
  step nb_2gpu_g0b $NB -k reduce_scatter,sendrecv $RANGE --no-report --out "$R/nb_2gpu_g0b"
  NCCL_ALGO=Ring step nb_2gpu-ring_g0 $NB -k all_reduce,all_gather,reduce_scatter,sendrecv $RANGE \
    --no-report --out "$R/nb_2gpu-ring_g0"
}

stage_overhead() {  # per-op CPU cost of the eager path (1-rank in-place all_reduce: NCCL itself does nothing)
  export CUDA_VISIBLE_DEVICES=0
  step ovh_default $NB -k all_reduce,all_gather -b 8 -e 16M -f 8 --no-report --out "$R/ovh_default"
  TORCH_NCCL_TRACE_BUFFER_SIZE=0 step ovh_fr0 $NB -k all_reduce,all_gather -b 8 -e 16M -f 8 --no-report \
    --out "$R/ovh_fr0"
  unset CUDA_VISIBLE_DEVICES
}
stage_frtest() {  # flight recorder on/off, alternated 3 times (host cost per eager op; variance check)
  export CUDA_VISIBLE_DEVICES=0
  for i in 1 2 3; do
    TORCH_FR_BUFFER_SIZE=2000 step "fr_on_$i" $NB -k all_reduce,reduce_scatter -b 8 -e 1M -f 32 --no-report \
      --out "$R/fr_on_$i"
    step "fr_off_$i" $NB -k all_reduce,reduce_scatter -b 8 -e 1M -f 32 --no-report --out "$R/fr_off_$i"
  done
  unset CUDA_VISIBLE_DEVICES
}
stage_nb1() {  # netbench's side of gpu1 only
  export CUDA_VISIBLE_DEVICES=0
  step nb_1gpu_g0 $NB -k all_reduce,all_gather,reduce_scatter $RANGE --no-report --out "$R/nb_1gpu_g0"
  step nb_1gpu_g20 $NB -k all_reduce,all_gather,reduce_scatter $RANGE --cuda-graph --no-report --out "$R/nb_1gpu_g20"
  unset CUDA_VISIBLE_DEVICES
}
stage_plain() {  # `netbench sweep` with no arguments at all, as a user would type it
  rm -rf netbench-runs; step nb_plain $NB; mkdir -p "$R/nb_plain"; mv netbench-runs/* "$R/nb_plain/"; rmdir netbench-runs
}
stage_intra() { step intra $NB --pattern copy-matrix --no-report --out "$R/nb_intra"; }
stage_dtypes() {
  for d in bfloat16 half int8; do
    step "dtype_$d" $NB -k all_reduce,reduce_scatter -d $d -b 1K -e 256M -f 16 --no-report --out "$R/nb_dtype_$d"
  done
}
stage_extra() {  # needs 2 GPUs or more
  stage_intra
  printf 'g0 gpus=0\ng1 gpus=1\n' > /tmp/gpu-hosts.txt
  step pairwise $NB --hosts /tmp/gpu-hosts.txt --launcher local --pattern pairwise --no-report \
    --out "$R/nb_pairwise"
  stage_dtypes
}

stage_engines() {  # issue 14: nccl-tests beside both netbench engines, one GPU, with and without graphs
  export CUDA_VISIBLE_DEVICES=0
  for g in 0 20; do for c in all_reduce all_gather reduce_scatter broadcast; do nt 1gpu $c $g -g 1; done; done
  STEP_TIMEOUT=300 step nb_1gpu_g0 $NB --engine both -k all_reduce,all_gather,reduce_scatter,broadcast $RANGE \
    --no-report --out "$R/nb_1gpu_g0"
  STEP_TIMEOUT=300 step nb_1gpu_g20 $NB --engine both -k all_reduce,all_gather,reduce_scatter,broadcast $RANGE \
    --cuda-graph --no-report --out "$R/nb_1gpu_g20"
  unset CUDA_VISIBLE_DEVICES
}

stage_i28() {  # issue 28: nccl-tests beside netbench's nccl engine (rotating buffers, the default, and
  # --hot-buffers), one GPU, eager then graphs, alternated ROUNDS times (medians over rounds in compare)
  export CUDA_VISIBLE_DEVICES=0
  local A="-b 8 -e 1G -f 8 -n 50 -w 10" K=all_reduce,all_gather,reduce_scatter,broadcast
  for i in $(seq "${ROUNDS:-3}"); do
    for c in all_reduce all_gather reduce_scatter broadcast; do NTARGS="$A -c 0" nt "1gpu-r$i" $c 0 -g 1; done
    step "nb_rot_r$i" $NB --engine nccl -k $K $A --no-check --no-inventory --no-report --out "$R/nb_rot_r$i"
    step "nb_hot_r$i" $NB --engine nccl -k $K $A --no-check --hot-buffers --no-inventory --no-report --out "$R/nb_hot_r$i"
    for c in all_reduce all_gather reduce_scatter broadcast; do NTARGS="$A -c 0" nt "1gpu-r$i" $c 20 -g 1; done
    step "nb_rotG_r$i" $NB --engine nccl -k $K $A --no-check --cuda-graph --no-inventory --no-report --out "$R/nb_rotG_r$i"
  done
  step nb_torch1 $NB --engine torch -k all_reduce -b 8 -e 1M -f 32 --cuda-graph --no-report --out "$R/nb_torch1"
  unset CUDA_VISIBLE_DEVICES
}

stage_probe() {  # issue 28: where a small eager operation's microseconds go (launch_probe.py), and
  # nccl-tests with and without its offsets at 8 B (-e 8: one slot; -e 8K -f 1024: 1,024 slots)
  export CUDA_VISIBLE_DEVICES=0
  step probe $PY benchmarks/gpu/launch_probe.py --rounds "${ROUNDS:-5}" ${PROBE_ARGS:-}
  for i in $(seq "${ROUNDS:-3}"); do
    NTARGS="-b 8 -e 8 -n 1000 -w 100 -c 0" nt "hot-r$i" all_reduce 0 -g 1
    NTARGS="-b 8 -e 8K -f 1024 -n 1000 -w 100 -c 0" nt "rot-r$i" all_reduce 0 -g 1
  done
  unset CUDA_VISIBLE_DEVICES
}

stage_gprobe() {
  CUDA_VISIBLE_DEVICES=0 STEP_TIMEOUT=300 TAILN=40 step graph_probe $PY benchmarks/gpu/graph_probe.py
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True CUDA_VISIBLE_DEVICES=0 STEP_TIMEOUT=300 TAILN=40 \
    step graph_probe_expandable $PY benchmarks/gpu/graph_probe.py
}
stage_graph() {
  export CUDA_VISIBLE_DEVICES=0
  mkdir -p "$R/graph"; local A="-b 2M -e 1G -f 8 -n 50 -w 10"
  for i in $(seq "${ROUNDS:-5}"); do
    NTARGS="$A -c 0" nt "1gpu-r$i" all_reduce 20 -g 1; mv "$R/nt_1gpu-r${i}_all_reduce_g20.txt" "$R/graph/"
    NTARGS="$A -c 0" nt "1gpu-r$i" all_reduce 0 -g 1; mv "$R/nt_1gpu-r${i}_all_reduce_g0.txt" "$R/graph/"
    step "graph/nb_rotG_r$i" $NB --engine nccl -k all_reduce $A --no-check --cuda-graph --no-inventory --no-report \
      --out "$R/graph/nb_rotG_r$i"
  done
  unset CUDA_VISIBLE_DEVICES
}

stage_hist() {  # issue 28: does what ran before in the process decide a graph's time?
  export CUDA_VISIBLE_DEVICES=0
  local G="--engine nccl -k all_reduce -n 50 -w 10 --no-check --cuda-graph --no-inventory --no-report"
  local P="benchmarks/gpu/graph_probe.py --harness-only --rounds 5"
  TAILN=3 step hist_only $PY $P --sizes 2097152,16777216,2097152
  TAILN=3 step hist_empty $PY $P --empty-cache --sizes 2097152,16777216,2097152
  TAILN=3 step hist_16 $PY $P --sizes 16777216,2097152,16777216
  if [ -n "${HIST_MORE:-}" ]; then  # what starts the slow state: time, the process group, measure()?
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
      --format=csv -lms 100 > "$R/hist_clocks.csv" 2>&1 & local SMI=$!
    TAILN=3 step hist_sleep $PY $P --sleep-first 3 --rounds 8 --sizes 16777216
    TAILN=3 step hist_bare $PY benchmarks/gpu/graph_probe.py --bare-only --rounds 12 --sizes 16777216,2097152
    TAILN=3 step hist_bare_nopg $PY benchmarks/gpu/graph_probe.py --bare-only --no-pg --rounds 12 --sizes 16777216,2097152
    TAILN=3 step hist_bare_sleep $PY benchmarks/gpu/graph_probe.py --bare-only --sleep-first 3 --rounds 12 --sizes 16777216
    kill $SMI; tail -5 "$R/hist_clocks.csv"
    return
  fi
  mkdir -p "$R/hist"
  for i in 1 2 3; do
    NTARGS="-b 16M -e 1G -f 64 -n 50 -w 10 -c 0" nt "16-r$i" all_reduce 20 -g 1
    mv "$R/nt_16-r${i}_all_reduce_g20.txt" "$R/hist/"
    step "hist/nb16_r$i" $NB $G -b 16M -e 1G -f 64 --out "$R/hist/nb16_r$i"
  done
}

stage_raw() {  # issue 28: graphs made with CUDA's own API (CuPy), with and without torch; nccl-tests -N 6
  export CUDA_VISIBLE_DEVICES=0
  TAILN=3 step raw_cupy $PY benchmarks/gpu/graph_raw.py
  TAILN=3 step raw_cupy_torch $PY benchmarks/gpu/graph_raw.py --torch
  NTARGS="-b 16M -e 1G -f 64 -n 50 -w 10 -c 0 -N 6" TAILN=30 nt cycles all_reduce 20 -g 1
  unset CUDA_VISIBLE_DEVICES
}

stage_fix() {  # issue 28: which change keeps torch-captured graphs fast; then graphs against nccl-tests
  export CUDA_VISIBLE_DEVICES=0
  local B="benchmarks/gpu/graph_probe.py --bare-only --rounds 10 --sizes 16777216,2097152"
  if [ -z "${FIX_SKIP_BARE:-}" ]; then
    TAILN=3 step fix_bare $PY $B
    TAILN=3 step fix_bare_one $PY $B --one-stream
    TAILN=3 step fix_bare_reset $PY $B --reset
  fi
  TAILN=3 step fix_harness $PY benchmarks/gpu/graph_probe.py --harness-only --rounds 5 --sizes 2097152,16777216,2097152
  local A="-b 8 -e 1G -f 8 -n 50 -w 10" K=all_reduce,all_gather,reduce_scatter,broadcast c i
  mkdir -p "$R/g28"
  for i in $(seq "${ROUNDS:-3}"); do
    for c in all_reduce all_gather reduce_scatter broadcast; do
      NTARGS="$A -c 0" TAILN=0 nt "1gpu-r$i" $c 20 -g 1; mv "$R/nt_1gpu-r${i}_${c}_g20.txt" "$R/g28/"
    done
    TAILN=0 step "g28/nb_rotG_r$i" $NB --engine nccl -k $K $A --no-check --cuda-graph --no-inventory --no-report \
      --out "$R/g28/nb_rotG_r$i"
  done
  unset CUDA_VISIBLE_DEVICES
}

stage_empty() {  # issue 28: do a one-rank sweep's in-place points (graphs NCCL leaves empty) slow the rest?
  export CUDA_VISIBLE_DEVICES=0
  local A="-b 8 -e 1G -f 8 -n 50 -w 10" i w
  mkdir -p "$R/empty"
  for i in $(seq "${ROUNDS:-2}"); do
    NTARGS="$A -c 0" TAILN=0 nt "1gpu-r$i" all_reduce 20 -g 1; mv "$R/nt_1gpu-r${i}_all_reduce_g20.txt" "$R/empty/"
    for w in out both; do
      TAILN=0 step "empty/nb_${w}_r$i" $NB --engine nccl -k all_reduce $A --no-check --cuda-graph --in-place $w \
        --no-inventory --no-report --out "$R/empty/nb_${w}_r$i"
    done
  done
  unset CUDA_VISIBLE_DEVICES
}

stage_forked() {  # issue 28: measure() in a fork of a torch-importing process (as a rank), beside a plain one
  export CUDA_VISIBLE_DEVICES=0
  local S="--harness-only --rounds 2 --sizes 8,64,512,4096,32768,262144,2097152,16777216,2097152,16777216"
  TAILN=12 step forked_plain $PY benchmarks/gpu/graph_probe.py $S
  TAILN=12 step forked_fork $PY benchmarks/gpu/graph_probe.py $S --fork
  unset CUDA_VISIBLE_DEVICES
}

stage_trace() {
  export CUDA_VISIBLE_DEVICES=0
  $PY -c "import cuda.bindings, cuda.bindings.runtime; print('cuda-bindings', cuda.bindings.__version__, cuda.bindings.__file__)" \
    > "$R/cuda_bindings.txt" 2>&1; cat "$R/cuda_bindings.txt"
  local A="-b 8 -e 16M -f 8 -n 50 -w 10" i
  for i in 1 2; do
    GRAPH_TRACE="$R/trace_graphs_r$i.txt" PYTHONPATH=benchmarks/gpu/trace_graphs:$PYTHONPATH TAILN=14 \
      step "trace_sweep_r$i" $NB --engine nccl -k all_reduce $A --no-check --cuda-graph --in-place out \
      --no-inventory --no-report --out "$R/trace_sweep_r$i"
    sort "$R/trace_graphs_r$i.txt" | uniq -c
  done
  unset CUDA_VISIBLE_DEVICES
}

stage_bisect() {
  export CUDA_VISIBLE_DEVICES=0
  { command -v nsys ncu; ls -d /usr/local/cuda*/bin/nsys /opt/nvidia/nsight* 2>&1
    $PY -c "import mpi4py; print('mpi4py', mpi4py.__version__)" 2>&1; } > "$R/tools.txt" 2>&1; cat "$R/tools.txt"
  local S="--harness-only --rounds 2 --sizes 8,64,512,4096,32768,262144,2097152,16777216,2097152,16777216" v
  for v in none caps env gather caps,env,setdev,gather; do
    TAILN=11 step "bisect_$v" $PY benchmarks/gpu/graph_probe.py $S --rank-like="${v/none/}"
  done
  TAILN=12 step bisect_fork_all $PY benchmarks/gpu/graph_probe.py $S --rank-like caps,env,setdev,gather --fork
  local A="-n 50 -w 10 --no-check --cuda-graph --in-place out --no-inventory --no-report"
  TAILN=16 step bisect_sweep $NB --engine nccl -k all_reduce -b 8 -e 1G -f 8 $A --out "$R/bisect_sweep"
  TAILN=12 step bisect_sweep256k $NB --engine nccl -k all_reduce -b 256K -e 1G -f 8 $A --out "$R/bisect_sweep256k"
  unset CUDA_VISIBLE_DEVICES
}

stage_gather() {
  export CUDA_VISIBLE_DEVICES=0
  local S="--harness-only --rounds 2 --sizes 8,64,512,4096,32768,262144,2097152,16777216,2097152,16777216" v
  for v in torch torch-sync cpu-only native allreduce barrier; do
    TAILN=10 step "gather_$v" $PY benchmarks/gpu/graph_probe.py $S --rank-like=gather --gather-how $v
  done
  CUDA_MODULE_LOADING=EAGER TAILN=10 step gather_torch_eager $PY benchmarks/gpu/graph_probe.py $S --rank-like=gather
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING TAILN=10 step gather_torch_debug $PY benchmarks/gpu/graph_probe.py $S \
    --rank-like=gather
  unset CUDA_VISIBLE_DEVICES
}

stage_eager() {
  export CUDA_VISIBLE_DEVICES=0
  local A="-b 8 -e 1G -f 8 -n 50 -w 10" i
  mkdir -p "$R/eager"
  for i in $(seq "${ROUNDS:-4}"); do
    NTARGS="$A -c 0" TAILN=0 nt "1gpu-r$i" all_reduce 0 -g 1; mv "$R/nt_1gpu-r${i}_all_reduce_g0.txt" "$R/eager/"
    TAILN=0 step "eager/nb_rot_r$i" $NB --engine nccl -k all_reduce $A --no-check --no-inventory --no-report \
      --out "$R/eager/nb_rot_r$i"
    TAILN=7 step "eager/measure_r$i" $PY benchmarks/gpu/graph_probe.py --harness-only --eager --rounds 1 \
      --sizes 8,64,512,4096,32768,262144,2097152
  done
  unset CUDA_VISIBLE_DEVICES
}

stage_cloop() {  # issue 28: the native engine's eager loop made from C (collectives/native_loop) against
  # the binding's loop in Python: loop_probe.py in one process, then nccl-tests, netbench (the C loop, the
  # default) and netbench with NETBENCH_NATIVE_LOOP=python alternated ROUNDS times, 4 collectives, eager
  export CUDA_VISIBLE_DEVICES=0
  local A="-b 8 -e 1G -f 8 -n 50 -w 10" K=all_reduce,all_gather,reduce_scatter,broadcast i c
  mkdir -p "$R/cloop"
  TAILN=20 step loop_probe $PY benchmarks/gpu/loop_probe.py --rounds "${PROBE_ROUNDS:-5}"
  for i in $(seq "${ROUNDS:-3}"); do
    for c in all_reduce all_gather reduce_scatter broadcast; do
      NTARGS="$A -c 0" TAILN=0 nt "1gpu-r$i" $c 0 -g 1; mv "$R/nt_1gpu-r${i}_${c}_g0.txt" "$R/cloop/"
    done
    TAILN=0 step "cloop/nb_rot_r$i" $NB --engine nccl -k $K $A --no-check --no-inventory --no-report \
      --out "$R/cloop/nb_rot_r$i"
    NETBENCH_NATIVE_LOOP=python TAILN=0 step "cloop/nb_py_r$i" $NB --engine nccl -k $K $A --no-check \
      --no-inventory --no-report --out "$R/cloop/nb_py_r$i"
  done
  $PY benchmarks/gpu/rounds.py "$R/cloop" --markdown "$R/cloop/rounds.md"
  unset CUDA_VISIBLE_DEVICES
}

stage_cstate() {  # issue 28: what else separates a small eager op from nccl-tests': torch's legacy default
  # stream against a non-blocking one, the process group beside, 50 against 1,000 operations a loop;
  # loop_probe.py processes alternated with nccl-tests ROUNDS times (into $R/cstate/)
  export CUDA_VISIBLE_DEVICES=0
  local A="-b 8 -e 2M -f 8 -w 10 -c 0 -G 0 -g 1" i
  mkdir -p "$R/cstate"
  for i in $(seq "${ROUNDS:-3}"); do
    LD_LIBRARY_PATH=/tmp/nccl/lib:${LD_LIBRARY_PATH:-} TAILN=0 step "cstate/nt50_r$i" $NT/all_reduce_perf $A -n 50
    TAILN=24 step "cstate/probe50_r$i" $PY benchmarks/gpu/loop_probe.py --rounds 2 --loops 10 --streams current,side
    TAILN=24 step "cstate/probe50nopg_r$i" $PY benchmarks/gpu/loop_probe.py --rounds 2 --loops 10 \
      --streams current,side --no-pg
    LD_LIBRARY_PATH=/tmp/nccl/lib:${LD_LIBRARY_PATH:-} TAILN=0 step "cstate/nt1000_r$i" $NT/all_reduce_perf $A -n 1000
    TAILN=24 step "cstate/probe1000_r$i" $PY benchmarks/gpu/loop_probe.py --rounds 2 --loops 2 --iters 1000 \
      --streams current,side --sizes 8,4096,2097152
  done
  unset CUDA_VISIBLE_DEVICES
}

stage_gputests() {
  local P=$PYTHONPATH
  if ! $PY -c "import pytest" 2>/dev/null; then
    $PY -m pip install -q --no-index --no-deps --target /tmp/tsite third_party/pytest-whl/*.whl; P=$P:/tmp/tsite
  fi
  # addopts cleared: the repository's -n 2 needs pytest-xdist, which a GPU machine may lack
  (cd tests && PYTHONPATH=$P TAILN=12 step gputests $PY -m pytest -o addopts="" -p no:cacheprovider -rs -q \
    test_engines.py test_gpu_copy_matrix.py)
}

stage_pin() {
  export CUDA_VISIBLE_DEVICES=0
  local A="-b 8 -e 2M -f 8 -n 50 -w 10" pin T
  mkdir -p "$R/free" "$R/pin"
  for i in $(seq "${PINROUNDS:-6}"); do
    for pin in free pin; do
      T=(); [ "$pin" = pin ] && T=(taskset -c "${PINCPUS:-2,3}")
      LD_LIBRARY_PATH=/tmp/nccl/lib:${LD_LIBRARY_PATH:-} step "$pin/nt_1gpu-r${i}_all_reduce_g0" \
        ${T[@]+"${T[@]}"} $NT/all_reduce_perf $A -c 0 -G 0 -g 1
      step "$pin/nb_rot_r$i" ${T[@]+"${T[@]}"} $NB --engine nccl -k all_reduce $A --no-check --no-inventory \
        --no-report --out "$R/$pin/nb_rot_r$i"
    done
  done
  for pin in free pin; do $PY benchmarks/gpu/rounds.py "$R/$pin" --markdown "$R/$pin/rounds.md"; done
  unset CUDA_VISIBLE_DEVICES
}

stage_i27() {  # issue 27 on a GPU: per-operation stamps from CUDA events anchored to the host's clock,
  # one rank (NCCL refuses two ranks on one GPU), both engines, with and without step work on the stream
  export CUDA_VISIBLE_DEVICES=0
  step i27_stamps $NB --engine both -k all_reduce -b 1K -e 1M -f 32 -n 50 -w 5 --per-iter --out "$R/nb_i27"
  step i27_work $NB --engine nccl -k all_reduce -b 1K -e 1M -f 32 -n 50 -w 5 --per-iter --step-work 20 \
    --out "$R/nb_i27w"
  for d in nb_i27 nb_i27w; do
    { ls -la "$R/$d"; head -c 1500 "$R/$d/arrivals.jsonl"; echo; $PY -c "import gzip,json,sys
rows=[json.loads(x) for x in gzip.open(sys.argv[1],'rt')]
print(len(rows),'per-iteration records; first:',json.dumps(rows[0])[:600])" "$R/$d/per_iter.jsonl.gz"; } \
      > "$R/${d}_files.txt" 2>&1; cat "$R/${d}_files.txt" | head -20
  done
  unset CUDA_VISIBLE_DEVICES
}

stage_compare() {
  step compare $PY benchmarks/gpu/compare.py "$R" --markdown "$R/compare.md"; cat "$R/compare.md"
}

for s in "$@"; do "stage_$s"; done
snap
