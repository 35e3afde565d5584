#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, built from Debian's packages, to test
# profiles/slurm for real (Debian 12: SLURM 22.05, MUNGE, slurmdbd accounting on MariaDB, so
# `sacct` works as on a production cluster and the SLURM executor plugin takes its default path).
#
#   profiles/slurm/testcluster.sh up        # install what is missing (apt, needs root), start it all
#   profiles/slurm/testcluster.sh status    # daemons, node, queue, accounts
#   profiles/slurm/testcluster.sh down      # cancel jobs, stop every daemon it started, remove its files
#
# Everything it writes is under $GCPIPE_TESTCLUSTER (default /tmp/gcpipe-testcluster): its own
# MUNGE key, MariaDB data directory, SLURM config, state, spool and logs.  Two things must sit at
# the standard places, and `down` removes them: MUNGE's socket /run/munge/munge.socket.2 (SLURM
# 22.05's clients look only there; so no other munged may run) and a link /etc/slurm/slurm.conf
# to the config (the jobstep executor strips SLURM_* variables, SLURM_CONF included, from the
# environment of the `srun` it runs inside each job, so the config must be where srun looks by
# default: https://github.com/snakemake/snakemake-executor-plugin-slurm/issues/164).  No system
# service is started.  Daemons run as root and are stopped by the process ids they recorded.  The
# cluster: cluster "gcpipe-test", partition "debug" (the default), node = this machine with its
# cores and memory, account "gcpipe" for the user.
set -euo pipefail

DIR=${GCPIPE_TESTCLUSTER:-/tmp/gcpipe-testcluster}
DB_PORT=${GCPIPE_TESTCLUSTER_DB_PORT:-3307}
CLUSTER=gcpipe-test
PARTITION=debug
ACCOUNT=gcpipe
PACKAGES=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server)
MUNGE_SOCKET=/run/munge/munge.socket.2
CONF_LINK=/etc/slurm/slurm.conf
export SLURM_CONF="$DIR/etc/slurm.conf"

say() { echo "testcluster: $*"; }
die() { echo "testcluster: error: $*" >&2; exit 1; }

# wait_for SECONDS WHAT COMMAND...: retries COMMAND (quietly) until it succeeds.
wait_for() {
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq "$((seconds * 4))"); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.25
    done
    die "$what did not come up in ${seconds}s; see the logs in $DIR/log"
}

# running PID: the process runs (a zombie does not count: an init that does not reap leaves them).
running() {
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ -n $state && $state != Z ]]
}

# alive PIDFILE: the process it names runs.
alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) && running "$pid"
}

install_packages() {
    local missing=()
    for package in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    if ((${#missing[@]})); then
        [[ $(id -u) == 0 ]] || die "missing Debian packages: ${missing[*]}; install them as root: apt-get install ${missing[*]}"
        say "installing ${missing[*]}"
        apt-get update -q >/dev/null
        # policy-rc.d or no init system: the packages' own services are not started, nor wanted.
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

write_configs() {
    mkdir -p "$DIR"/{etc,log,munge,mysql,state,spool}
    local node memory password
    # This machine as the node, as slurmd sees it; a little memory is kept back so that the
    # node is not drained for "low RealMemory" when the free memory moves.
    node=$(slurmd -C | head -1)
    memory=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
    node=$(sed "s/RealMemory=[0-9]*/RealMemory=$((memory * 95 / 100))/" <<<"$node")
    password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    cat >"$DIR/etc/slurm.conf" <<EOF
# Written by profiles/slurm/testcluster.sh: a one-node test cluster.
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups (containers often lack them): processes are tracked by parentage.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    cat >"$DIR/etc/slurmdbd.conf" <<EOF
# Written by profiles/slurm/testcluster.sh.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$password
StorageLoc=gcpipe_slurm_acct_db
EOF
    chmod 600 "$DIR/etc/slurmdbd.conf"   # slurmdbd refuses a config others can read
    echo "$password" >"$DIR/mysql/slurm.password"
    chmod 600 "$DIR/mysql/slurm.password"
}

start_munge() {
    [[ -S $MUNGE_SOCKET ]] && munge -n >/dev/null 2>&1 && die "another munged answers on $MUNGE_SOCKET; stop it first"
    [[ -f $DIR/munge/munge.key ]] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none; chmod 400 "$DIR/munge/munge.key"; }
    if [[ ! -d $(dirname "$MUNGE_SOCKET") ]]; then
        mkdir -p "$(dirname "$MUNGE_SOCKET")"
        touch "$DIR/created-munge-rundir"
    fi
    # --force: munged would rather not run as root; here it serves only this cluster's daemons.
    munged --force --socket="$MUNGE_SOCKET" --key-file="$DIR/munge/munge.key" \
        --pid-file="$DIR/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
    wait_for 10 "munged" munge -n
}

start_mariadb() {
    if [[ ! -d $DIR/mysql/data ]]; then
        mariadb-install-db --no-defaults --datadir="$DIR/mysql/data" --user=root \
            --auth-root-authentication-method=socket --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1
    fi
    nohup mariadbd --no-defaults --user=root --datadir="$DIR/mysql/data" --socket="$DIR/mysql/mysqld.sock" \
        --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$DIR/mariadbd.pid" \
        --log-error="$DIR/log/mariadbd.log" --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
    wait_for 60 "MariaDB" mariadb --no-defaults --socket="$DIR/mysql/mysqld.sock" -u root -e "SELECT 1"
    mariadb --no-defaults --socket="$DIR/mysql/mysqld.sock" -u root <<EOF
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$DIR/mysql/slurm.password")';
GRANT ALL ON gcpipe_slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
}

start_slurm() {
    slurmdbd
    wait_for 60 "slurmdbd" sacctmgr -n list cluster
    sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true   # already there after a restart
    slurmctld
    wait_for 60 "slurmctld" scontrol ping
    slurmd
    wait_for 60 "the node" bash -c "sinfo -h -o %T | grep -qx idle"
    sacctmgr -i add account "$ACCOUNT" Description="gcpipe test jobs" Organization=gcpipe >/dev/null 2>&1 || true
    sacctmgr -i add user "$(id -un)" Account="$ACCOUNT" DefaultAccount="$ACCOUNT" >/dev/null 2>&1 || true
}

up() {
    [[ $(id -u) == 0 ]] || die "run it as root: the daemons run as root on this test machine"
    for daemon in slurmd slurmctld slurmdbd mariadbd munged; do
        alive "$DIR/$daemon.pid" && die "$daemon is already running (pid $(cat "$DIR/$daemon.pid")); run '$0 down' first"
    done
    install_packages
    if [[ -e $CONF_LINK || -L $CONF_LINK ]] && [[ $(readlink "$CONF_LINK") != "$SLURM_CONF" ]]; then
        die "$CONF_LINK exists and is not this test cluster's; this machine has a SLURM of its own"
    fi
    write_configs
    mkdir -p "$(dirname "$CONF_LINK")"
    ln -sfn "$SLURM_CONF" "$CONF_LINK"
    start_munge
    start_mariadb
    start_slurm
    say "up: cluster $CLUSTER, partition $PARTITION, account $ACCOUNT; $(sinfo -h -N -o '%N %c CPUs %m MB %T')"
}

stop() {   # stop NAME: TERM by its pid file (which the daemon removes as it exits), KILL after 30 s
    local name=$1 pid
    pid=$(cat "$DIR/$name.pid" 2>/dev/null) && running "$pid" || return 0
    kill -TERM "$pid"
    for _ in $(seq 120); do
        running "$pid" || { say "stopped $name (pid $pid)"; return 0; }
        sleep 0.25
    done
    kill -KILL "$pid" 2>/dev/null || true
    say "killed $name (pid $pid)"
}

down() {
    if alive "$DIR/slurmctld.pid"; then
        scancel --full --cluster="$CLUSTER" --partition="$PARTITION" --user="$(id -un)" 2>/dev/null || true
        for _ in $(seq 120); do
            [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
            sleep 0.25
        done
    fi
    for daemon in slurmd slurmctld slurmdbd mariadbd munged; do stop "$daemon"; done
    [[ $(readlink "$CONF_LINK" 2>/dev/null) == "$SLURM_CONF" ]] && rm -f "$CONF_LINK"
    [[ -f $DIR/created-munge-rundir ]] && rmdir "$(dirname "$MUNGE_SOCKET")" 2>/dev/null
    rm -rf "$DIR"
    say "down: every daemon stopped, $DIR and $CONF_LINK removed"
}

status() {
    local running=0
    for daemon in munged mariadbd slurmdbd slurmctld slurmd; do
        if alive "$DIR/$daemon.pid"; then
            echo "$daemon: running (pid $(cat "$DIR/$daemon.pid"))"
            running=$((running + 1))
        else
            echo "$daemon: not running"
        fi
    done
    if alive "$DIR/slurmctld.pid"; then
        sinfo -N -o "%N %P %c %m %T"
        squeue -o "%i %j %T %M %k"
        sacctmgr -n list association format=cluster%12,account%10,user%10
    fi
    ((running == 5))
}

case ${1:-} in
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
