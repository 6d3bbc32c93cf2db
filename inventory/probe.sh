#!/bin/sh
# netbench inventory probe: runs on the node (locally, or over SSH as `sh -s -- [python] [nonce]`
# with this script on stdin) and prints raw tool output in sections; all parsing happens on the
# netbench side (inventory/assemble.py), so this script stays small, POSIX and dash-compatible.
#
# Output: for every section a header line
#     @@netbench-section <name> rc=<exit code>@@            (or ... rc=<n> nonce=<nonce>@@)
# followed by the command's stdout+stderr. A missing tool gives rc=127 and "<tool> not installed".
# Every tool is optional and runs under `timeout` when that exists. Every command reads /dev/null:
# under `sh -s` stdin is this script, and a tool reading stdin would swallow the rest of it.
#
# Arguments / environment (all optional):
#   $1 or NETBENCH_PYTHON        python to ask for python/torch/NCCL/nccl4py versions (default python3)
#   $2 or NETBENCH_PROBE_NONCE   token added to headers so output cannot forge a section
#   $3 or NETBENCH_PROBE_ONLY    "counters": only the port counters (the snapshot a run takes
#                                before and after itself), else everything
#   NETBENCH_PROBE_TIMEOUT       seconds per tool (default 10); NETBENCH_IB_TIMEOUT for fabric
#                                discovery (default 20); NETBENCH_PY_TIMEOUT for python (default 60);
#                                NETBENCH_NCCL_TIMEOUT for the NCCL init (default 20)
#   NETBENCH_IB_FULL=1           keep the whole iblinkinfo output instead of this node's lines
#   NETBENCH_PROBE_NCCL=0        skip the NCCL init on GPU 0 (it holds a CUDA context for seconds)
#   NETBENCH_IB_SYSFS, NETBENCH_NET_SYSFS   roots of /sys/class/infiniband and /sys/class/net

PY=${1:-${NETBENCH_PYTHON:-python3}}
NONCE=${2:-${NETBENCH_PROBE_NONCE:-}}
ONLY=${3:-${NETBENCH_PROBE_ONLY:-}}
T=${NETBENCH_PROBE_TIMEOUT:-10}
IB_T=${NETBENCH_IB_TIMEOUT:-20}
PY_T=${NETBENCH_PY_TIMEOUT:-60}
# The NCCL init gets less than python: the whole probe runs under a per-host limit (60 s by default,
# netbench/sites/ssh/inventory.py), and a hung init must cost its own section, not the node's record.
NCCL_T=${NETBENCH_NCCL_TIMEOUT:-20}
IB_SYS=${NETBENCH_IB_SYSFS:-/sys/class/infiniband}
NET_SYS=${NETBENCH_NET_SYSFS:-/sys/class/net}
LC_ALL=C
export LC_ALL

have() { command -v "$1" >/dev/null 2>&1; }

header() { # header NAME RC
    if [ -n "$NONCE" ]; then
        printf '@@netbench-section %s rc=%s nonce=%s@@\n' "$1" "$2" "$NONCE"
    else
        printf '@@netbench-section %s rc=%s@@\n' "$1" "$2"
    fi
}

limited() { # limited SECONDS CMD ARGS... : run with a timeout when `timeout` exists
    _t=$1
    shift
    if have timeout; then
        timeout "$_t" "$@" </dev/null 2>&1
    else
        "$@" </dev/null 2>&1
    fi
}

section() { # section NAME SECONDS CMD ARGS...
    _name=$1
    _secs=$2
    shift 2
    if ! have "$1"; then
        header "$_name" 127
        printf '%s not installed\n' "$1"
        return 0
    fi
    _out=$(limited "$_secs" "$@")
    _rc=$?
    header "$_name" "$_rc"
    [ -n "$_out" ] && printf '%s\n' "$_out"
    return 0
}

file_section() { # file_section NAME FILE...: the first readable file
    for _f in "$@"; do
        if [ -r "$_f" ]; then
            header "$1" 0
            cat "$_f" </dev/null
            echo
            return 0
        fi
    done
    header "$1" 1
    printf '%s not found\n' "$2"
}

sysfs_ib() {
    if [ ! -d "$IB_SYS" ]; then
        header sysfs-ib 1
        printf '%s not found (no RDMA devices)\n' "$IB_SYS"
        return 0
    fi
    header sysfs-ib 0
    for _d in "$IB_SYS"/*; do
        [ -d "$_d" ] || continue
        _n=${_d##*/}
        for _a in fw_ver board_id hca_type node_guid; do
            [ -r "$_d/$_a" ] && printf '%s/%s: %s\n' "$_n" "$_a" "$(cat "$_d/$_a" 2>/dev/null)"
        done
        if [ -e "$_d/device" ]; then
            _pci=$(readlink "$_d/device" 2>/dev/null)
            [ -n "$_pci" ] && printf '%s/device: %s\n' "$_n" "${_pci##*/}"
            for _a in current_link_speed current_link_width max_link_speed max_link_width; do
                [ -r "$_d/device/$_a" ] && printf '%s/device/%s: %s\n' "$_n" "$_a" "$(cat "$_d/device/$_a" 2>/dev/null)"
            done
            if [ -d "$_d/device/net" ]; then
                printf '%s/device/net:' "$_n"
                for _x in "$_d"/device/net/*; do [ -e "$_x" ] && printf ' %s' "${_x##*/}"; done
                echo
            fi
        fi
        for _p in "$_d"/ports/*; do
            [ -d "$_p" ] || continue
            for _a in rate state phys_state link_layer; do
                [ -r "$_p/$_a" ] && printf '%s/ports/%s/%s: %s\n' "$_n" "${_p##*/}" "$_a" "$(cat "$_p/$_a" 2>/dev/null)"
            done
        done
    done
    return 0
}

ethtool_all() {
    if ! have ethtool; then
        header ethtool-i 127
        echo "ethtool not installed"
        return 0
    fi
    _any=0
    for _d in "$NET_SYS"/*; do
        _n=${_d##*/}
        [ "$_n" = lo ] && continue
        [ -e "$_d/device" ] || continue # virtual devices (veth, bridges) have no firmware to report
        case $_n in *[!A-Za-z0-9_.:@-]*) continue ;; esac
        _any=1
        section "ethtool-i:$_n" "$T" ethtool -i "$_n"
        section "ethtool:$_n" "$T" ethtool "$_n" # link settings: the rate of an Ethernet port
    done
    if [ "$_any" = 0 ]; then
        header ethtool-i 1
        echo "no physical network devices in $NET_SYS"
    fi
    return 0
}

ib_counters() { # every port's counters/ and hw_counters/ files, one "dev/ports/N/dir/name: value" line each
    if [ ! -d "$IB_SYS" ]; then
        header ib-counters 1
        printf '%s not found (no RDMA devices)\n' "$IB_SYS"
        return 0
    fi
    header ib-counters 0
    for _p in "$IB_SYS"/*/ports/*; do
        [ -d "$_p" ] || continue
        _d=${_p%/ports/*}
        for _f in "$_p"/counters/* "$_p"/hw_counters/*; do
            [ -f "$_f" ] && [ -r "$_f" ] || continue
            _rel=${_f#"$_p"/}
            printf '%s/ports/%s/%s: %s\n' "${_d##*/}" "${_p##*/}" "$_rel" "$(cat "$_f" 2>/dev/null)"
        done
    done
    return 0
}

net_mtu() { # "name mtu operstate" of every interface but lo (veths and bridges too: the MTU is the
    # interface's, physical or not, and a host whose MTU differs drops or fragments its peers' frames)
    if [ ! -d "$NET_SYS" ]; then
        header net-mtu 1
        printf '%s not found\n' "$NET_SYS"
        return 0
    fi
    header net-mtu 0
    for _d in "$NET_SYS"/*; do
        _n=${_d##*/}
        [ "$_n" = lo ] && continue
        case $_n in *[!A-Za-z0-9_.:@-]*) continue ;; esac
        printf '%s %s %s\n' "$_n" "$(cat "$_d/mtu" 2>/dev/null)" "$(cat "$_d/operstate" 2>/dev/null)"
    done
    return 0
}

ethtool_stats() { # ethtool -S of every physical netdev (RoCE and Ethernet ports' counters)
    have ethtool || return 0
    for _d in "$NET_SYS"/*; do
        _n=${_d##*/}
        [ -e "$_d/device" ] || continue
        case $_n in *[!A-Za-z0-9_.:@-]*) continue ;; esac
        section "ethtool-S:$_n" "$T" ethtool -S "$_n"
    done
    return 0
}

ib_fabric() { # this node's lines of iblinkinfo -l (or ibnetdiscover -p): the switch ports it is cabled to
    if have iblinkinfo; then
        _tool=iblinkinfo
        set -- iblinkinfo -l
    elif have ibnetdiscover; then
        _tool=ibnetdiscover
        set -- ibnetdiscover -p
    else
        header iblinkinfo 127
        echo "iblinkinfo not installed"
        return 0
    fi
    _out=$(limited "$IB_T" "$@")
    _rc=$?
    header "$_tool" "$_rc"
    if [ "${NETBENCH_IB_FULL:-0}" = 1 ]; then
        printf '%s\n' "$_out"
        return 0
    fi
    # Keep lines naming this host (node descriptions default to "<hostname> <hca>") or a local port GUID.
    _host=$(hostname 2>/dev/null || uname -n)
    _pats="${_host%%.*} "
    if have ibstat; then
        _guids=$(limited "$T" ibstat | sed -n 's/.*Port GUID: *\(0x[0-9a-fA-F]*\).*/\1/p' | grep -v '^0x0*$')
        [ -n "$_guids" ] && _pats="$_pats
$_guids"
    fi
    printf '%s\n' "$_out" | grep -i -F "$_pats"
    return 0
}

nccl_system() {
    _found=0
    _tmp=""
    if have ldconfig; then
        _tmp=$(limited "$T" ldconfig -p | grep 'libnccl\.so' | sed 's/.*=> *//')
    fi
    _out=$(
        for _l in $_tmp; do
            printf 'lib: %s -> %s\n' "$_l" "$(readlink -f "$_l" 2>/dev/null)"
        done
        for _h in /usr/include/nccl.h /usr/local/include/nccl.h "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h"; do
            if [ -r "$_h" ]; then
                printf 'header: %s\n' "$_h"
                grep -E '^#define NCCL_(MAJOR|MINOR|PATCH|SUFFIX)\b' "$_h"
            fi
        done
    )
    [ -n "$_out" ] && _found=1
    if [ "$_found" = 1 ]; then
        header nccl-system 0
        printf '%s\n' "$_out"
    else
        header nccl-system 1
        echo "libnccl not found (ldconfig -p, nccl.h)"
    fi
    return 0
}

# On a node with no NVIDIA device node, torch cannot use a GPU whatever it is, and importing it (3-4
# s of CPU) would only say its version and build: those are read from its files instead
# (importlib's metadata and torch/version.py, the module torch.version is). What that does not prove
# is that torch imports; a broken install then fails in the agent, which names it as the host's.
PY_CODE='
import glob, os, platform, sys
print("python=" + platform.python_version())
print("executable=" + sys.executable)
def said(e):
    return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
def torch_files():
    import importlib.util
    from importlib import metadata
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        raise ModuleNotFoundError("No module named %r" % "torch")
    facts = {}
    with open(os.path.join(os.path.dirname(spec.origin), "version.py")) as fh:
        exec(fh.read(), facts)
    print("torch=" + str(facts.get("__version__") or metadata.version("torch")))
    print("torch_cuda=" + str(facts.get("cuda")))
    print("torch_cuda_available=False")
    print("torch_gpus=0")
def torch_imported():
    import torch
    print("torch=" + str(torch.__version__))
    print("torch_cuda=" + str(torch.version.cuda))
    try:
        ok = torch.cuda.is_available()
        print("torch_cuda_available=" + str(ok))
        print("torch_gpus=" + str(torch.cuda.device_count() if ok else 0))
    except Exception as e:
        print("torch_cuda_available=False")
    try:
        v = torch.cuda.nccl.version()
        print("torch_nccl=" + (".".join(map(str, v)) if isinstance(v, tuple) else str(v)))
    except Exception as e:
        print("torch_nccl_error=" + said(e))
try:
    (torch_imported if glob.glob("/dev/nvidia[0-9]*") else torch_files)()
except Exception as e:
    print("torch_error=" + said(e))
# nccl4py: the NCCL engine of the ranks (collectives/native.py imports nccl.bindings.nccl, the
# same module, so the planner decides the engine from what a rank would find)
try:
    from importlib import metadata
    print("nccl4py=" + metadata.version("nccl4py"))
except Exception:
    pass
try:
    import nccl.bindings.nccl
except Exception as e:
    print("nccl4py_error=%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
else:
    print("nccl4py_import=ok")
'

# What NCCL itself finds on this node: one rank initialises a communicator on GPU 0 with
# NCCL_DEBUG=INFO (the transport it picks: IB, Socket or a plugin, and the devices it uses) and
# NCCL_TOPO_DUMP_FILE (which NICs it can reach with GPU Direct RDMA). Versions and ibstat cannot say
# that NCCL fell back to TCP sockets; this can. The user's NCCL_* variables are kept: they steer
# the ranks too. The dump file's path is the first argument.
NCCL_CODE='
import os, sys
os.environ["NCCL_DEBUG"] = "INFO"
os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
os.environ["NCCL_TOPO_DUMP_FILE"] = sys.argv[1]
import torch
if not torch.cuda.is_available():
    print("torch %s sees no CUDA device" % torch.__version__)
    sys.exit(3)
import torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
t = torch.ones(1, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
dist.destroy_process_group()
'

# Other netbench runs live on this node: each run's agent holds an flock on a marker file named after
# the node's hostname and network namespace (netbench/agents/marker.py, which this mirrors: same folders, same names). A
# marker we can lock is a run that ended (stale); one we cannot is live, and its one-line JSON
# (run id, coordinator, pid) is printed as it is, for the assembler to check.
RUNS_CODE='
import fcntl, glob, os, socket
try:
    netns = os.stat("/proc/self/ns/net").st_ino
except OSError:
    netns = 0
name = "netbench-run.%s.%d.*.lock" % (socket.gethostname(), netns)
for d in ("/run/lock", "/tmp"):
    for path in sorted(glob.glob(os.path.join(d, name)))[:16]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            print("live " + os.read(fd, 512).decode("utf-8", "replace").replace("\n", " "))
        os.close(fd)
'

nccl_init() { # sections nccl-debug (the log) and nccl-topo (the dump); NETBENCH_PROBE_NCCL=0 skips
    if [ "${NETBENCH_PROBE_NCCL:-1}" = 0 ]; then
        header nccl-debug 1
        echo "NCCL probe skipped (NETBENCH_PROBE_NCCL=0)"
        return 0
    fi
    if ! have nvidia-smi; then # no NVIDIA driver: no GPU for NCCL, and no CUDA context to pay for
        header nccl-debug 127
        echo "nvidia-smi not installed (no GPU for NCCL)"
        return 0
    fi
    _topo=$(mktemp 2>/dev/null) || _topo=/tmp/netbench-nccl-topo.$$
    section nccl-debug "$NCCL_T" "$PY" -c "$NCCL_CODE" "$_topo"
    if [ -s "$_topo" ]; then
        header nccl-topo 0
        cat "$_topo" </dev/null
        echo
    else
        header nccl-topo 1
        echo "NCCL wrote no topology dump"
    fi
    rm -f "$_topo"
    return 0
}

if [ "$ONLY" = counters ]; then
    section hostname "$T" hostname
    section netbench-runs "$T" "$PY" -c "$RUNS_CODE"
    ib_counters
    ethtool_stats
    net_mtu
    header end 0
    exit 0
fi

# Untrusted, fabric-supplied text (LLDP, IB node descriptions) comes first: with no nonce the
# reader keeps the last section of a name, so a forged header there is overridden by the real one.
section lldp "$T" lldpcli -f json show neighbors details
ib_fabric
section uname "$T" uname -a
section hostname "$T" hostname
file_section machine-id /etc/machine-id /var/lib/dbus/machine-id
section netbench-runs "$T" "$PY" -c "$RUNS_CODE"
file_section os-release /etc/os-release /usr/lib/os-release
section lscpu "$T" lscpu
section numactl "$T" numactl -H
section nvidia-smi-q-x "$T" nvidia-smi -q -x
section nvidia-smi-topo "$T" nvidia-smi topo -m
section nvidia-smi-nvlink "$T" nvidia-smi nvlink --status
file_section proc-driver /proc/driver/nvidia/version
section ibstat "$T" ibstat
section ibv_devinfo "$T" ibv_devinfo
sysfs_ib
ib_counters
ethtool_all
ethtool_stats
net_mtu
section ofed "$T" ofed_info -s
nccl_system
section python "$PY_T" "$PY" -c "$PY_CODE"
nccl_init
header end 0
