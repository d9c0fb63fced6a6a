#!/usr/bin/env bash
# A real single-node Apache Kafka 4.x broker (KRaft, broker+controller in one JVM) built
# from Apache's jars on Maven Central: no Docker, no tarball download.
#
#   broker.sh fetch                          fetch the jars once into .cache/kafka/libs
#   broker.sh start [--port N] [--data DIR] [--sasl-port M --sasl-user NAME:PASSWORD ...]
#                   [--ssl-port T --ssl-dir CERTS] [--override KEY=VALUE ...]
#                                            start on 127.0.0.1:N (default 9092), print bootstrap;
#                                            with --sasl-port, also a SASL_PLAINTEXT listener
#                                            (mechanism PLAIN) on 127.0.0.1:M for the given users;
#                                            with --ssl-port, also an SSL listener on 127.0.0.1:T
#                                            requiring a client certificate (CERTS/broker.pem: the
#                                            broker's key and certificate; CERTS/ca.pem: the CA
#                                            its clients' certificates are signed by);
#                                            each --override sets a broker property (last wins)
#   broker.sh stop  [--data DIR]             SIGTERM, then SIGKILL after a timeout
#   broker.sh status [--data DIR]
#
# DIR defaults to .cache/kafka/data. Data survives stop/start with the same DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
POM="$ROOT/scripts/kafka/pom.xml"
CACHE="$ROOT/.cache/kafka"
LIBS="$CACHE/libs"
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
# The marker names the version and the pom's checksum: editing the pom invalidates the cache.
MARKER="$LIBS/.fetched"
MARKER_TEXT="kafka $KAFKA_VERSION pom $(sha256sum "$POM" | cut -c1-16)"
START_TIMEOUT=60
STOP_TIMEOUT=30

die() { echo "broker.sh: $*" >&2; exit 1; }

fetch() {
    mkdir -p "$CACHE"
    # Two test sessions may fetch at once: serialize them, the second one then skips.
    exec 9>"$CACHE/.fetch.lock"
    flock 9
    if [[ -f "$MARKER" && $(cat "$MARKER") == "$MARKER_TEXT" ]]; then
        exec 9>&-; return 0
    fi
    command -v mvn >/dev/null || die "Maven (mvn) is needed once, to fetch the Kafka jars"
    echo "fetching Kafka $KAFKA_VERSION jars into $LIBS ..." >&2
    rm -rf "$LIBS"   # no stale jars of another version on the classpath
    # Local repo inside the repo: a fresh clone works with nothing cached, nothing is
    # written to ~/.m2.
    mvn -q -B -Dstyle.color=never -f "$POM" -Dmaven.repo.local="$CACHE/m2" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIBS" >&2
    echo "$MARKER_TEXT" >"$MARKER"   # written last: an interrupted fetch is redone
    exec 9>&-
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
    local p
    for _ in $(seq 100); do
        p=$((20000 + RANDOM % 12000))   # below Linux's ephemeral range (32768+)
        port_in_use "$p" || { echo "$p"; return; }
    done
    die "no free port found"
}

# True once the broker answers a Metadata request listing at least one broker. Raw bytes
# over bash's /dev/tcp: no extra JVM start per poll. Kafka 4.0 removed Metadata v0-v3, so
# this is v4 (request header v1, non-flexible): size=20, api_key=3, api_version=4,
# correlation_id=1, client_id="probe", topics=null (-1), allow_auto_topic_creation=false.
metadata_ok() {
    local reply
    reply=$(exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1" || exit 1   # refused: not up yet
            printf '\x00\x00\x00\x14\x00\x03\x00\x04\x00\x00\x00\x01\x00\x05probe\xff\xff\xff\xff\x00' >&3
            timeout 2 head -c 16 <&3 | od -An -tx1 | tr -d ' \n') || return 1
    # Reply: size(4) correlation_id(4)=1 throttle_time_ms(4) broker_count(4) ...
    [[ ${#reply} -eq 32 && ${reply:8:8} == 00000001 && ${reply:24:8} != 00000000 ]]
}

# The pid from DIR/broker.pid if that process is alive and really is our broker
# (guards against a stale pid file whose pid was reused).
running_pid() {
    local pid
    pid=$(cat "$DATA/broker.pid" 2>/dev/null) || return 1
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" \
        | grep -qF "kafka.Kafka $DATA/server.properties" || return 1
    echo "$pid"
}

# The SASL_PLAINTEXT listener's lines: the PLAIN users it accepts, in a JAAS line
# (user_NAME="PASSWORD"; no username/password of its own: the broker talks to itself and
# to the controller over PLAINTEXT).
sasl_config() {
    local users="" user
    for user in "${SASL_USERS[@]}"; do
        [[ $user =~ ^([A-Za-z0-9._-]+):([^\"\\;]+)$ ]] || die "bad --sasl-user (NAME:PASSWORD): $user"
        users+=" user_${BASH_REMATCH[1]}=\"${BASH_REMATCH[2]}\""
    done
    cat <<EOF
# SASL_PLAINTEXT listener (PLAIN), for tests of authentication.
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required$users;
EOF
}

# The SSL listener's lines: PEM files (no keystore to build), client certificates required.
ssl_config() {
    [[ -f $SSL_DIR/broker.pem && -f $SSL_DIR/ca.pem ]] || die "--ssl-dir needs broker.pem and ca.pem: $SSL_DIR"
    cat <<EOF
# SSL listener, for tests of TLS: the client must present a certificate the CA signed.
ssl.keystore.type=PEM
ssl.keystore.location=$SSL_DIR/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$SSL_DIR/ca.pem
ssl.client.auth=required
EOF
}

# The --override lines, after everything else: Kafka takes the last value of a key, so they
# win over the lines above (a test of a broker with limits other than Kafka's defaults).
override_config() {
    local override
    echo "# --override"
    for override in "${OVERRIDES[@]}"; do
        [[ $override =~ ^[a-z0-9._-]+=[^$'\n']*$ ]] || die "bad --override (KEY=VALUE): $override"
        echo "$override"
    done
}

write_config() {  # $1 = client port, $2 = controller port, $3 = SASL port or empty, $4 = SSL port or empty
    local listeners="PLAINTEXT://127.0.0.1:$1" protocols="PLAINTEXT:PLAINTEXT"
    if [[ $3 ]]; then
        listeners+=",SASL_PLAINTEXT://127.0.0.1:$3"
        protocols+=",SASL_PLAINTEXT:SASL_PLAINTEXT"
    fi
    if [[ $4 ]]; then
        listeners+=",SSL://127.0.0.1:$4"
        protocols+=",SSL:SSL"
    fi
    cat >"$DATA/server.properties" <<EOF
# Written by scripts/kafka/broker.sh: single-node KRaft broker for tests.
process.roles=broker,controller
node.id=1
# Static quorum: the one voter is this node. Unlike the dynamic quorum
# (controller.quorum.bootstrap.servers + format --standalone) the voter endpoints are not
# stored in the metadata log, so a restart on the same DIR may pick new ports.
controller.quorum.voters=1@127.0.0.1:$2
controller.listener.names=CONTROLLER
listeners=$listeners,CONTROLLER://127.0.0.1:$2
advertised.listeners=$listeners
listener.security.protocol.map=$protocols,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$DATA/kafka-logs
num.partitions=1
default.replication.factor=1
# Internal topics default to replication factor 3: one broker needs 1, or group
# coordination and transactions never become available.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# Fewer internal partitions (defaults 50) make the first group / transaction quicker.
offsets.topic.num.partitions=1
transaction.state.log.num.partitions=1
group.initial.rebalance.delay.ms=0
# A worker killed mid-transaction leaves it open until transaction_timeout_seconds; check
# for such transactions every second (default 10 s) so a standby takes over promptly.
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
# Small segments and bounded retention: test data stays small on disk.
log.segment.bytes=1048576
log.retention.ms=3600000
log.retention.bytes=268435456
log.retention.check.interval.ms=60000
EOF
    if [[ $3 ]]; then sasl_config >>"$DATA/server.properties"; fi
    if [[ $4 ]]; then ssl_config >>"$DATA/server.properties"; fi
    if ((${#OVERRIDES[@]})); then override_config >>"$DATA/server.properties"; fi
    cat >"$DATA/log4j2.properties" <<'EOF'
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
EOF
}

start() {
    local port=9092 cport pid
    fetch   # no-op when the cache is complete
    mkdir -p "$DATA"
    if pid=$(running_pid); then die "already running (pid $pid, data $DATA)"; fi
    [[ $PORT ]] && port=$PORT
    [[ $port =~ ^[0-9]{1,5}$ && $port -gt 0 && $port -lt 65536 ]] || die "bad port: $port"
    port_in_use "$port" && die "port $port is already in use"
    if [[ $SASL_PORT ]]; then
        [[ $SASL_PORT =~ ^[0-9]{1,5}$ && $SASL_PORT -gt 0 && $SASL_PORT -lt 65536 ]] \
            || die "bad SASL port: $SASL_PORT"
        port_in_use "$SASL_PORT" && die "port $SASL_PORT is already in use"
        ((${#SASL_USERS[@]})) || die "--sasl-port needs at least one --sasl-user NAME:PASSWORD"
    fi
    if [[ $SSL_PORT ]]; then
        [[ $SSL_PORT =~ ^[0-9]{1,5}$ && $SSL_PORT -gt 0 && $SSL_PORT -lt 65536 ]] || die "bad SSL port: $SSL_PORT"
        port_in_use "$SSL_PORT" && die "port $SSL_PORT is already in use"
        [[ $SSL_DIR ]] || die "--ssl-port needs --ssl-dir CERTS"
    fi
    cport=$(free_port)
    write_config "$port" "$cport" "$SASL_PORT" "$SSL_PORT"
    if [[ ! -f "$DATA/kafka-logs/meta.properties" ]]; then
        # A random cluster id in Kafka's Uuid form: 16 bytes, URL-safe base64, no padding.
        # (Saves a JVM start over `StorageTool random-uuid`; ids starting with '-' would be
        # read as an option, so avoid them.)
        local id
        until [[ ${id:-} && $id != -* ]]; do
            id=$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
        done
        java -cp "$LIBS/*" -Dlog4j2.configurationFile="$DATA/log4j2.properties" \
            kafka.tools.StorageTool format --cluster-id "$id" \
            --config "$DATA/server.properties" >"$DATA/format.log" 2>&1 \
            || { cat "$DATA/format.log" >&2; die "storage format failed"; }
    fi
    # nohup + background: the JVM outlives this script; `stop` finds it by DIR/broker.pid.
    # Appended: after a crash and restart on the same data, the log of the run that crashed is the evidence.
    echo "=== broker start $(date -u +%Y-%m-%dT%H:%M:%SZ) ===" >>"$DATA/broker.log"
    nohup java -Xms256m -Xmx512m -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$DATA/log4j2.properties" \
        -cp "$LIBS/*" kafka.Kafka "$DATA/server.properties" >>"$DATA/broker.log" 2>&1 &
    pid=$!
    echo "$pid" >"$DATA/broker.pid"
    local deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        # kill -0, not running_pid: right after the fork the process may not have exec'd
        # java yet, so its command line does not show kafka.Kafka.
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 50 "$DATA/broker.log" >&2; rm -f "$DATA/broker.pid"
            die "broker exited during start (log: $DATA/broker.log)"
        fi
        if metadata_ok "$port"; then echo "127.0.0.1:$port"; return 0; fi
        sleep 0.5
    done
    tail -n 50 "$DATA/broker.log" >&2
    stop
    die "broker did not answer a metadata request on 127.0.0.1:$port within ${START_TIMEOUT}s"
}

stop() {
    local pid
    if ! pid=$(running_pid); then rm -f "$DATA/broker.pid"; echo "not running" >&2; return 0; fi
    kill -TERM "$pid"
    for _ in $(seq $((STOP_TIMEOUT * 5))); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$DATA/broker.pid"; return 0; }
        sleep 0.2
    done
    echo "broker.sh: pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s, sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$DATA/broker.pid"
}

status() {
    local pid
    if pid=$(running_pid); then
        echo "running: pid $pid, listeners $(sed -n 's|^advertised.listeners=||p' \
            "$DATA/server.properties"), data $DATA"
    else
        echo "not running (data $DATA)"; return 3
    fi
}

cmd=${1:-}; shift || true
PORT="" DATA="$CACHE/data" SASL_PORT="" SASL_USERS=() SSL_PORT="" SSL_DIR="" OVERRIDES=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --port) PORT=${2:?--port needs a value}; shift 2 ;;
        --data) DATA=${2:?--data needs a value}; shift 2 ;;
        --sasl-port) SASL_PORT=${2:?--sasl-port needs a value}; shift 2 ;;
        --sasl-user) SASL_USERS+=("${2:?--sasl-user needs NAME:PASSWORD}"); shift 2 ;;
        --ssl-port) SSL_PORT=${2:?--ssl-port needs a value}; shift 2 ;;
        --ssl-dir) SSL_DIR=$(realpath -m "${2:?--ssl-dir needs a value}"); shift 2 ;;
        --override) OVERRIDES+=("${2:?--override needs KEY=VALUE}"); shift 2 ;;
        *) die "unknown argument: $1" ;;
    esac
done
DATA=$(realpath -m "$DATA")   # absolute: it goes into log.dirs and identifies the JVM

case $cmd in
    fetch) fetch ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) sed -n '2,19s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
