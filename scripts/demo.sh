#!/usr/bin/env bash
# OnceGuard end to end, on the real local stack: Kafka -> the sidecar (the real jar) -> a Node.js
# business container, playing the three production incidents of docs/design.md §2 plus an out-of-order pair, an
# illegal transition, bad input and a business refusal; then it prints, per record, what went in,
# the verdict (disposition, deciding layer, reason) and what the business received.
#
#   make demo          build, start the stack, run this script, stop the stack (a fresh machine needs nothing else)
#   scripts/demo.sh    when the stack already runs: scripts/stack.sh up; set -a; . .stack/env; set +a; scripts/demo.sh
#
# Needs java 17, node >= 18 with npm, and the stack's environment (ONCEGUARD_KAFKA_BOOTSTRAP,
# ONCEGUARD_MYSQL_*, ONCEGUARD_REDIS_URI). Builds the two jars if they are missing and runs `npm ci`
# in examples/node-business if node_modules is missing. Every run uses fresh topics
# (demo-<run id>.*), drops and recreates the database onceguard_demo (ONCEGUARD_DEMO_DATABASE) and
# deletes the Redis keys under "og-demo:". It leaves its files in .stack/demo/ (the generated sidecar
# configuration, the sidecar's log, the business's JSON lines) and the database, to look around.
#
# Exit status: 0 when every record ended as the story expects, 1 otherwise (the output says what).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$ROOT/.stack/demo"
SIDECAR_JAR="${ONCEGUARD_JAR:-$ROOT/proxy/target/onceguard.jar}"
DEMO_JAR="$ROOT/examples/demo/target/onceguard-demo.jar"
BUSINESS_DIR="$ROOT/examples/node-business"
DATABASE="${ONCEGUARD_DEMO_DATABASE:-onceguard_demo}"
REDIS_PREFIX="og-demo:"
MVN="${MVN:-mvn}"
SIDECAR_START_TIMEOUT=60   # seconds
SIDECAR_STOP_TIMEOUT=30    # seconds; the sidecar drains within its shutdown-timeout (20s in the demo)

log() { echo "[demo] $*"; }
die() { echo "[demo] ERROR: $*" >&2; exit 1; }

[[ -n ${ONCEGUARD_KAFKA_BOOTSTRAP:-} ]] ||
  die "ONCEGUARD_KAFKA_BOOTSTRAP is not set: run \`make demo\`, or: scripts/stack.sh up; set -a; . .stack/env; set +a; scripts/demo.sh"
command -v java >/dev/null 2>&1 || die "java is not on the PATH (Java 17 is needed)"
command -v node >/dev/null 2>&1 || die "node is not on the PATH (Node.js >= 18 runs the business container)"

mkdir -p "$WORK"
RUN_ID="$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"

# ------------------------------------------------------------------------------------ processes

NODE_PID=""
SIDECAR_PID=""

# SIGTERM, wait up to $3 seconds, then SIGKILL; prints the exit status. Only our own children.
# shellcheck disable=SC2317 # stop_child and cleanup run from the EXIT trap
stop_child() { # pid name timeout
  local pid=$1 name=$2 timeout=$3 i code=0
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop within ${timeout}s after SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || code=$?
  log "$name stopped (exit status $code)"
}

# shellcheck disable=SC2317
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_child "$SIDECAR_PID" "sidecar (pid $SIDECAR_PID)" "$SIDECAR_STOP_TIMEOUT"
  stop_child "$NODE_PID" "business container (pid $NODE_PID)" 5
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Waits until $2 matches a line of file $1, while pid $3 lives; $4 seconds at most.
wait_for_line() { # file regex pid timeout
  local i
  for ((i = 0; i < $4 * 10; i++)); do
    grep -Eq "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# ------------------------------------------------------------------------------------ prepare

if [[ ! -f $SIDECAR_JAR || ! -f $DEMO_JAR ]]; then
  log "building the sidecar and demo jars ($MVN install -DskipTests -pl proxy,examples/demo -am; log in $WORK/build.log)"
  (cd "$ROOT" && "$MVN" -B -q install -DskipTests -pl proxy,examples/demo -am) >"$WORK/build.log" 2>&1 ||
    { tail -n 40 "$WORK/build.log" >&2; die "the build failed (log: $WORK/build.log)"; }
fi

if [[ ! -d $BUSINESS_DIR/node_modules/@grpc/grpc-js || ! -d $BUSINESS_DIR/node_modules/@grpc/proto-loader ]]; then
  command -v npm >/dev/null 2>&1 || die "npm is not on the PATH; it installs the business container's two packages"
  log "installing the business container's packages (npm ci in examples/node-business)"
  (cd "$BUSINESS_DIR" && npm ci --no-audit --no-fund --loglevel=error) >"$WORK/npm.log" 2>&1 ||
    { cat "$WORK/npm.log" >&2; die "npm ci failed in $BUSINESS_DIR"; }
fi

# A fresh guard database: the entity states and the ledger of an earlier run would change the story.
if command -v mysql >/dev/null 2>&1; then
  MYSQL_PWD="${ONCEGUARD_MYSQL_PASSWORD:-}" mysql --protocol=TCP -h "${ONCEGUARD_MYSQL_HOST:-127.0.0.1}" \
    -P "${ONCEGUARD_MYSQL_PORT:-3306}" -u "${ONCEGUARD_MYSQL_USER:-root}" --connect-timeout=5 \
    -e "DROP DATABASE IF EXISTS \`$DATABASE\`" ||
    die "cannot drop database $DATABASE on ${ONCEGUARD_MYSQL_HOST:-127.0.0.1}:${ONCEGUARD_MYSQL_PORT:-3306}"
else
  DATABASE="${DATABASE}_$RUN_ID"
  log "no mysql client to reset the demo database; using a new one instead: $DATABASE"
fi

cat <<EOF

  OnceGuard demo, run $RUN_ID
  Kafka $ONCEGUARD_KAFKA_BOOTSTRAP, MariaDB ${ONCEGUARD_MYSQL_HOST:-127.0.0.1}:${ONCEGUARD_MYSQL_PORT:-3306}/$DATABASE, Redis ${ONCEGUARD_REDIS_URI:-redis://127.0.0.1:6379} (keys $REDIS_PREFIX*)
  business container: examples/node-business (Node.js, onceguard.v1.MessageHandler)
  sidecar:            java -jar ${SIDECAR_JAR#"$ROOT"/} run --config ${WORK#"$ROOT"/}/onceguard-demo.yaml

EOF

# ------------------------------------------------------------------------------------ start

# truncated here, not by the redirections: a background job's redirection may happen after the
# wait below first reads the file, which would then still show the previous run's lines
: >"$WORK/business.jsonl"
: >"$WORK/business.out"
: >"$WORK/sidecar.log"
node "$BUSINESS_DIR/server.js" --port 0 --out "$WORK/business.jsonl" >>"$WORK/business.out" 2>"$WORK/business.log" &
NODE_PID=$!
wait_for_line "$WORK/business.out" '^listening on [0-9]+$' "$NODE_PID" 15 ||
  { cat "$WORK/business.log" >&2; die "the business container did not start listening within 15s"; }
BUSINESS_PORT="$(sed -n 's/^listening on \([0-9][0-9]*\)$/\1/p' "$WORK/business.out" | head -n 1)"
log "business container listening on 127.0.0.1:$BUSINESS_PORT (pid $NODE_PID), deliveries -> ${WORK#"$ROOT"/}/business.jsonl"

java -jar "$DEMO_JAR" setup --run-id "$RUN_ID" --business-port "$BUSINESS_PORT" \
  --config-out "$WORK/onceguard-demo.yaml" --database "$DATABASE" --redis-prefix "$REDIS_PREFIX"

java -Xmx512m -jar "$SIDECAR_JAR" run --config "$WORK/onceguard-demo.yaml" >>"$WORK/sidecar.log" 2>&1 &
SIDECAR_PID=$!
if ! wait_for_line "$WORK/sidecar.log" 'sidecar .* started' "$SIDECAR_PID" "$SIDECAR_START_TIMEOUT"; then
  tail -n 30 "$WORK/sidecar.log" >&2
  die "the sidecar did not start within ${SIDECAR_START_TIMEOUT}s (log: $WORK/sidecar.log)"
fi
log "sidecar started (pid $SIDECAR_PID), log -> ${WORK#"$ROOT"/}/sidecar.log"

# ------------------------------------------------------------------------------------ play

rc=0
java -jar "$DEMO_JAR" run --run-id "$RUN_ID" --business-log "$WORK/business.jsonl" \
  --database "$DATABASE" --redis-prefix "$REDIS_PREFIX" || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "---- last lines of $WORK/sidecar.log ----" >&2
  tail -n 25 "$WORK/sidecar.log" >&2
  echo "----" >&2
fi
exit "$rc"
