#!/usr/bin/env bash
# Hosts on one machine: Linux network namespaces dtnn-h0 .. dtnn-h<N-1>, each with one veth
# link (10.99.0.<k+1>/24, a private test subnet) to a bridge inside its own namespace
# (dtnn-sw), so the machine's own network is never touched. Open MPI starts ranks in them
# through scripts/netns-agent.sh as its rsh agent (see `mpirun-args` below).
#   scripts/netns.sh up N [RATE]   create N hosts; RATE (e.g. 1gbit) limits each host's link
#   scripts/netns.sh down          remove every dtnn-* namespace (also after a failure)
#   scripts/netns.sh mpirun-args   the mpirun options that run over these hosts
#   scripts/netns.sh exec HOST CMD...  run CMD as host HOST (e.g. mpirun on dtnn-h0)
#   scripts/netns.sh check         exit 0 where hosts can be made here, else 1 and one line why
#                                  (the tests skip with it)
# Needs root, iproute2 (ip, tc) and util-linux (unshare).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
subnet=10.99.0

down() {
    for ns in $(ip netns list 2>/dev/null | awk '/^dtnn-/{print $1}'); do
        ip netns del "$ns" 2>/dev/null || true
    done
}

up() {
    local hosts=$1 rate=${2:-}
    [[ $hosts -ge 1 && $hosts -le 64 ]] || { echo "netns.sh: 1 to 64 hosts, not $hosts" >&2; exit 2; }
    down
    trap 'down' ERR
    ip netns add dtnn-sw
    ip -n dtnn-sw link add br0 type bridge
    ip -n dtnn-sw link set br0 up
    ip -n dtnn-sw link set lo up
    for ((k = 0; k < hosts; k++)); do
        local ns=dtnn-h$k
        ip netns add "$ns"
        ip link add "veth$k" netns "$ns" type veth peer name "port$k" netns dtnn-sw
        ip -n "$ns" link set "veth$k" name eth0
        ip -n "$ns" addr add "$subnet.$((k + 1))/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        ip -n dtnn-sw link set "port$k" master br0
        ip -n dtnn-sw link set "port$k" up
        if [[ -n $rate ]]; then
            # tbf: the link's rate, a burst of ~1 ms at that rate (at least 32 KiB), 50 ms queue.
            tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
        fi
    done
    trap - ERR
    echo "netns.sh: $hosts hosts dtnn-h0..dtnn-h$((hosts - 1)) on $subnet.0/24${rate:+, links $rate}"
}

# routed direct: every daemon talks straight to mpirun. Open MPI's default tree (radix)
# once failed in CI with "ORTE does not know how to route a message to the specified daemon"
# on 2 hosts x 2 ranks; a direct route per daemon is what a few dozen hosts need anyway.
mpirun_args() {
    echo "--mca plm_rsh_agent $here/netns-agent.sh --mca btl tcp,self --mca routed direct" \
         "--mca btl_tcp_if_include $subnet.0/24 --mca oob_tcp_if_include $subnet.0/24"
}

# A host is its network namespace plus a UTS namespace of its own with hostname HOST, as
# on real hosts: Open MPI then knows which host mpirun runs on (it starts no daemon there),
# names its session directories per host, and counts nodes by name. hwloc's I/O plugins
# (PCI, OpenCL, GL) are switched off: they probe devices that a namespace's fresh /sys and
# the CUDA/OpenCL libraries of a GPU-less machine expose half-way, and Open MPI's launcher
# crashed (exit 139, in hwloc's discovery) now and then inside a namespace; Open MPI needs
# only the CPU topology here. The environment reaches every process that mpirun starts.
exec_on() {
    local host=$1
    shift
    [[ $host =~ ^dtnn-h[0-9]+$ ]] || { echo "netns.sh: no such host '$host'" >&2; exit 2; }
    export HWLOC_COMPONENTS=-pci,-opencl,-gl
    exec ip netns exec "$host" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

# Whether this machine lets us make hosts: root, iproute2, network and UTS namespaces.
check() {
    [[ $(id -u) -eq 0 ]] || { echo "network namespaces need root"; return 1; }
    command -v ip >/dev/null || { echo "iproute2 (ip) is not installed"; return 1; }
    ip netns add dtnn-probe 2>/dev/null ||
        { echo "this kernel or container does not allow ip netns"; return 1; }
    if ! ip netns exec dtnn-probe unshare --uts true 2>/dev/null; then
        ip netns del dtnn-probe
        echo "this kernel or container does not allow unshare --uts"
        return 1
    fi
    ip netns del dtnn-probe
}

case ${1:-} in
check) check ;;
up) up "${2:?hosts}" "${3:-}" ;;
down) down ;;
mpirun-args) mpirun_args ;;
exec) shift; exec_on "${1:?host}" "${@:2}" ;;
*) echo "usage: netns.sh up N [RATE] | down | mpirun-args | exec HOST CMD... | check" >&2; exit 2 ;;
esac
