#!/usr/bin/env bash
# Start a single-node Apache Cassandra 5.0 on 127.0.0.1 for the CQL backend's tests.
#
#   .ci/cassandra.sh start DIR PORT   fetch cassandra-all + deps from Maven Central (into DIR,
#                                     inside the clone), write a minimal config, start a
#                                     fresh node (empty data) in the background; its PID
#                                     goes to DIR/pid; storage port PORT+1
#   .ci/cassandra.sh restart DIR PORT start again on the data already in DIR
#   .ci/cassandra.sh wait DIR PORT    wait until the node answers CQL (up to 180 s)
#
# Maven Central publishes `cassandra-all` (and its dependencies) for 5.0.x but not the
# `apache-cassandra` bin tarball, so the node is launched the way bin/cassandra would:
# CassandraDaemon on the classpath with the JVM 17 flags of conf/jvm17-server.options.
set -euo pipefail
cmd=$1 dir=$(realpath -m "$2") port=$3
version=${OKA_CASSANDRA_VERSION:-5.0.6}
here=$(cd "$(dirname "$0")" && pwd)

start() {
  if [[ -f "$dir/pid" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    echo "cassandra: a node from $dir is still running (pid $(cat "$dir/pid")); stop it first" >&2
    exit 1
  fi
  mkdir -p "$dir/conf" "$dir/data"
  if [[ ! -f "$dir/lib/cassandra-all-$version.jar" ]]; then
    echo "cassandra: fetching cassandra-all $version and its dependencies (Maven Central)"
    sed "s/@VERSION@/$version/" "$here/cassandra/pom.xml" >"$dir/pom.xml"
    rm -rf "$dir/lib"
    mvn -q -B -f "$dir/pom.xml" -Dmaven.repo.local="$dir/m2" \
      dependency:copy-dependencies -DoutputDirectory="$dir/lib"
  fi
  sed -e "s#@DATA@#$dir/data#g" -e "s/@PORT@/$port/g" \
    -e "s/@STORAGE_PORT@/$((port + 1))/g" "$here/cassandra/cassandra.yaml" >"$dir/conf/cassandra.yaml"
  cp "$here/cassandra/logback.xml" "$dir/conf/logback.xml"
  local java=${JAVA_HOME:+$JAVA_HOME/bin/}java
  # Cassandra 5.0's own conf/jvm17-server.options, plus a small fixed heap.
  local opts=(
    -Xms768m -Xmx768m -Xmn128m -Xss512k
    -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 -XX:G1HeapRegionSize=16m
    -XX:G1RSetUpdatingPauseTimePercent=5 -XX:MaxGCPauseMillis=300 -XX:InitiatingHeapOccupancyPercent=70
    -XX:+UseStringDeduplication -XX:ActiveProcessorCount=2 -XX:+ExitOnOutOfMemoryError
    -Djdk.attach.allowAttachSelf=true
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
    --add-exports java.sql/java.sql=ALL-UNNAMED
    --add-exports java.base/java.lang.ref=ALL-UNNAMED
    --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
    --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
    --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
    --add-opens java.base/java.lang.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens java.base/java.io=ALL-UNNAMED
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
    --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED
    -Dio.netty.tryReflectionSetAccessible=true -Dio.netty.allocator.useCacheForAllThreads=true
    -Dio.netty.allocator.maxOrder=11
    -javaagent:"$dir/lib/jamm-0.4.0.jar"
    -Djava.net.preferIPv4Stack=true
    -Dcassandra.config="file://$dir/conf/cassandra.yaml"
    -Dlogback.configurationFile="file://$dir/conf/logback.xml"
    -Dcassandra.logdir="$dir"
    -Dcassandra.storagedir="$dir/data"
    -Dcassandra-foreground=yes
    -Dcassandra.skip_wait_for_gossip_to_settle=0
    -Dcassandra.ring_delay_ms=100
    -Dcassandra.initial_token=0
  )
  "$java" "${opts[@]}" -cp "$dir/lib/*" org.apache.cassandra.service.CassandraDaemon \
    >"$dir/out.log" 2>&1 &
  echo $! >"$dir/pid"
  echo "cassandra: pid $(cat "$dir/pid"), CQL on 127.0.0.1:$port, log $dir/out.log"
}

wait_ready() {
  local pid
  pid=$(cat "$dir/pid")
  for _ in $(seq 1 360); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "cassandra: the node exited; last lines of its log:" >&2
      tail -40 "$dir/out.log" >&2
      return 1
    fi
    if grep -q "Starting listening for CQL clients" "$dir/out.log" 2>/dev/null &&
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "cassandra: answering CQL on 127.0.0.1:$port"
      return 0
    fi
    sleep 0.5
  done
  echo "cassandra: not ready after 180 s; last lines of its log:" >&2
  tail -40 "$dir/out.log" >&2
  return 1
}

case $cmd in
start) rm -rf "$dir/data" && start ;;
restart) start ;;
wait) wait_ready ;;
*) echo "usage: $0 start|restart|wait DIR PORT" >&2; exit 2 ;;
esac
