#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the test that runs a split kiln run as a Slurm
# job array: Debian's slurm-wlm and munge (installed when missing), every file of the cluster
# (config, munge key and socket, state, logs) in STATE_DIR, the daemons on loopback. Nothing
# under /etc is touched, so a machine's own cluster is left alone.
#
#   scripts/slurm-cluster.sh start STATE_DIR   # then: export SLURM_CONF=STATE_DIR/slurm.conf
#   scripts/slurm-cluster.sh stop STATE_DIR
#
# The node declares 8 CPUs and 16 GB whatever the machine has (SlurmdParameters=config_overrides):
# the shards' containers run under the Docker engine, outside the tasks' allocations, so the
# figures only decide how many tasks run at once.
set -euo pipefail

log() { echo "slurm-cluster: $*" >&2; }

action=${1:-}
state=${2:-}
if [[ -z $action || -z $state ]]; then
    echo "usage: $0 start|stop STATE_DIR" >&2
    exit 2
fi
mkdir -p "$state"
state=$(cd "$state" && pwd)

stop() {
    for pidfile in "$state/slurmd.pid" "$state/slurmctld.pid" "$state/munged.pid"; do
        if [[ -s $pidfile ]]; then
            pid=$(cat "$pidfile")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$pidfile"
        fi
    done
}

# A free TCP port on loopback.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

case $action in
stop)
    stop
    exit 0
    ;;
start) ;;
*)
    echo "usage: $0 start|stop STATE_DIR" >&2
    exit 2
    ;;
esac

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    log "installing slurm-wlm and munge"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
fi

stop
node=$(hostname -s)
mkdir -p "$state/ctld" "$state/spool" "$state/munge"
chmod 700 "$state/munge"
if [[ ! -s $state/munge/munge.key ]]; then
    dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$state/munge/munge.key"
fi
munged --force \
    --socket="$state/munge/munge.socket" \
    --key-file="$state/munge/munge.key" \
    --pid-file="$state/munged.pid" \
    --log-file="$state/munged.log" \
    --seed-file="$state/munge/munged.seed" </dev/null >/dev/null 2>&1

cat >"$state/slurm.conf" <<EOF
ClusterName=kiln-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$state/munge/munge.socket
CryptoType=crypto/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=16000 State=UNKNOWN
PartitionName=kiln Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$state/slurm.conf
setsid slurmctld -f "$SLURM_CONF" </dev/null >"$state/slurmctld.out" 2>&1 &
setsid slurmd -f "$SLURM_CONF" </dev/null >"$state/slurmd.out" 2>&1 &

# Ready when the node takes work.
for _ in $(seq 120); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
        log "one-node cluster up ($node); SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.5
done
log "the cluster did not come up; its logs:"
tail -n 20 "$state"/*.log "$state"/*.out >&2 || true
stop
exit 1
