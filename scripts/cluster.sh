#!/usr/bin/env bash
# Local cluster stack for OnceGuard: a 3-broker KRaft Kafka cluster, a 3-node MariaDB Galera
# cluster and a 3-node Redis Cluster, all on loopback ports chosen at the first `up`, with data
# under .cluster/ of this checkout (or $ONCEGUARD_CLUSTER_DIR). Started from the machine's
# packages (mariadbd + galera-4, redis-server) and the Kafka jars scripts/stack.sh fetches.
# Never touches the machine's MariaDB (3306) or Redis (6379).
#
#   scripts/cluster.sh up [kafka|galera|redis...]   start the clusters (default: all three)
#   scripts/cluster.sh down                         stop every node, remove the data dirs
#   scripts/cluster.sh status                       one line per node
#   scripts/cluster.sh env                          write and print .cluster/env (addresses)
#   scripts/cluster.sh kill NODE                    SIGKILL one node (e.g. kafka-2, galera-3, redis-1)
#   scripts/cluster.sh stop NODE                    SIGTERM one node and wait for it to exit
#   scripts/cluster.sh start NODE                   start a stopped node again: same ports, same data
#   scripts/cluster.sh pause NODE                   SIGSTOP one node (frozen: alive, answers nothing)
#   scripts/cluster.sh resume NODE                  SIGCONT a paused node
#
# Kafka: replication factor 3, min.insync.replicas=2, every broker also a controller (quorum of 3).
# Each broker also has a RELAYED listener advertised at another port, where nothing listens until
# a test starts a relay there (a delaying TCP proxy to the listener, for added RTT): a client
# bootstrapped at ONCEGUARD_CLUSTER_KAFKA_RELAY_BOOTSTRAP reaches every broker through its relay,
# one bootstrapped at ONCEGUARD_CLUSTER_KAFKA_BOOTSTRAP directly. ONCEGUARD_CLUSTER_KAFKA_RELAYED
# lists the listeners the relays forward to (broker i's relay to the i-th).
# The brokers are Kafka 4.4 (scripts/kafka/pom.xml); ONCEGUARD_CLUSTER_KAFKA=3.5 at the first `up`
# makes them Kafka 3.5.2 (scripts/kafka/3.5/pom.xml, jars in .stack/kafka-3.5), kept until `down`.
# Galera: multi-primary, rsync SST; `start galera-N` joins the running nodes (IST), or bootstraps
# a new cluster from that node when none runs and it has the latest commit (`up galera` restarts a
# stopped cluster from that node). Redis: 3 masters (redis-1..3 when created) and one
# replica each (redis-4..6), cluster-node-timeout ONCEGUARD_CLUSTER_REDIS_NODE_TIMEOUT ms (default
# 2000): a master killed is replaced by its replica within seconds (a real failover: writes the
# old master acknowledged but had not yet replicated are lost). Replicas fail over however stale
# (cluster-replica-validity-factor 0). A restarted node keeps its role and slots (nodes.conf) but
# not its keys; a restarted former master rejoins as a replica of the node that replaced it.
# Heaps and buffers are small (ONCEGUARD_CLUSTER_KAFKA_HEAP, default "-Xms128m -Xmx384m").
set -euo pipefail

LOG_TAG=cluster
# The helpers (log, die, pid_matches, stop_pid, apt_install, kafka_libs, STACKUTIL, env_line...)
# and the Kafka jar location are stack.sh's: one copy of that machinery.
# shellcheck source=stack.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/stack.sh"

CLUSTER_DIR="${ONCEGUARD_CLUSTER_DIR:-$ROOT/.cluster}"
PORTS_FILE="$CLUSTER_DIR/ports"      # NAME=PORT lines, chosen at the first `up`, kept until `down`
CLUSTER_ENV="$CLUSTER_DIR/env"
NODES=(1 2 3)
REDIS_NODES=(1 2 3 4 5 6)   # 1..3 masters, 4..6 their replicas (when created)
REDIS_NODE_TIMEOUT="${ONCEGUARD_CLUSTER_REDIS_NODE_TIMEOUT:-2000}"
read -r -a CLUSTER_KAFKA_HEAP <<<"${ONCEGUARD_CLUSTER_KAFKA_HEAP:--Xms128m -Xmx384m}"
GALERA_PROVIDER=/usr/lib/galera/libgalera_smm.so
# As root, mariadbd runs as `mysql`: the rsync SST daemon a joiner starts would otherwise drop
# root for `nobody` and could not write the joiner's datadir.
if [[ $(id -u) -eq 0 ]] && id mysql >/dev/null 2>&1; then GALERA_USER=mysql; else GALERA_USER="$(id -un)"; fi
START_TIMEOUT="${ONCEGUARD_CLUSTER_START_TIMEOUT:-120}"   # seconds, per node

cluster_lock() {
  mkdir -p "$CLUSTER_DIR"
  exec 9>"$CLUSTER_DIR/lock"
  flock -w 300 9 || die "another cluster.sh holds $CLUSTER_DIR/lock for more than 300s"
}

nodes_of() { # component -> its node indexes
  if [[ $1 == redis ]]; then echo "${REDIS_NODES[@]}"; else echo "${NODES[@]}"; fi
}

port() { # NAME -> the port recorded for it, or nothing
  [[ -f $PORTS_FILE ]] && sed -n "s/^$1=//p" "$PORTS_FILE" || true
}

# Records N fresh ports per node under NAME_i_<suffix> for each suffix given.
assign_ports() { # component bus(0|1) suffix...
  local comp=$1 bus=$2 i s nodes
  shift 2
  read -r -a nodes <<<"$(nodes_of "$comp")"
  local n=$((${#nodes[@]} * $#)) ports
  read -r -a ports <<<"$("${STACKUTIL[@]}" free-ports "$n" $([[ $bus == 1 ]] && echo --bus))"
  [[ ${#ports[@]} -eq $n ]] || die "could not find $n free TCP ports"
  for i in "${nodes[@]}"; do
    for s in "$@"; do
      echo "${comp}_${i}_$s=${ports[0]}" >>"$PORTS_FILE"
      ports=("${ports[@]:1}")
    done
  done
}

node_dir() { echo "$CLUSTER_DIR/$1-$2"; } # component index

addresses() { # prefix component key [index...] -> prefix127.0.0.1:PORT of those nodes (default: nodes 1..3), comma-separated
  local prefix=$1 comp=$2 key=$3 i out=""
  shift 3
  local which=("$@")
  [[ ${#which[@]} -gt 0 ]] || which=("${NODES[@]}")
  for i in "${which[@]}"; do out+="${out:+,}${prefix}127.0.0.1:$(port "${comp}_${i}_${key}")"; done
  echo "$out"
}

# Starts "$@" in its own session (Ctrl-C of the caller does not reach it), detached from the
# lock's fd; the inner bash writes its pid and exec's the command with that same pid.
spawn() { # pidfile logfile cmd...
  local pidfile=$1 out=$2
  shift 2
  rm -f "$pidfile"
  # shellcheck disable=SC2016 # $$ and $1 are meant for the inner bash
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidfile" "$@" </dev/null >"$out" 2>&1 9>&- &
  local i
  for ((i = 0; i < 50; i++)); do [[ -s $pidfile ]] && return 0; sleep 0.05; done
  die "could not start $1"
}

# Waits until `check` succeeds; fails early if the node's process died.
await() { # what pidfile pattern logfile check...
  local what=$1 pidfile=$2 pattern=$3 logfile=$4 i
  shift 4
  for ((i = 0; i < START_TIMEOUT * 4; i++)); do
    "$@" && return 0
    if ! pid_matches "$(cat "$pidfile" 2>/dev/null)" "$pattern"; then
      tail -n 30 "$logfile" >&2 2>/dev/null || true
      die "$what exited during startup (log: $logfile)"
    fi
    sleep 0.25
  done
  tail -n 30 "$logfile" >&2 2>/dev/null || true
  die "$what not ready within ${START_TIMEOUT}s (log: $logfile)"
}

# ----------------------------------------------------------------------------- Kafka

# The release of this cluster's brokers: chosen at the first `up`, recorded with the ports.
kafka_release() {
  local r
  r="$(port kafka_release)"
  echo "${r:-${ONCEGUARD_CLUSTER_KAFKA:-4.4}}"
}

KAFKA_LOG_FLAGS=(-Dlog4j2.configurationFile="$SCRIPTS/kafka/log4j2-broker.xml")
kafka_release_select() {
  case "$(kafka_release)" in
    4.4) ;;
    3.5)
      KAFKA_POM="$SCRIPTS/kafka/3.5/pom.xml"
      KAFKA_HOME="$STACK_DIR/kafka-3.5"
      KAFKA_LIB="$KAFKA_HOME/lib"
      KAFKA_LOG_FLAGS=(-Dlog4j.configuration="file:$SCRIPTS/kafka/3.5/log4j.properties")
      ;;
    *) die "ONCEGUARD_CLUSTER_KAFKA='$(kafka_release)' is not one of 4.4, 3.5" ;;
  esac
}

kafka_conf() { echo "$(node_dir kafka "$1")/server.properties"; }
kafka_pattern() { echo "kafka.Kafka $(kafka_conf "$1")"; }

kafka_node_config() { # index
  local i=$1 d voters="" j
  d="$(node_dir kafka "$i")"
  for j in "${NODES[@]}"; do voters+="${voters:+,}$j@127.0.0.1:$(port "kafka_${j}_controller")"; done
  mkdir -p "$d/data" "$d/logs"
  cat >"$(kafka_conf "$i")" <<EOF
# Generated by scripts/cluster.sh up.
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(port "kafka_${i}_broker"),CONTROLLER://127.0.0.1:$(port "kafka_${i}_controller"),RELAYED://127.0.0.1:$(port "kafka_${i}_relayed")
advertised.listeners=PLAINTEXT://127.0.0.1:$(port "kafka_${i}_broker"),RELAYED://127.0.0.1:$(port "kafka_${i}_relay")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,RELAYED:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$d/data

# Three replicas of everything; a write needs two of them (one broker may be down).
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
offsets.topic.num.partitions=5
transaction.state.log.num.partitions=5
unclean.leader.election.enable=false

group.initial.rebalance.delay.ms=0
num.partitions=3
auto.create.topics.enable=false
delete.topic.enable=true
num.network.threads=2
num.io.threads=2
EOF
}

# The broker answers and lists every broker whose process runs (a killed peer is not waited for).
kafka_ready() { # index
  local j running=0
  for j in "${NODES[@]}"; do
    pid_matches "$(cat "$(node_dir kafka "$j")/pid" 2>/dev/null)" "$(kafka_pattern "$j")" && running=$((running + 1))
  done
  "${STACKUTIL[@]}" ready "127.0.0.1:$(port "kafka_$1_broker")" 1 "$running"
}

kafka_start() { # index; waits for the broker to answer, not for the others
  local i=$1 d
  d="$(node_dir kafka "$i")"
  pid_matches "$(cat "$d/pid" 2>/dev/null)" "$(kafka_pattern "$i")" && { log "kafka-$i: already running"; return 0; }
  log "kafka-$i: starting on 127.0.0.1:$(port "kafka_${i}_broker") (controller $(port "kafka_${i}_controller"))"
  spawn "$d/pid" "$d/logs/stdout.log" \
    java "${CLUSTER_KAFKA_HEAP[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dkafka.logs.dir="$d/logs" "${KAFKA_LOG_FLAGS[@]}" \
    -cp "$KAFKA_LIB/*" kafka.Kafka "$(kafka_conf "$i")"
}

kafka_cluster_up() {
  kafka_libs
  local i cid
  if [[ -z $(port kafka_1_broker) ]]; then
    echo "kafka_release=$(kafka_release)" >>"$PORTS_FILE"
    assign_ports kafka 0 broker controller relayed relay
    cid="$("${STACKUTIL[@]}" cluster-id)" || die "could not generate a cluster id"
    for i in "${NODES[@]}"; do
      kafka_node_config "$i"
      java -Xmx256m -Dlog4j2.configurationFile="$SCRIPTS/kafka/log4j2-cli.xml" -cp "$KAFKA_LIB/*" \
        kafka.tools.StorageTool format -t "$cid" -c "$(kafka_conf "$i")" \
        >"$(node_dir kafka "$i")/logs/format.log" 2>&1 ||
        { cat "$(node_dir kafka "$i")/logs/format.log" >&2; die "kafka-storage format of kafka-$i failed"; }
    done
  fi
  # all three first: the controllers need a quorum before any broker is ready
  for i in "${NODES[@]}"; do kafka_start "$i"; done
  for i in "${NODES[@]}"; do node_await kafka "$i" kafka_ready "$i"; done
  log "Kafka: 3 brokers ready at $(kafka_bootstrap)"
}

kafka_bootstrap() { addresses "" kafka broker; }

# ----------------------------------------------------------------------------- Galera

galera_cnf() { echo "$(node_dir galera "$1")/my.cnf"; }
galera_pattern() { echo "mariadbd --defaults-file=$(galera_cnf "$1")"; }
galera_sock() { echo "$(node_dir galera "$1")/mysqld.sock"; }

galera_sql() { # index sql -> tab-separated rows, over the node's unix socket
  mysql --no-defaults -uroot --socket="$(galera_sock "$1")" --connect-timeout=3 -N -B -e "$2" 2>/dev/null
}

galera_synced() { # index
  [[ $(galera_sql "$1" "SHOW STATUS LIKE 'wsrep_local_state_comment'" | cut -f2) == Synced ]]
}

galera_running() { # index
  pid_matches "$(cat "$(node_dir galera "$1")/pid" 2>/dev/null)" "$(galera_pattern "$1")"
}

galera_node_config() { # index
  local i=$1 d members="" j
  d="$(node_dir galera "$i")"
  for j in "${NODES[@]}"; do members+="${members:+,}127.0.0.1:$(port "galera_${j}_gcomm")"; done
  mkdir -p "$d/data"
  cat >"$(galera_cnf "$i")" <<EOF
# Generated by scripts/cluster.sh up.
[mysqld]
datadir=$d/data
socket=$(galera_sock "$i")
pid-file=$d/mysqld.pid
log-error=$d/error.log
bind-address=127.0.0.1
port=$(port "galera_${i}_port")
# small: three of these share a 2-core machine with the tests
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=2
aria_pagecache_buffer_size=8M
key_buffer_size=4M
performance_schema=OFF
max_connections=300
# what Galera requires
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=$GALERA_PROVIDER
wsrep_cluster_name=onceguard-local
wsrep_cluster_address=gcomm://$members
wsrep_node_name=galera-$i
wsrep_node_address=127.0.0.1
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$(port "galera_${i}_gcomm");ist.recv_addr=127.0.0.1:$(port "galera_${i}_ist");gcache.size=64M"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$(port "galera_${i}_sst")
wsrep_slave_threads=2
EOF
}

galera_any_running() {
  local j
  for j in "${NODES[@]}"; do galera_running "$j" && return 0; done
  return 1
}

# The last seqno a node committed: from grastate.dat after a clean shutdown, recovered from
# InnoDB (mariadbd --wsrep-recover) after a crash, which leaves -1 there.
galera_seqno() { # index
  local i=$1 d s
  d="$(node_dir galera "$i")"
  s="$(sed -n 's/^seqno: *//p' "$d/data/grastate.dat" 2>/dev/null || true)"
  if [[ -z $s || $s == -1 ]]; then
    /usr/sbin/mariadbd --defaults-file="$(galera_cnf "$i")" --user="$GALERA_USER" --wsrep-recover >/dev/null 2>&1 9>&- || true
    s="$(sed -n 's/.*WSREP: Recovered position: .*:\([-0-9]*\)$/\1/p' "$d/error.log" | tail -n 1)"
  fi
  echo "${s:--1}"
}

# The node to bootstrap a stopped cluster from: the one with the latest commit, so none is lost.
galera_most_advanced() {
  local i best=1 top=-2 s
  for i in "${NODES[@]}"; do
    s="$(galera_seqno "$i")"
    if ((s > top)); then best=$i top=$s; fi
  done
  echo "$best"
}

galera_start() { # index; joins the running nodes, or bootstraps a new cluster when none runs
  local i=$1 d bootstrap=1
  d="$(node_dir galera "$i")"
  galera_running "$i" && { log "galera-$i: already running"; return 0; }
  galera_any_running && bootstrap=0
  local flags=(--user="$GALERA_USER")
  if [[ $bootstrap == 1 ]]; then
    if [[ -f $d/data/grastate.dat ]]; then
      local best
      best="$(galera_most_advanced)"
      [[ $best == "$i" ]] ||
        die "no Galera node runs and galera-$best has later commits than galera-$i: start galera-$best first (or: scripts/cluster.sh up galera)"
    fi
    flags+=(--wsrep-new-cluster)
    # after a kill -9 Galera refuses to bootstrap from a node until told it is safe
    [[ -f $d/data/grastate.dat ]] && sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$d/data/grastate.dat"
  fi
  log "galera-$i: starting on 127.0.0.1:$(port "galera_${i}_port")$([[ $bootstrap == 1 ]] && echo ' (new cluster)')"
  spawn "$d/pid" "$d/stdout.log" /usr/sbin/mariadbd --defaults-file="$(galera_cnf "$i")" "${flags[@]}"
  node_await galera "$i" galera_synced "$i"
  log "galera-$i: synced"
}

galera_cluster_up() {
  [[ -f $GALERA_PROVIDER ]] || apt_install galera-4
  command -v rsync >/dev/null 2>&1 || apt_install rsync
  [[ -x /usr/sbin/mariadbd ]] || apt_install mariadb-server
  local i fresh=0
  if [[ -z $(port galera_1_port) ]]; then
    fresh=1
    assign_ports galera 0 port gcomm ist sst
    for i in "${NODES[@]}"; do
      galera_node_config "$i"
      if [[ $(id -u) -eq 0 ]]; then chown -R "$GALERA_USER:" "$(node_dir galera "$i")"; fi
    done
    # only the first node gets system tables; the others receive everything by SST
    mariadb-install-db --no-defaults --datadir="$(node_dir galera 1)/data" --user="$GALERA_USER" \
      --auth-root-authentication-method=normal --skip-test-db >"$(node_dir galera 1)/install-db.log" 2>&1 ||
      { tail -n 30 "$(node_dir galera 1)/install-db.log" >&2; die "mariadb-install-db failed"; }
  fi
  # a stopped cluster restarts from its most advanced node; then one at a time: each joiner
  # takes a state transfer from a synced node
  local order=("${NODES[@]}") first
  if [[ $fresh == 0 ]] && ! galera_any_running; then
    first="$(galera_most_advanced)"
    order=("$first")
    for i in "${NODES[@]}"; do [[ $i == "$first" ]] || order+=("$i"); done
  fi
  for i in "${order[@]}"; do
    galera_start "$i"
    if [[ $fresh == 1 && $i == 1 ]]; then
      # root over TCP without a password, as on the machine's MariaDB (replicated to the joiners)
      galera_sql 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
        GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; CREATE DATABASE IF NOT EXISTS test;" ||
        die "could not create root@127.0.0.1 on galera-1"
    fi
  done
  log "Galera: $(galera_sql 1 "SHOW STATUS LIKE 'wsrep_cluster_size'" | cut -f2) nodes, MySQL ports $(galera_ports)"
}

galera_ports() { addresses "" galera port | sed 's/127\.0\.0\.1://g'; }

# ----------------------------------------------------------------------------- Redis

redis_cli() { # index args...
  local i=$1
  shift
  # bounded: a paused node (cluster.sh pause) accepts the connection and never answers
  timeout 5 redis-cli -h 127.0.0.1 -p "$(port "redis_${i}_port")" "$@" 2>/dev/null
}
redis_pattern() { echo "redis-server 127.0.0.1:$(port "redis_$1_port")"; }
redis_pong() { [[ $(redis_cli "$1" PING) == PONG ]]; }
redis_cluster_ok() { redis_cli "$1" CLUSTER INFO | grep -q '^cluster_state:ok'; }

redis_start() { # index
  local i=$1 d
  d="$(node_dir redis "$i")"
  pid_matches "$(cat "$d/pid" 2>/dev/null)" "$(redis_pattern "$i")" && { log "redis-$i: already running"; return 0; }
  mkdir -p "$d"
  log "redis-$i: starting on 127.0.0.1:$(port "redis_${i}_port")"
  spawn "$d/pid" "$d/redis.log" redis-server --port "$(port "redis_${i}_port")" --bind 127.0.0.1 \
    --cluster-enabled yes --cluster-config-file "$d/nodes.conf" --dir "$d" --save "" --appendonly no \
    --cluster-node-timeout "$REDIS_NODE_TIMEOUT" --cluster-replica-validity-factor 0
  node_await redis "$i" redis_pong "$i"
}

redis_cluster_up() {
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server
  local i fresh=0 members=()
  if [[ -z $(port redis_1_port) ]]; then
    fresh=1
    assign_ports redis 1 port
  fi
  for i in "${REDIS_NODES[@]}"; do
    redis_start "$i"
    members+=("127.0.0.1:$(port "redis_${i}_port")")
  done
  if [[ $fresh == 1 ]]; then
    # the first three become masters, the last three their replicas (one host: redis-cli warns
    # that a replica shares its master's host, which is the point of a local cluster)
    redis-cli --cluster create "${members[@]}" --cluster-replicas 1 --cluster-yes \
      >"$CLUSTER_DIR/redis-create.log" 2>&1 ||
      { cat "$CLUSTER_DIR/redis-create.log" >&2; die "redis-cli --cluster create failed"; }
  fi
  for i in "${REDIS_NODES[@]}"; do node_await redis "$i" redis_cluster_ok "$i"; done
  log "Redis Cluster: ok at $(redis_seeds), replicas at $(redis_replicas)"
}

redis_seeds() { addresses redis:// redis port; }
redis_replicas() { addresses redis:// redis port 4 5 6; }

# ----------------------------------------------------------------------------- nodes

# NODE (kafka-2, galera-1, redis-3) -> "component index pidfile pattern"
node_parse() {
  [[ $1 =~ ^(kafka|galera)-([1-3])$ || $1 =~ ^(redis)-([1-6])$ ]] ||
    die "unknown node '$1' (kafka-N or galera-N, N in 1..3; redis-N, N in 1..6)"
  local c=${BASH_REMATCH[1]} i=${BASH_REMATCH[2]}
  [[ -n $(port "${c}_${i}_port")$(port "${c}_${i}_broker") ]] || die "$1 is not part of this cluster (run: scripts/cluster.sh up $c)"
  echo "$c $i $(node_dir "$c" "$i")/pid"
}

node_log() { # component index
  case $1 in
    kafka) echo "$(node_dir kafka "$2")/logs/server.log" ;;
    galera) echo "$(node_dir galera "$2")/error.log" ;;
    redis) echo "$(node_dir redis "$2")/redis.log" ;;
  esac
}

node_await() { # component index check...
  local c=$1 i=$2
  shift 2
  await "$c-$i" "$(node_dir "$c" "$i")/pid" "$(node_pattern "$c" "$i")" "$(node_log "$c" "$i")" "$@"
}

node_pattern() { # component index
  case $1 in
    kafka) kafka_pattern "$2" ;;
    galera) galera_pattern "$2" ;;
    redis) redis_pattern "$2" ;;
  esac
}

node_pid() { # NODE -> the pid of that running node, or nothing
  local c i pidfile pid
  read -r c i pidfile <<<"$(node_parse "$1")"
  pid="$(cat "$pidfile" 2>/dev/null || true)"
  if pid_matches "$pid" "$(node_pattern "$c" "$i")"; then echo "$pid"; fi
}

cmd_kill() {
  [[ $# -eq 1 ]] || die "usage: cluster.sh kill NODE"
  local pid
  pid="$(node_pid "$1")"
  [[ -n $pid ]] || { log "$1: not running"; return 0; }
  kill -KILL "$pid"
  while pid_alive "$pid"; do sleep 0.05; done
  log "$1: killed (pid $pid)"
}

cmd_signal() { # SIGNAL NODE: pause (STOP) or resume (CONT) one node
  [[ $# -eq 2 ]] || die "usage: cluster.sh pause|resume NODE"
  local pid
  pid="$(node_pid "$2")"
  [[ -n $pid ]] || die "$2: not running"
  kill -"$1" "$pid"
  log "$2: SIG$1 (pid $pid)"
}

cmd_stop() {
  [[ $# -eq 1 ]] || die "usage: cluster.sh stop NODE"
  local pid
  pid="$(node_pid "$1")"
  [[ -n $pid ]] || { log "$1: not running"; return 0; }
  stop_pid "$pid" 60 "$1"
}

cmd_start() {
  [[ $# -eq 1 ]] || die "usage: cluster.sh start NODE"
  local c i _
  read -r c i _ <<<"$(node_parse "$1")"
  cluster_lock
  case $c in
    kafka) kafka_start "$i" && node_await kafka "$i" kafka_ready "$i" ;;
    galera) galera_start "$i" ;;
    redis) redis_start "$i" && node_await redis "$i" redis_cluster_ok "$i" ;;
  esac
}

# ----------------------------------------------------------------------------- commands

write_cluster_env() {
  local tmp="$CLUSTER_ENV.tmp.$$"
  {
    echo "# Generated by scripts/cluster.sh; source with: set -a; . .cluster/env; set +a"
    if [[ -n $(port kafka_1_broker) ]]; then
      env_line ONCEGUARD_CLUSTER_KAFKA_BOOTSTRAP "$(kafka_bootstrap)"
      env_line KAFKA_LIB "$KAFKA_LIB"
      env_line ONCEGUARD_CLUSTER_KAFKA_RELEASE "$(kafka_release)"
      if [[ -n $(port kafka_1_relay) ]]; then
        env_line ONCEGUARD_CLUSTER_KAFKA_RELAY_BOOTSTRAP "$(addresses "" kafka relay)"
        env_line ONCEGUARD_CLUSTER_KAFKA_RELAYED "$(addresses "" kafka relayed)"
      fi
    fi
    if [[ -n $(port galera_1_port) ]]; then
      env_line ONCEGUARD_CLUSTER_MYSQL_HOST 127.0.0.1
      env_line ONCEGUARD_CLUSTER_MYSQL_PORTS "$(galera_ports)"
      env_line ONCEGUARD_CLUSTER_MYSQL_USER root
      env_line ONCEGUARD_CLUSTER_MYSQL_PASSWORD ""
      env_line ONCEGUARD_CLUSTER_MYSQL_DATABASE test
    fi
    if [[ -n $(port redis_1_port) ]]; then
      env_line ONCEGUARD_CLUSTER_REDIS_SEEDS "$(redis_seeds)"
      env_line ONCEGUARD_CLUSTER_REDIS_REPLICAS "$(redis_replicas)"
    fi
  } >"$tmp"
  mv "$tmp" "$CLUSTER_ENV"
}

cmd_up() {
  local t0=$SECONDS comps=("$@") c
  [[ ${#comps[@]} -gt 0 ]] || comps=(kafka galera redis)
  for c in "${comps[@]}"; do
    [[ $c =~ ^(kafka|galera|redis)$ ]] || die "unknown component '$c' (kafka, galera, redis)"
  done
  cluster_lock
  for c in "${comps[@]}"; do "${c}_cluster_up"; done
  write_cluster_env
  log "up in $((SECONDS - t0))s; environment in $CLUSTER_ENV:"
  grep -v '^#' "$CLUSTER_ENV" | sed 's/^/[cluster]   /' >&2
}

cmd_down() {
  [[ -d $CLUSTER_DIR ]] || { log "nothing to stop"; return 0; }
  cluster_lock
  local c i pid
  # Kafka brokers together: each waits for the controller quorum while it shuts down
  for c in kafka galera redis; do
    for i in $(nodes_of "$c"); do
      pid="$(cat "$(node_dir "$c" "$i")/pid" 2>/dev/null || true)"
      # a paused node must run again to act on SIGTERM
      pid_matches "$pid" "$(node_pattern "$c" "$i")" && kill -TERM "$pid" && kill -CONT "$pid"
    done
    for i in $(nodes_of "$c"); do
      pid="$(cat "$(node_dir "$c" "$i")/pid" 2>/dev/null || true)"
      pid_matches "$pid" "$(node_pattern "$c" "$i")" && stop_pid "$pid" 60 "$c-$i"
    done
  done
  find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} +
  log "down"
}

cmd_status() {
  local c i d rc=0 state
  for c in kafka galera redis; do
    for i in $(nodes_of "$c"); do
      [[ -n $(port "${c}_${i}_port")$(port "${c}_${i}_broker") ]] || continue
      d="$(node_dir "$c" "$i")"
      if ! pid_matches "$(cat "$d/pid" 2>/dev/null)" "$(node_pattern "$c" "$i")"; then
        state=DOWN; rc=1
      else
        case $c in
          kafka) kafka_ready "$i" && state="up   127.0.0.1:$(port "kafka_${i}_broker")" || { state="NOT READY"; rc=1; } ;;
          galera) state="up   127.0.0.1:$(port "galera_${i}_port") $(galera_sql "$i" "SHOW STATUS LIKE 'wsrep_local_state_comment'" | cut -f2)" ;;
          redis) state="up   127.0.0.1:$(port "redis_${i}_port") $(redis_cli "$i" CLUSTER INFO | sed -n 's/^\(cluster_state:[a-z]*\).*/\1/p')" ;;
        esac
      fi
      printf '%-9s %s\n' "$c-$i:" "$state"
    done
  done
  return $rc
}

cmd_env() {
  [[ -f $PORTS_FILE ]] || die "no cluster in $CLUSTER_DIR; run: scripts/cluster.sh up"
  write_cluster_env
  cat "$CLUSTER_ENV"
}

cluster_usage() {
  sed -n '2,/^set /{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

kafka_release_select

case "${1:-}" in
  up)     shift; cmd_up "$@" ;;
  down)   shift; cmd_down "$@" ;;
  status) shift; cmd_status "$@" ;;
  env)    shift; cmd_env "$@" ;;
  kill)   shift; cmd_kill "$@" ;;
  stop)   shift; cmd_stop "$@" ;;
  pause)  shift; cmd_signal STOP "$@" ;;
  resume) shift; cmd_signal CONT "$@" ;;
  start)  shift; cmd_start "$@" ;;
  *)      cluster_usage ;;
esac
