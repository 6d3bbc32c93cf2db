#!/usr/bin/env bash
# Issue 29 on a GPU machine (the lent H200): one rank joins 1,000 fresh 1-rank NCCL groups, as a rank
# of a long pairwise sweep does, and NCCL's GPU memory must stay within 2 GiB of what the GPU used
# before (tests/test_group_resources.py::test_a_thousand_nccl_groups_on_one_gpu_keep_nccl_memory_within_2_gib;
# before issue 29 every group was kept: ~390 MiB each, out of memory at ~360). Also the CPU test
# (gloo, two ranks: fds, threads, RSS). Run from the repo root there, with .whl carried if the
# machine's python lacks netbench's dependencies or pytest: benchmarks/gpu/check_groups.sh
# Output (samples every 50 groups, pass/fail) lands in $OUT/groups.txt.
set -u
OUT=${OUT:-/tmp/netbench-groups}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONSAFEPATH=1
ls .whl/*.whl > /dev/null 2>&1 && \
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site .
{ nvidia-smi --query-gpu=name,memory.used,driver_version --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"; } \
  | tee "$OUT/env.txt"
# addopts cleared: the repository's -n 2 needs pytest-xdist, which a GPU machine may lack
(cd tests && timeout "${STEP_TIMEOUT:-580}" python3 -m pytest -o addopts="" -p no:cacheprovider -rs -s -q \
    test_group_resources.py -k "${K:-nccl}") > "$OUT/groups.txt" 2>&1
rc=$?
echo "=== check_groups rc=$rc" | tee -a "$OUT/groups.txt"
grep -E "GPU memory above|rank samples|passed|failed|skipped|Error" "$OUT/groups.txt" | tail -n 12
exit $rc
