#!/usr/bin/env bash
# The 4,096-node report on the lent GPU machine (16 cores, 128 GiB: the simulation of 8.4 M pair rows
# does not fit this VM alongside anything else): run there with `carry: [".whl"]`; report.html comes back
# under $OUT for a headless browser here.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/plotly*.whl .whl/narwhals*.whl 2>&1 | tail -2
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site . 2>&1 | tail -2
export PYTHONPATH=/tmp/site
nproc; free -g | head -2
(time python3 benchmarks/bench_scale.py --nodes 4096 --leaves 128 --pair-sizes 1G --fault node:node2049=0.6 --run /tmp/r4096) 2>&1 | tee $OUT/bench_scale-4096.txt
ls -la /tmp/r4096 | tee -a $OUT/bench_scale-4096.txt
cp /tmp/r4096/report.html $OUT/report-4096.html; cp /tmp/r4096/findings.json $OUT/findings-4096.json
