#!/usr/bin/env bash
# Local test stack for OnceGuard: MariaDB + Redis (shared, usually already running on the
# machine), a private single-node KRaft Kafka broker per checkout (free ports, data under
# .stack/ of this checkout), the promtool/prometheus binaries the alert tests run, the Python and
# Go toolchains of the example business containers and the openssl/mariadbd/redis-server binaries
# StoreSecurityIT runs (installed from Debian's packages if
# missing).
#
#   scripts/stack.sh up                      start what is missing, write .stack/env
#   scripts/stack.sh down                    stop the broker + whatever `up` started itself
#   scripts/stack.sh status                  show what runs
#   scripts/stack.sh env                     print .stack/env
#   scripts/stack.sh bootstrap               print the broker's host:port
#   scripts/stack.sh kafka-kill              kill -9 the broker, keeping its data (chaos tests)
#   scripts/stack.sh kafka-start             start that broker again, same port and data
#   scripts/stack.sh topic NAME [PARTITIONS] create a topic on the broker unless it exists (default 3 partitions)
#   scripts/stack.sh produce TOPIC           send stdin's lines, each `key|value`, as records
#   scripts/stack.sh consume TOPIC [MAX]     print headers, key and value of up to MAX records (default 100)
#                                            from the beginning; stops after 10 s without one
#   scripts/stack.sh kafka-cli CLASS ARGS..  run a Kafka CLI class from the broker jars, e.g.
#       scripts/stack.sh kafka-cli org.apache.kafka.tools.TopicCommand \
#           --bootstrap-server "$(scripts/stack.sh bootstrap)" --list
#
# Works from any cwd. Idempotent: `up` twice reuses a healthy broker, `down` twice is a no-op.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPTS="$ROOT/scripts"
STACK_DIR="$ROOT/.stack"
STATE_DIR="$STACK_DIR/state"          # pid files + markers of services started by this script
ENV_FILE="$STACK_DIR/env"
KAFKA_HOME="$STACK_DIR/kafka"
KAFKA_LIB="$KAFKA_HOME/lib"
KAFKA_DATA="$KAFKA_HOME/data"         # wiped by `down` and before every fresh broker start
KAFKA_LOGS="$KAFKA_HOME/logs"         # server.log (log4j2), stdout.log (JVM), format.log
KAFKA_CONF="$KAFKA_HOME/server.properties"
KAFKA_POM="$SCRIPTS/kafka/pom.xml"
KAFKA_PID_FILE="$STATE_DIR/kafka.pid"
KAFKA_PORT_FILE="$STATE_DIR/kafka.port"

# The stores the tests use. Defaults: the machine's MariaDB on 3306 as root without a password and
# Redis on 6379; set these (e.g. to an account of your own) before `up` to use others.
MYSQL_HOST="${ONCEGUARD_MYSQL_HOST:-127.0.0.1}"
MYSQL_PORT="${ONCEGUARD_MYSQL_PORT:-3306}"
MYSQL_USER="${ONCEGUARD_MYSQL_USER:-root}"
MYSQL_PASSWORD="${ONCEGUARD_MYSQL_PASSWORD:-}"
MYSQL_DB="test"
# An account stack.sh made for this checkout's tests (see mysql_stack_account) when none was given.
if [[ -z ${ONCEGUARD_MYSQL_USER:-} && -s "$ROOT/.stack/state/mysql-account" ]]; then
  { read -r MYSQL_USER; read -r MYSQL_PASSWORD; } <"$ROOT/.stack/state/mysql-account"
fi
REDIS_HOST="${ONCEGUARD_REDIS_HOST:-127.0.0.1}"
REDIS_PORT="${ONCEGUARD_REDIS_PORT:-6379}"

# JVM heap flags, overridable (space-separated), e.g. ONCEGUARD_KAFKA_HEAP="-Xmx1g".
read -r -a KAFKA_HEAP <<<"${ONCEGUARD_KAFKA_HEAP:--Xms128m -Xmx512m}"
read -r -a KAFKA_CLI_HEAP <<<"${ONCEGUARD_KAFKA_CLI_HEAP:--Xmx512m}"
KAFKA_START_TIMEOUT="${ONCEGUARD_KAFKA_START_TIMEOUT:-90}"   # seconds
MVN="${MVN:-mvn}"

# Prefer the system python (always at /usr/bin on Debian); any python3 >= 3.6 will do.
PYTHON="$(command -v python3 || echo /usr/bin/python3)"
STACKUTIL=("$PYTHON" "$SCRIPTS/kafka/stackutil.py")

# scripts/cluster.sh sources this file for its helpers and sets LOG_TAG=cluster.
log()  { echo "[${LOG_TAG:-stack}] $*" >&2; }
die()  { echo "[${LOG_TAG:-stack}] ERROR: $*" >&2; exit 1; }

# ----------------------------------------------------------------------------- helpers

tcp_open() { # host port -> 0 if something accepts a TCP connection
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

pid_alive() { # pid
  [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null
}

# The pid in $1 is alive AND its command line contains $2 (guards against pid reuse).
pid_matches() { # pid pattern
  pid_alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- "$2"
}

# SIGTERM, wait up to $2 seconds, then SIGKILL.
stop_pid() { # pid timeout name
  local pid=$1 timeout=$2 name=$3 i
  pid_alive "$pid" || return 0
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    pid_alive "$pid" || { log "$name stopped"; return 0; }
    sleep 0.1
  done
  log "$name did not stop within ${timeout}s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do pid_alive "$pid" || return 0; sleep 0.1; done
  die "could not kill $name (pid $pid)"
}

# One `apt-get update` per run, only when something must actually be installed.
APT_UPDATED=0
apt_install() {
  [[ $(id -u) -eq 0 ]] || die "$* missing and not root: install it first (sudo apt-get install -y $*), then run this again"
  if [[ $APT_UPDATED -eq 0 ]]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
    APT_UPDATED=1
  fi
  log "apt-get install -y $*"
  # another apt run (a second checkout's `up`) may hold dpkg's lock: wait for it
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$@" >&2
}

# For tools only some tests need (the example business containers' toolchains, the TLS tests'
# servers): without root, say what is missing and go on; those tests then say it again (and
# fail under CI=true) while everything else runs.
apt_install_or_warn() {
  if [[ $(id -u) -ne 0 ]]; then
    log "WARNING: $* missing and not root: the tests that need them will fail or skip (apt-get install -y $*)"
    return 0
  fi
  apt_install "$@"
}

# Take an exclusive lock for up/down so two concurrent calls in one checkout don't race.
# Every long-lived process started while holding it must get `9>&-`: a daemon that inherits
# fd 9 would hold the lock for its whole life and block every later up/down.
take_lock() {
  mkdir -p "$STATE_DIR"
  exec 9>"$STATE_DIR/lock"
  flock -w 120 9 || die "another stack.sh holds $STATE_DIR/lock for more than 120s"
}

# ----------------------------------------------------------------------------- MariaDB

mysql_tcp() { # ARGS... -> the mysql client over TCP as the stack's account
  MYSQL_PWD="$MYSQL_PASSWORD" mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u"$MYSQL_USER" "$@"
}

mysql_tcp_login() {
  command -v mysql >/dev/null 2>&1 && mysql_tcp --connect-timeout=3 -e 'SELECT 1' >/dev/null 2>&1
}

# When root cannot log in over TCP without a password (Debian's default: root by unix socket
# only), the tests get an account of their own instead, and root is left as it is. The account is
# made once per host over the unix socket (which needs OS root); its password is kept in a
# root-only file so every checkout on the host shares it, and this checkout's copy of the name and
# password is in $STATE_DIR/mysql-account (and .stack/env).
STACK_ACCOUNT=onceguard_stack
STACK_ACCOUNT_PASSWORD_FILE=/var/lib/onceguard-stack/mysql-password

mysql_stack_account() {
  # The unix socket reaches the machine's default server: only use it for that server.
  [[ $(id -u) -eq 0 && $MYSQL_PORT == 3306 && $MYSQL_HOST =~ ^(127\.0\.0\.1|localhost)$ ]] &&
    mysql -uroot -e 'SELECT 1' >/dev/null 2>&1 ||
    die "MariaDB at $MYSQL_HOST:$MYSQL_PORT refuses root over TCP without a password, and its unix socket is not open to this user. stack.sh never changes existing accounts: set ONCEGUARD_MYSQL_USER and ONCEGUARD_MYSQL_PASSWORD to an account allowed to create databases and users (GRANT ALL ON *.* TO ... WITH GRANT OPTION), then run this again"
  local pw
  if [[ -s $STACK_ACCOUNT_PASSWORD_FILE ]]; then
    pw="$(cat "$STACK_ACCOUNT_PASSWORD_FILE")"
  else
    pw="$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
    install -d -m 700 "$(dirname "$STACK_ACCOUNT_PASSWORD_FILE")"
    (umask 077; printf '%s' "$pw" >"$STACK_ACCOUNT_PASSWORD_FILE")
  fi
  log "MariaDB: root logs in by unix socket only; creating the tests' own account '$STACK_ACCOUNT' (root is not changed; password in $STACK_ACCOUNT_PASSWORD_FILE)"
  local host
  for host in localhost 127.0.0.1; do
    mysql -uroot -e "CREATE USER IF NOT EXISTS '$STACK_ACCOUNT'@'$host' IDENTIFIED BY '$pw';
      ALTER USER '$STACK_ACCOUNT'@'$host' IDENTIFIED BY '$pw';
      GRANT ALL PRIVILEGES ON *.* TO '$STACK_ACCOUNT'@'$host' WITH GRANT OPTION;" ||
      die "could not create the MariaDB account $STACK_ACCOUNT@$host over the unix socket"
  done
  MYSQL_USER=$STACK_ACCOUNT
  MYSQL_PASSWORD=$pw
  (umask 077; printf '%s\n%s\n' "$MYSQL_USER" "$MYSQL_PASSWORD" >"$STATE_DIR/mysql-account")
  mysql_tcp_login || die "MariaDB: login as $STACK_ACCOUNT over TCP fails after creating it"
}

mariadb_up() {
  # The mysql client is needed for the checks below (mariadb-server brings it too).
  if ! command -v mysql >/dev/null 2>&1; then
    if tcp_open "$MYSQL_HOST" "$MYSQL_PORT"; then
      apt_install mariadb-client
    else
      apt_install mariadb-server
    fi
  fi
  if mysql_tcp_login; then
    log "MariaDB: reachable at $MYSQL_HOST:$MYSQL_PORT (user $MYSQL_USER)"
  else
    if ! tcp_open "$MYSQL_HOST" "$MYSQL_PORT"; then
      [[ -x /usr/sbin/mariadbd ]] || apt_install mariadb-server
      # The Debian package's postinst may have started it already (non-systemd containers).
      if ! tcp_open "$MYSQL_HOST" "$MYSQL_PORT"; then
        log "MariaDB: starting"
        # /run/mysqld normally comes from systemd-tmpfiles, absent in containers.
        install -d -o mysql -g mysql /run/mysqld
        start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql 9>&-
      else
        log "MariaDB: was started by the package install"
      fi
      local i
      for ((i = 0; i < 300; i++)); do tcp_open "$MYSQL_HOST" "$MYSQL_PORT" && break; sleep 0.1; done
      tcp_open "$MYSQL_HOST" "$MYSQL_PORT" ||
        die "MariaDB did not open $MYSQL_HOST:$MYSQL_PORT within 30s (see /var/log/mysql/)"
      # Remember the server's pid so `down` stops exactly this process and nothing else.
      local pid
      pid="$(cat /run/mysqld/mysqld.pid 2>/dev/null || pgrep -xo mariadbd || true)"
      echo "$pid" >"$STATE_DIR/started-mariadb.pid"
      log "MariaDB: started by stack.sh (pid ${pid:-?}); \`down\` will stop it"
    fi
  fi
  if ! mysql_tcp_login; then
    [[ -z ${ONCEGUARD_MYSQL_USER:-} ]] ||
      die "MariaDB at $MYSQL_HOST:$MYSQL_PORT refuses ONCEGUARD_MYSQL_USER='$MYSQL_USER' (with ONCEGUARD_MYSQL_PASSWORD) over TCP"
    mysql_stack_account
  fi
  # The project's tests use database `test`; fresh installs don't have it.
  mysql_tcp -e "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\`" >/dev/null
}

mariadb_down() {
  local f="$STATE_DIR/started-mariadb.pid" pid
  [[ -f $f ]] || return 0
  pid="$(cat "$f")"
  if pid_matches "$pid" mariadbd; then
    stop_pid "$pid" 60 "MariaDB (started by stack.sh)"
  fi
  rm -f "$f"
}

# ----------------------------------------------------------------------------- Redis

redis_ping() { # PING over /dev/tcp: no dependency on redis-cli
  local reply
  reply="$(
    exec 2>/dev/null
    exec 3<>"/dev/tcp/$REDIS_HOST/$REDIS_PORT" || exit 1
    printf 'PING\r\n' >&3
    read -r -t 3 line <&3 && printf '%s' "$line"
  )" || return 1
  [[ $reply == +PONG* ]]
}

redis_up() {
  if redis_ping; then
    log "Redis: reachable at $REDIS_HOST:$REDIS_PORT"
    return 0
  fi
  tcp_open "$REDIS_HOST" "$REDIS_PORT" &&
    die "something listens on $REDIS_HOST:$REDIS_PORT but does not answer Redis PING"
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server
  local pid=""
  if redis_ping; then
    log "Redis: was started by the package install"
    pid="$(pgrep -xo redis-server || true)"
  else
    log "Redis: starting"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
      --dir "$STATE_DIR" --pidfile "$STATE_DIR/redis-server.pid" --logfile "$STATE_DIR/redis.log" 9>&-
    local i
    for ((i = 0; i < 100; i++)); do redis_ping && break; sleep 0.1; done
    redis_ping || die "Redis did not answer PING within 10s (see $STATE_DIR/redis.log)"
    pid="$(cat "$STATE_DIR/redis-server.pid" 2>/dev/null || true)"
  fi
  echo "$pid" >"$STATE_DIR/started-redis.pid"
  log "Redis: started by stack.sh (pid ${pid:-?}); \`down\` will stop it"
}

redis_down() {
  local f="$STATE_DIR/started-redis.pid" pid
  [[ -f $f ]] || return 0
  pid="$(cat "$f")"
  if pid_matches "$pid" redis-server; then
    stop_pid "$pid" 30 "Redis (started by stack.sh)"
  fi
  rm -f "$f" "$STATE_DIR/redis-server.pid"
}

# ----------------------------------------------------------------------------- Kafka

# Jars are fetched once per checkout; the POM's hash is stored so editing the POM refetches.
kafka_libs() {
  local want have=""
  want="$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)"
  [[ -f $KAFKA_LIB/.pom.sha256 ]] && have="$(cat "$KAFKA_LIB/.pom.sha256")"
  if [[ $want == "$have" ]] && compgen -G "$KAFKA_LIB/kafka_2.13-*.jar" >/dev/null; then
    return 0
  fi
  log "Kafka: fetching broker + tools jars with Maven into $KAFKA_LIB"
  local tmp="$KAFKA_HOME/lib.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$KAFKA_HOME"
  # Output goes to a file (Maven 3.8 prints stray ANSI codes even with -B -q), shown on error.
  if ! "$MVN" -B -q -f "$KAFKA_POM" dependency:copy-dependencies -DoutputDirectory="$tmp" \
      >"$KAFKA_HOME/fetch.log" 2>&1; then
    tail -n 40 "$KAFKA_HOME/fetch.log" >&2
    rm -rf "$tmp"
    die "could not fetch the Kafka jars (mvn -f $KAFKA_POM dependency:copy-dependencies; log $KAFKA_HOME/fetch.log)"
  fi
  echo "$want" >"$tmp/.pom.sha256"
  rm -rf "$KAFKA_LIB"
  mv "$tmp" "$KAFKA_LIB"   # atomic: a half-fetched lib dir is never used
  log "Kafka: $(find "$KAFKA_LIB" -name '*.jar' | wc -l) jars, $(du -sh "$KAFKA_LIB" | cut -f1)"
}

kafka_pid()  { cat "$KAFKA_PID_FILE" 2>/dev/null || true; }
kafka_port() { cat "$KAFKA_PORT_FILE" 2>/dev/null || true; }

# Our broker: the recorded pid is alive and is a kafka.Kafka of THIS checkout's config.
kafka_running() {
  local pid
  pid="$(kafka_pid)"
  pid_matches "$pid" "kafka.Kafka $KAFKA_CONF"
}

kafka_healthy() {
  local port
  port="$(kafka_port)"
  kafka_running && [[ -n $port ]] && "${STACKUTIL[@]}" ready "127.0.0.1:$port" 2
}

kafka_write_config() { # broker_port controller_port
  cat >"$KAFKA_CONF" <<EOF
# Generated by scripts/stack.sh for local tests; rewritten at every fresh start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$2
listeners=PLAINTEXT://127.0.0.1:$1,CONTROLLER://127.0.0.1:$2
advertised.listeners=PLAINTEXT://127.0.0.1:$1
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$KAFKA_DATA

# Single node: every internal topic must accept replication factor 1.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
default.replication.factor=1
min.insync.replicas=1
# Fewer partitions for internal topics than the 50 default: faster first group/txn use.
offsets.topic.num.partitions=5
transaction.state.log.num.partitions=5

# Test-friendly behaviour.
group.initial.rebalance.delay.ms=0
num.partitions=1
auto.create.topics.enable=false
delete.topic.enable=true
num.network.threads=2
num.io.threads=4
EOF
}

kafka_log_tail() {
  echo "---- tail of $KAFKA_LOGS/server.log ----" >&2
  tail -n 40 "$KAFKA_LOGS/server.log" >&2 2>/dev/null || echo "(no server.log)" >&2
  if [[ -s $KAFKA_LOGS/stdout.log ]]; then
    echo "---- tail of $KAFKA_LOGS/stdout.log ----" >&2
    tail -n 20 "$KAFKA_LOGS/stdout.log" >&2
  fi
  echo "----" >&2
}

# One attempt at a fresh broker. Returns 0 when ready, 2 when a port was taken meanwhile
# (caller retries with new ports), dies on any other failure.
kafka_start_once() {
  # NB: called in an `||` context, where set -e is off: check each step explicitly.
  local bport="" cport="" cid pid i
  read -r bport cport <<<"$("${STACKUTIL[@]}" free-ports 2)" || true
  [[ -n $bport && -n $cport ]] || die "could not find free TCP ports (python3 $SCRIPTS/kafka/stackutil.py)"
  rm -rf "$KAFKA_DATA" "$KAFKA_LOGS"
  mkdir -p "$KAFKA_DATA" "$KAFKA_LOGS"
  kafka_write_config "$bport" "$cport"

  # Fresh storage each start: the controller's endpoint is in the config and ports change.
  cid="$("${STACKUTIL[@]}" cluster-id)" || die "could not generate a cluster id"
  if ! java -Xmx256m -Dlog4j2.configurationFile="$SCRIPTS/kafka/log4j2-cli.xml" \
      -cp "$KAFKA_LIB/*" kafka.tools.StorageTool format -t "$cid" -c "$KAFKA_CONF" \
      >"$KAFKA_LOGS/format.log" 2>&1; then
    cat "$KAFKA_LOGS/format.log" >&2
    die "kafka-storage format failed"
  fi

  log "Kafka: starting broker on 127.0.0.1:$bport (controller 127.0.0.1:$cport)"
  kafka_launch "$bport"
}

# Starts the broker process on the config and data as they are, and waits until it answers on
# broker_port. Returns 0 when ready, 2 when a port was taken meanwhile, dies on any other failure.
kafka_launch() { # broker_port
  local bport="$1" pid i
  rm -f "$KAFKA_PID_FILE"
  # setsid: own session, so Ctrl-C in the terminal that ran `up`/`make` doesn't kill it behind
  # `down`'s back. The inner bash writes its own pid, then exec's java with that same pid.
  # shellcheck disable=SC2016 # $$ and $1 are meant for the inner bash
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$KAFKA_PID_FILE" \
    java "${KAFKA_HEAP[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dkafka.logs.dir="$KAFKA_LOGS" \
    -Dlog4j2.configurationFile="$SCRIPTS/kafka/log4j2-broker.xml" \
    -cp "$KAFKA_LIB/*" kafka.Kafka "$KAFKA_CONF" \
    </dev/null >>"$KAFKA_LOGS/stdout.log" 2>&1 9>&- &
  echo "$bport" >"$KAFKA_PORT_FILE"

  for ((i = 0; i < KAFKA_START_TIMEOUT * 4; i++)); do
    sleep 0.25
    pid="$(kafka_pid)"
    if [[ -n $pid ]] && ! pid_alive "$pid"; then
      if grep -qs 'Address already in use' "$KAFKA_LOGS/server.log" "$KAFKA_LOGS/stdout.log"; then
        log "Kafka: a chosen port was taken meanwhile, retrying with new ports"
        return 2
      fi
      kafka_log_tail
      die "Kafka broker exited during startup (logs in $KAFKA_LOGS)"
    fi
    if "${STACKUTIL[@]}" ready "127.0.0.1:$bport" 1; then
      log "Kafka: ready at 127.0.0.1:$bport (pid $pid)"
      return 0
    fi
  done
  kafka_log_tail
  kafka_down
  die "Kafka broker did not become ready within ${KAFKA_START_TIMEOUT}s"
}

kafka_up() {
  if kafka_healthy; then
    log "Kafka: reusing running broker at 127.0.0.1:$(kafka_port) (pid $(kafka_pid))"
    return 0
  fi
  if kafka_running; then
    log "Kafka: broker pid $(kafka_pid) runs but does not answer; restarting it"
    kafka_down
  fi
  kafka_libs
  local rc
  for _ in 1 2 3; do
    rc=0
    kafka_start_once || rc=$?
    [[ $rc -eq 0 ]] && return 0
  done
  kafka_log_tail
  die "Kafka broker could not bind free ports after 3 attempts"
}

kafka_down() {
  local pid
  pid="$(kafka_pid)"
  if kafka_running; then
    # A single-node KRaft broker shuts down cleanly in a few seconds.
    stop_pid "$pid" 30 "Kafka broker"
  elif [[ -n $pid ]]; then
    log "Kafka: recorded pid $pid is not our broker any more; nothing to stop"
  fi
  rm -f "$KAFKA_PID_FILE" "$KAFKA_PORT_FILE"
  rm -rf "$KAFKA_DATA"
}

# ----------------------------------------------------------------------------- env file

env_line() { # NAME VALUE -> NAME=value, shell-quoted only when needed
  if [[ $2 =~ ^[A-Za-z0-9_./:@%+=,-]*$ ]]; then
    printf '%s=%s\n' "$1" "$2"
  else
    printf '%s=%q\n' "$1" "$2"
  fi
}

write_env() {
  local tmp="$ENV_FILE.tmp.$$"
  {
    echo "# Generated by scripts/stack.sh up; source with: set -a; . .stack/env; set +a"
    env_line ONCEGUARD_KAFKA_BOOTSTRAP "127.0.0.1:$(kafka_port)"
    env_line ONCEGUARD_MYSQL_HOST "$MYSQL_HOST"
    env_line ONCEGUARD_MYSQL_PORT "$MYSQL_PORT"
    env_line ONCEGUARD_MYSQL_USER "$MYSQL_USER"
    env_line ONCEGUARD_MYSQL_PASSWORD "$MYSQL_PASSWORD"
    env_line ONCEGUARD_MYSQL_DATABASE "$MYSQL_DB"
    env_line ONCEGUARD_REDIS_URI "redis://$REDIS_HOST:$REDIS_PORT"
    env_line KAFKA_LIB "$KAFKA_LIB"
  } >"$tmp"
  mv "$tmp" "$ENV_FILE"
}

# promtool and prometheus, which AlertRulesTest and AlertsIT run (the shipped alert rules on a real
# Prometheus): installed from Debian's package when missing. They are tools, not a service: the
# package's own service (port 9090) is kept from starting by a policy-rc.d in place during the
# install, which invoke-rc.d and deb-systemd-invoke both obey.
prometheus_tools() {
  if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    return 0
  fi
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [[ $(id -u) -eq 0 && ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
  fi
  apt_install prometheus || { [[ $own_policy -eq 0 ]] || rm -f "$policy"; return 1; }
  [[ $own_policy -eq 0 ]] || rm -f "$policy"
  log "prometheus: installed for its binaries; its service was not started"
}

# The toolchains of the example business containers in other languages, which PythonBusinessIT and
# GoBusinessIT build and run (examples/python-business, examples/go-business): Debian's packages
# only, installed when missing, in one apt-get call. Go builds offline in GOPATH mode from
# /usr/share/gocode; its github.com/golang/protobuf must be 1.5 (the 1.3 package is replaced).
business_toolchains() {
  local need=() py=/usr/bin/python3
  [[ -x $py ]] && "$py" -c 'import grpc, google.protobuf' 2>/dev/null || need+=(python3-grpcio python3-protobuf)
  command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
  command -v grpc_python_plugin >/dev/null 2>&1 || need+=(protobuf-compiler-grpc)
  command -v go >/dev/null 2>&1 || need+=(golang-go)
  command -v protoc-gen-go >/dev/null 2>&1 || need+=(protoc-gen-go)
  command -v protoc-gen-go-grpc >/dev/null 2>&1 || need+=(protoc-gen-go-grpc)
  [[ -d /usr/share/gocode/src/google.golang.org/grpc ]] || need+=(golang-google-grpc-dev)
  [[ -d /usr/share/gocode/src/google.golang.org/protobuf ]] || need+=(golang-google-protobuf-dev)
  [[ -f /usr/share/gocode/src/github.com/golang/protobuf/proto/registry.go ]] || need+=(golang-github-golang-protobuf-1-5-dev)
  [[ ${#need[@]} -eq 0 ]] || apt_install_or_warn "${need[@]}"
}

# openssl, mariadbd + mariadb-install-db and redis-server, which StoreSecurityIT runs privately (a
# TLS-only MariaDB and Redis of its own, certificates made with openssl; scripts/test-pki.sh makes
# the gRPC TLS tests' certificates with it too): installed from Debian's packages when missing.
# Nothing is started here.
secure_store_tools() {
  local missing=()
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  { [[ -x /usr/sbin/mariadbd ]] && command -v mariadb-install-db >/dev/null 2>&1; } || missing+=(mariadb-server)
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  [[ ${#missing[@]} -eq 0 ]] || apt_install_or_warn "${missing[@]}"
}

# ----------------------------------------------------------------------------- commands

cmd_up() {
  local t0=$SECONDS
  take_lock
  mariadb_up
  redis_up
  prometheus_tools
  business_toolchains
  secure_store_tools
  kafka_up
  write_env
  log "up in $((SECONDS - t0))s; environment in $ENV_FILE:"
  grep -v '^#' "$ENV_FILE" | sed 's/^/[stack]   /' >&2
}

cmd_down() {
  take_lock
  kafka_down
  mariadb_down
  redis_down
  rm -f "$ENV_FILE"
  log "down"
}

cmd_status() {
  local rc=0
  if mysql_tcp_login; then
    echo "mariadb: up   $MYSQL_HOST:$MYSQL_PORT$([[ -f $STATE_DIR/started-mariadb.pid ]] && echo ' (started by stack.sh)')"
  else
    echo "mariadb: DOWN $MYSQL_HOST:$MYSQL_PORT"; rc=1
  fi
  if redis_ping; then
    echo "redis:   up   $REDIS_HOST:$REDIS_PORT$([[ -f $STATE_DIR/started-redis.pid ]] && echo ' (started by stack.sh)')"
  else
    echo "redis:   DOWN $REDIS_HOST:$REDIS_PORT"; rc=1
  fi
  if kafka_healthy; then
    echo "kafka:   up   127.0.0.1:$(kafka_port) (pid $(kafka_pid), logs $KAFKA_LOGS)"
  elif kafka_running; then
    echo "kafka:   NOT ANSWERING (pid $(kafka_pid), logs $KAFKA_LOGS)"; rc=1
  else
    echo "kafka:   DOWN"; rc=1
  fi
  return $rc
}

cmd_env() {
  [[ -f $ENV_FILE ]] || die "$ENV_FILE does not exist; run: scripts/stack.sh up"
  cat "$ENV_FILE"
}

cmd_bootstrap() {
  kafka_healthy || die "no running broker for this checkout; run: scripts/stack.sh up"
  echo "127.0.0.1:$(kafka_port)"
}

# Fault injection for the chaos tests: kill -9 the running broker, keeping its data, port and
# config, so that `kafka-start` brings the same broker back (log recovery, same address).
cmd_kafka_kill() {
  local pid
  pid="$(kafka_pid)"
  kafka_running || die "no broker of this checkout runs (scripts/stack.sh up)"
  kill -9 "$pid"
  while pid_alive "$pid"; do sleep 0.05; done
  log "Kafka: broker pid $pid killed (kill -9); data kept in $KAFKA_DATA"
}

cmd_kafka_start() {
  local port
  if kafka_healthy; then
    log "Kafka: broker already runs at 127.0.0.1:$(kafka_port)"
    return 0
  fi
  port="$(kafka_port)"
  [[ -n $port && -f $KAFKA_CONF && -d $KAFKA_DATA ]] || die "no killed broker to restart (scripts/stack.sh up starts a new one)"
  kafka_launch "$port" || die "Kafka: port $port was taken while the broker was down"
}

cmd_kafka_cli() {
  [[ $# -ge 1 ]] || die "usage: stack.sh kafka-cli CLASS [ARGS...]"
  kafka_libs
  exec java "${KAFKA_CLI_HEAP[@]}" \
    -Dlog4j2.configurationFile="$SCRIPTS/kafka/log4j2-cli.xml" \
    -cp "$KAFKA_LIB/*" "$@"
}

cmd_topic() {
  [[ $# -ge 1 ]] || die "usage: stack.sh topic NAME [PARTITIONS]"
  local bootstrap
  bootstrap="$(cmd_bootstrap)"
  cmd_kafka_cli org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
    --if-not-exists --topic "$1" --partitions "${2:-3}" 2>&1 |
    { grep -v -e '^WARNING: Due to limitations' -e 'best to use either' || true; }
}

cmd_produce() {
  [[ $# -eq 1 ]] || die "usage: stack.sh produce TOPIC <lines of key|value"
  local bootstrap
  bootstrap="$(cmd_bootstrap)"
  cmd_kafka_cli org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$bootstrap" --topic "$1" \
    --reader-property parse.key=true --reader-property 'key.separator=|'
}

cmd_consume() {
  [[ $# -ge 1 ]] || die "usage: stack.sh consume TOPIC [MAX]"
  local bootstrap
  bootstrap="$(cmd_bootstrap)"
  cmd_kafka_cli org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$bootstrap" \
    --topic "$1" --from-beginning --max-messages "${2:-100}" --timeout-ms 10000 \
    --formatter-property print.headers=true --formatter-property print.key=true \
    --formatter-property headers.separator=' ' 2>&1 |
    { grep -v -e 'KIP-848' -e '^Processed a total' -e 'TimeoutException' -e 'terminating consumer process' || true; }
}

usage() {
  sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Sourced (by scripts/cluster.sh, for the helpers above): define, run nothing.
[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0

case "${1:-}" in
  up)        shift; cmd_up "$@" ;;
  down)      shift; cmd_down "$@" ;;
  status)    shift; cmd_status "$@" ;;
  env)       shift; cmd_env "$@" ;;
  bootstrap) shift; cmd_bootstrap "$@" ;;
  kafka-kill)  shift; cmd_kafka_kill "$@" ;;
  kafka-start) shift; cmd_kafka_start "$@" ;;
  kafka-cli) shift; cmd_kafka_cli "$@" ;;
  topic)     shift; cmd_topic "$@" ;;
  produce)   shift; cmd_produce "$@" ;;
  consume)   shift; cmd_consume "$@" ;;
  *)         usage ;;
esac
