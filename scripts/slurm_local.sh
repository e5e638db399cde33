#!/usr/bin/env bash
# A real, throw-away SLURM cluster of one node (this machine, on 127.0.0.1), for trying
# `jaxattn sweep submit --executor slurm` and `srun ... --distributed` without a cluster; the
# tests (tests/test_slurm.py) use it too. Needs root and Debian's slurm-wlm and munge packages
# (apt-get install slurm-wlm munge).
#
#   bash scripts/slurm_local.sh start DIR   # config, keys, state and logs all in DIR
#   export SLURM_CONF=DIR/slurm.conf        # printed by start: every SLURM command needs it
#   bash scripts/slurm_local.sh stop DIR
#
# Nothing outside DIR is written: its own munge key and socket, its own ports (free ones, or
# SLURMCTLD_PORT / SLURMD_PORT), so it neither needs nor disturbs a system munge or SLURM.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
[ "$cmd" = start ] && mkdir -p "$2"
DIR=$(cd "$2" && pwd)
CONF=$DIR/slurm.conf
NODE=$(hostname -s)
export SLURM_CONF=$CONF

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# the pid in FILE, if that process is alive
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop() {
  # cancel jobs first: slurmd gone, their processes would be left running
  if alive "$DIR/run/slurmctld.pid"; then
    scancel --quiet --user "$(id -un)" 2>/dev/null || true
    for _ in $(seq 30); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  for d in slurmd slurmctld munged; do
    if alive "$DIR/run/$d.pid"; then
      pid=$(cat "$DIR/run/$d.pid")
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
    fi
    rm -f "$DIR/run/$d.pid"
  done
  echo "stopped the SLURM cluster in $DIR"
}

write_conf() {
  local mem
  # slurmd drains a node that has less memory than configured: leave a margin
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  cat > "$CONF" <<EOF
ClusterName=local
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=${SLURMCTLD_PORT:-$(free_port)}
SlurmdPort=${SLURMD_PORT:-$(free_port)}
SlurmUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
# cred_expire also delays a requeued job's restart (120 s by default): 10 s here
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# no cgroups: plain process tracking works in containers too
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
# without accounting, scontrol show job is the only record of a finished job: keep it an hour
MinJobAge=3600
# CPUs are what jobs share; memory is not enforced (CR_CPU), but --mem is checked against RealMemory
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# a requeued array task (submitit's checkpointing, scontrol requeue) runs again
JobRequeue=1
# a node that was down comes back by itself once slurmd answers
ReturnToService=2
# look at pending jobs every 2 s (60 s by default): a requeued task starts soon after it may
SchedulerParameters=sched_interval=2,bf_interval=2
# seconds between SIGTERM and SIGKILL of a cancelled or requeued job (30 by default; submitit's
# tasks ignore SIGTERM, so they would just run on)
KillWait=2
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  if alive "$DIR/run/slurmctld.pid"; then
    echo "a cluster is already running in $DIR (stop it first)" >&2
    exit 1
  fi
  for exe in munged slurmctld slurmd sinfo; do
    command -v "$exe" >/dev/null || [ -x "/usr/sbin/$exe" ] || { echo "$exe not found: apt-get install slurm-wlm munge" >&2; exit 1; }
  done
  [ "$(id -u)" -eq 0 ] || { echo "needs root (slurmd starts jobs as their user)" >&2; exit 1; }
  PATH=$PATH:/usr/sbin
  mkdir -p "$DIR"/{munge,state,spool,run,log}
  chmod 755 "$DIR/munge"
  [ -f "$DIR/munge/munge.key" ] || mungekey --create --keyfile "$DIR/munge/munge.key"
  chmod 600 "$DIR/munge/munge.key"
  write_conf
  # --force: DIR may sit below a folder others cannot enter (pytest's tmp), which munged
  # refuses by default; the clients all run as root here, so that does not matter
  munged --force --key-file "$DIR/munge/munge.key" --socket "$DIR/munge/munge.socket" \
    --pid-file "$DIR/run/munged.pid" --log-file "$DIR/log/munged.log" --seed-file "$DIR/munge/munged.seed"
  # -c: a fresh start, whatever an earlier run in DIR left (old jobs, a node marked down)
  slurmctld -c -f "$CONF"
  slurmd -f "$CONF" -N "$NODE"
  local state=""
  for _ in $(seq 120); do
    state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.5
  done
  if [ "$state" != idle ]; then
    echo "the node $NODE is not idle after 60 s (state: '${state:-no answer}'); the logs:" >&2
    for f in "$DIR"/log/*.log; do echo "== $f" >&2; tail -n 20 "$f" >&2; done
    stop >&2
    exit 1
  fi
  echo "SLURM cluster of one node ($NODE, $(nproc) CPUs) running in $DIR; to use it:"
  echo "export SLURM_CONF=$CONF"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
