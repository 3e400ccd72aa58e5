#!/usr/bin/env bash
# Start a single-node Apache Kafka 4 (KRaft: one process is broker and controller) on
# 127.0.0.1 for the Kafka source's tests.
#
#   .ci/kafka.sh start DIR PORT     fetch kafka_2.13 + deps from Maven Central (into DIR,
#                                   inside the clone; once), write the config, format a
#                                   fresh log directory and start the broker in the
#                                   background; its PID goes to DIR/pid; the controller
#                                   listens on PORT+1. A broker from DIR already running
#                                   on PORT is left as it is.
#   .ci/kafka.sh restart DIR PORT   start again on the data already in DIR
#   .ci/kafka.sh wait DIR PORT      wait until the broker answers on PORT (up to 120 s)
#   .ci/kafka.sh stop DIR           stop the broker (SIGTERM, then SIGKILL after 30 s)
#
# Maven Central has the broker's jars but not the bin tarball, so the broker is launched
# the way bin/kafka-server-start.sh would: kafka.Kafka on the classpath. Java 17+.
set -euo pipefail
cmd=${1:-} dir=$(realpath -m "${2:-target/ci/kafka}") port=${3:-}
version=${OKA_KAFKA_VERSION:-4.1.1}
here=$(cd "$(dirname "$0")" && pwd)
java=${JAVA_HOME:+$JAVA_HOME/bin/}java

running() {
  [[ -f "$dir/pid" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null
}

need_port() {
  [[ $port =~ ^[0-9]+$ ]] || { echo "usage: $0 $cmd DIR PORT (PORT: a number)" >&2; exit 2; }
}

fetch() {
  if [[ ! -f "$dir/lib/kafka_2.13-$version.jar" ]]; then
    echo "kafka: fetching kafka_2.13 $version and its dependencies (Maven Central)"
    sed "s/@VERSION@/$version/" "$here/kafka/pom.xml" >"$dir/pom.xml"
    rm -rf "$dir/lib"
    mvn -q -B -f "$dir/pom.xml" -Dmaven.repo.local="$dir/m2" \
      dependency:copy-dependencies -DoutputDirectory="$dir/lib"
  fi
}

configure() {
  sed -e "s#@DATA@#$dir/data#g" -e "s/@PORT@/$port/g" \
    -e "s/@CONTROLLER_PORT@/$((port + 1))/g" "$here/kafka/server.properties" \
    >"$dir/conf/server.properties"
  cp "$here/kafka/log4j2.properties" "$dir/conf/log4j2.properties"
  echo "$port" >"$dir/port"
}

# A fresh log directory, formatted with a new cluster id (static quorum: no --standalone).
format() {
  rm -rf "$dir/data"
  local tool=("$java" -Dlog4j2.configurationFile="$dir/conf/log4j2.properties" -cp "$dir/lib/*"
    kafka.tools.StorageTool)
  local id
  id=$("${tool[@]}" random-uuid 2>>"$dir/format.log")
  "${tool[@]}" format -t "$id" -c "$dir/conf/server.properties" >>"$dir/format.log" 2>&1 || {
    echo "kafka: formatting $dir/data failed; see $dir/format.log" >&2
    tail -20 "$dir/format.log" >&2
    exit 1
  }
}

launch() {
  "$java" -Xms512m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -XX:ActiveProcessorCount=2 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$dir/conf/log4j2.properties" -cp "$dir/lib/*" \
    kafka.Kafka "$dir/conf/server.properties" >"$dir/out.log" 2>&1 &
  echo $! >"$dir/pid"
  echo "kafka: pid $(cat "$dir/pid"), broker on 127.0.0.1:$port, log $dir/out.log"
}

start() {
  need_port
  if running; then
    if [[ "$(cat "$dir/port" 2>/dev/null)" == "$port" ]]; then
      echo "kafka: the broker from $dir is already running on 127.0.0.1:$port (pid $(cat "$dir/pid"))"
      return 0
    fi
    echo "kafka: a broker from $dir is running on another port (pid $(cat "$dir/pid")); stop it first: $0 stop $dir" >&2
    exit 1
  fi
  command -v "$java" >/dev/null && command -v mvn >/dev/null || {
    echo "kafka: java (17 or newer) and mvn are needed" >&2
    exit 1
  }
  mkdir -p "$dir/conf"
  fetch
  configure
  if [[ $1 == fresh || ! -f "$dir/data/meta.properties" ]]; then
    format
  fi
  launch
}

wait_ready() {
  need_port
  [[ -f "$dir/pid" ]] || { echo "kafka: no broker was started from $dir ($dir/pid is missing)" >&2; return 1; }
  local pid
  pid=$(cat "$dir/pid")
  for _ in $(seq 1 480); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "kafka: the broker exited; last lines of its log:" >&2
      tail -40 "$dir/out.log" >&2
      return 1
    fi
    if grep -q "Kafka Server started" "$dir/out.log" 2>/dev/null &&
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "kafka: answering on 127.0.0.1:$port"
      return 0
    fi
    sleep 0.25
  done
  echo "kafka: not ready after 120 s; last lines of its log:" >&2
  tail -40 "$dir/out.log" >&2
  return 1
}

stop() {
  if ! running; then
    echo "kafka: no broker from $dir is running"
    rm -f "$dir/pid"
    return 0
  fi
  local pid
  pid=$(cat "$dir/pid")
  kill -TERM "$pid"
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "kafka: the broker (pid $pid) did not stop within 30 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid"
  echo "kafka: stopped (pid $pid)"
}

case $cmd in
start) start fresh ;;
restart) start keep ;;
wait) wait_ready ;;
stop) stop ;;
*) echo "usage: $0 start|restart|wait DIR PORT, or $0 stop DIR" >&2; exit 2 ;;
esac
