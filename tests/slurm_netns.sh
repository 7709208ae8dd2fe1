#!/usr/bin/env bash
# A real Slurm (Debian's slurm-wlm 22.05, munge for authentication) on two network-namespace
# hosts (scripts/netns.sh): slurmctld and one slurmd per host, all started, configured and
# stopped here. Jobs, each 2 hosts x 1 rank, whose final weights must equal one process's
# within the multihost test's 2e-5 (lenet5, 20 SGD-momentum steps):
#  - srun --mpi=pmix dtnn train (ranks started by srun, joined through Slurm's PMIx plugin);
#  - sbatch scripts/slurm/dtnn-train.sbatch, once with srun inside, once with mpirun inside;
#  - that script again on the first one's checkpoint with more steps: it resumes (as a
#    requeued job does) and equals one process run for the longer count;
#  - srun --mpi=none stops with a message naming --mpi=pmix instead of training twice.
# srun --mpi=pmi2 is tried and its outcome printed as a note (Debian's Open MPI has no PMI-2).
# Skipped (77) with the reason where it cannot run: not root, no namespaces, Slurm or munge
# not installed, an MPI other than Open MPI, or daemons that do not come up.
# Usage: slurm_netns.sh DTNN CKDIFF MPIRUN TMPDIR
set -u
# Absolute: the batch jobs run in the tmp directory.
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
dtnn=$(absolute "$1")
ckdiff=$(absolute "$2")
mpirun=$(absolute "$3")
tmp=$4
root=$(cd "$(dirname "$0")/.." && pwd)
netns=$root/scripts/netns.sh
rm -rf "$tmp" && mkdir -p "$tmp"
tmp=$(cd "$tmp" && pwd)
skip() { echo "skipped: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "network namespaces and Slurm's daemons need root"
for tool in slurmctld slurmd slurmstepd munged srun sbatch sinfo scontrol nsenter ip; do
    command -v $tool >/dev/null || skip "$tool is not installed (make test-deps installs slurm-wlm and munge)"
done
"$mpirun" --version 2>&1 | grep -qiE "open ?mpi|openrte" || skip "the jobs are set up for Open MPI"
why=$("$root/scripts/netns.sh" check) || skip "$why"

pids=()
cleanup() {
    [[ -e $tmp/slurm.conf ]] && timeout 10 "$netns" exec dtnn-h0 scancel --full --user=root \
        >/dev/null 2>&1
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for _ in $(seq 100); do
        local alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [[ $alive -eq 0 ]] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    wait 2>/dev/null
    "$netns" down
    # Kept after a failure for its logs (printed above); removed when everything passed.
    [[ ${failures:-1} -eq 0 ]] && rm -rf "$tmp"
}
trap cleanup EXIT
"$netns" up 2 >/dev/null || { echo "FAIL: netns.sh up 2"; exit 1; }

# munge: one daemon with its own key and socket; a path socket reaches every namespace host.
mkdir -m 700 "$tmp/munge"
head -c 1024 /dev/urandom >"$tmp/munge/munge.key" && chmod 400 "$tmp/munge/munge.key"
munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/socket" \
    --pid-file="$tmp/munge/pid" --log-file="$tmp/munge/log" --seed-file="$tmp/munge/seed" \
    2>>"$tmp/munge/log" &
pids+=($!)

# One slurm.conf for all: state, spool, pid, log and the jobs' TmpFS per node (%n), since the
# hosts share one filesystem (PMIx's client directory under TmpFS collided on /tmp: "Cannot
# create directory /tmp/spmix_appdir_0_1.0: File exists"). No cgroup, systemd or accounting.
mkdir -p "$tmp/state" "$tmp/spool-dtnn-h0" "$tmp/spool-dtnn-h1" "$tmp/tmp-dtnn-h0" \
    "$tmp/tmp-dtnn-h1"
cat >"$tmp/slurm.conf" <<EOF
ClusterName=dtnn
SlurmctldHost=dtnn-h0(10.99.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool-%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd-%n.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd-%n.log
TmpFS=$tmp/tmp-%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
MinJobAge=5
KillWait=5
NodeName=dtnn-h0 NodeAddr=10.99.0.1 CPUs=2
NodeName=dtnn-h1 NodeAddr=10.99.0.2 CPUs=2
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf
for _ in $(seq 100); do [[ -S $tmp/munge/socket ]] && break; sleep 0.1; done
[[ -S $tmp/munge/socket ]] || skip "munged did not start: $(tail -n 3 "$tmp/munge/log")"

"$netns" exec dtnn-h0 slurmctld -D -c -f "$tmp/slurm.conf" 2>>"$tmp/slurmctld.log" &
pids+=($!)
# slurmd 22.05 needs a cgroup file system under /sys/fs/cgroup even with proctrack/linuxproc
# ("No filesystem mounted on /sys/fs/cgroup ... slurmd initialization failed"), and `ip netns
# exec` mounts a fresh /sys without one; so slurmd enters only the host's network namespace
# (nsenter --net) and a UTS namespace named after it, as `netns.sh exec` does otherwise.
for k in 0 1; do
    HWLOC_COMPONENTS=-pci,-opencl,-gl nsenter --net=/run/netns/dtnn-h$k unshare --uts \
        /bin/sh -c 'hostname "$0" && exec "$@"' dtnn-h$k \
        slurmd -D -N dtnn-h$k -f "$tmp/slurm.conf" 2>>"$tmp/slurmd-dtnn-h$k.log" &
    pids+=($!)
done
on_h0() { "$netns" exec dtnn-h0 "$@"; }
idle=""
for _ in $(seq 300); do
    idle=$(on_h0 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | tr '\n' ' ')
    [[ $idle == "dtnn-h0 dtnn-h1 " ]] && break
    sleep 0.2
done
if [[ $idle != "dtnn-h0 dtnn-h1 " ]]; then
    for log in slurmctld slurmd-dtnn-h0 slurmd-dtnn-h1; do
        echo "$log.log:" && tail -n 5 "$tmp/$log.log" | sed 's/^/    /'
    done
    skip "the Slurm daemons did not bring both nodes up within 60 s (idle: '$idle')"
fi
echo "ok: slurmctld and 2 slurmd up: $(on_h0 sinfo -h -o '%P %a %D %t %N')"

# Open MPI over the namespace subnet only; session directories of its own (as multihost_tcp).
export OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=10.99.0.0/24 \
    OMPI_MCA_oob_tcp_if_include=10.99.0.0/24 OMPI_MCA_orte_tmpdir_base=$tmp/ompi
mkdir -p "$tmp/ompi"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

train=(--model lenet5 --dataset synthetic --synthetic-shape 1x28x28 --synthetic-samples 640
       --batch-size 32 --optimizer sgd --lr 0.05 --momentum 0.9 --seed 3 --quiet)
"$dtnn" train "${train[@]}" --threads 1 --steps 20 --save "$tmp/ref20.safetensors" >/dev/null &&
"$dtnn" train "${train[@]}" --threads 1 --steps 30 --save "$tmp/ref30.safetensors" >/dev/null ||
    { fail "the one-process runs"; exit 1; }

# check NAME RC OUT WEIGHTS REF LAUNCHER: exit 0, 2 nodes dtnn-h[0-1] started by LAUNCHER,
# weights equal REF.
check() {
    local name=$1 rc=$2 out=$3 weights=$4 ref=$5 launcher=$6 line diff
    line=$(grep "data parallel on" "$out")
    if [[ $rc -ne 0 || $line != *"(2 nodes: dtnn-h[0-1], "*"started by $launcher, Slurm job "* ]]
    then
        fail "$name: exit $rc, start-up line '$line':"
        sed 's/^/    /' "$out" | tail -15
    elif diff=$("$ckdiff" "$ref" "$weights" 2e-5); then
        echo "ok: $name: ${line#*(}"
        echo "    $diff"
    else
        fail "$name: $diff"
    fi
}

# 1. srun, one task per rank.
timeout 300 "$netns" exec dtnn-h0 srun -N 2 --ntasks-per-node=1 --mpi=pmix "$dtnn" train \
    "${train[@]}" --threads 1 --steps 20 --save "$tmp/srun.safetensors" >"$tmp/srun.out" 2>&1
check "srun --mpi=pmix, 2 hosts x 1 rank" $? "$tmp/srun.out" "$tmp/srun.safetensors" \
    "$tmp/ref20.safetensors" "srun --mpi=pmix"

# 2. and 3. The example batch script, unchanged, with srun and with mpirun inside; threads
# from --cpus-per-task (SLURM_CPUS_PER_TASK).
batch() { # name launch checkpoint steps
    DTNN=$dtnn DTNN_LAUNCH=$2 DTNN_MPIRUN=$mpirun DTNN_CHECKPOINT=$3 timeout 300 \
        "$netns" exec dtnn-h0 sbatch --wait --quiet -N 2 --ntasks-per-node=1 --cpus-per-task=1 \
        --time=5 --chdir="$tmp" --output="$tmp/$1.out" "$root/scripts/slurm/dtnn-train.sbatch" \
        "${train[@]}" --steps "$4" >"$tmp/$1.sbatch" 2>&1
}
batch sbatch-srun srun "$tmp/sbatch-srun.safetensors" 20
check "sbatch dtnn-train.sbatch (srun inside)" $? "$tmp/sbatch-srun.out" \
    "$tmp/sbatch-srun.safetensors" "$tmp/ref20.safetensors" "sbatch+srun --mpi=pmix"
batch sbatch-mpirun mpirun "$tmp/sbatch-mpirun.safetensors" 20
check "sbatch dtnn-train.sbatch (mpirun inside)" $? "$tmp/sbatch-mpirun.out" \
    "$tmp/sbatch-mpirun.safetensors" "$tmp/ref20.safetensors" "sbatch+mpirun"

# 4. A requeued job finds its checkpoint: the script resumes from it (here 20 steps done, 30
# asked) and ends where one process's 30 steps end.
cp "$tmp/sbatch-srun.safetensors" "$tmp/requeued.safetensors"
batch requeued srun "$tmp/requeued.safetensors" 30
rc=$?
if grep -q "resuming from $tmp/requeued.safetensors at epoch [0-9]*, step 20" "$tmp/requeued.out"; then
    check "dtnn-train.sbatch on its checkpoint resumes (step 20 -> 30)" $rc \
        "$tmp/requeued.out" "$tmp/requeued.safetensors" "$tmp/ref30.safetensors" \
        "sbatch+srun --mpi=pmix"
else
    fail "dtnn-train.sbatch did not resume from its checkpoint (exit $rc):"
    sed 's/^/    /' "$tmp/requeued.out" | tail -15
fi

# 5. srun --mpi=none: Open MPI's ranks get no process manager; dtnn must stop, not train
# twice into one file.
timeout 120 "$netns" exec dtnn-h0 srun -N 2 --ntasks-per-node=1 --mpi=none "$dtnn" train \
    "${train[@]}" --threads 1 --steps 20 --save "$tmp/none.safetensors" >"$tmp/none.out" 2>&1
rc=$?
if [[ $rc -ne 0 && ! -e $tmp/none.safetensors ]] && grep -q "srun --mpi=pmix" "$tmp/none.out"
then
    echo "ok: srun --mpi=none stops (exit $rc): $(grep -m1 "dtnn train:" "$tmp/none.out")"
else
    fail "srun --mpi=none: exit $rc:"
    sed 's/^/    /' "$tmp/none.out" | tail -15
fi

# PMI-2: a finding, not a requirement (an Open MPI built --with-pmi would run).
timeout 120 "$netns" exec dtnn-h0 srun -N 2 --ntasks-per-node=1 --mpi=pmi2 "$dtnn" train \
    "${train[@]}" --threads 1 --steps 2 >"$tmp/pmi2.out" 2>&1
rc=$?
why=$(grep -m1 -A1 "direct launched" "$tmp/pmi2.out" | tr '\n' ' ')
echo "note: srun --mpi=pmi2: exit $rc${why:+: $why}"

[[ $failures -eq 0 ]] && echo "slurm_netns: all passed" || echo "slurm_netns: $failures failed"
[[ $failures -eq 0 ]]
