#!/usr/bin/env bash
# One measured run of benches/peers/run.sh; run.sh calls it under
# `flock /tmp/oka-bench.lock` so that no other benchmark on the machine overlaps it.
#
#   measure.sh OUT.json SERVER_PID IDLE_PID REDIS_PID -- oka-load ARGS…
#
# Runs oka-load with ARGS and writes its JSON report to OUT.json with three fields added:
#   server_tree_cpu_s              CPU seconds (user + system) of SERVER_PID and every
#                                  process under it during the run: utime + stime of the
#                                  live ones plus cutime + cstime (children that exited and
#                                  were reaped, e.g. a restarted gunicorn worker), from
#                                  /proc, CLK_TCK = `getconf CLK_TCK`
#   server_tree_cpu_s_per_request  that over the report's `requests`
#   idle_server_tree_cpu_s         the same for IDLE_PID, the other system's server, which
#                                  is up but gets no requests during the run
#   redis_cpu_s                    the same for REDIS_PID, the redis-server both read
#   server_plus_redis_cpu_s_per_request  (server_tree_cpu_s + redis_cpu_s) / requests
#   machine_busy_cpu_s             busy CPU seconds of the whole machine (all cores,
#                                  /proc/stat: user nice system irq softirq steal)
#   other_cpu_s                    machine_busy_cpu_s less the server, the idle server,
#                                  Redis and oka-load: what anything else on the machine took (the
#                                  other benchmarks wait on the lock; builds and tests don't)
set -euo pipefail
trap 'echo "measure.sh: line $LINENO: $BASH_COMMAND failed (rc $?)" >&2' ERR
out=$1 server=$2 idle=$3 redis=$4
shift 4
[[ ${1:-} == -- ]] && shift
TCK=$(getconf CLK_TCK)

# tree_ticks PID: utime+stime+cutime+cstime summed over PID and its descendants.
tree_ticks() {
    awk -v root="$1" '
        FNR == 1 {
            line = $0
            sub(/^[0-9]+ \(.*\) /, "", line)        # drop "pid (comm) "
            n = split(line, f, " ")
            pid = FILENAME; sub(/^\/proc\//, "", pid); sub(/\/stat$/, "", pid)
            parent[pid] = f[2]
            ticks[pid] = f[12] + f[13] + f[14] + f[15]
            nextfile
        }
        END {
            total = 0
            for (p in ticks) {
                q = p
                for (depth = 0; depth < 64 && q != "" && q != "0"; depth++) {
                    if (q == root) { total += ticks[p]; break }
                    q = parent[q]
                }
            }
            print total
        }' /proc/[0-9]*/stat 2>/dev/null || true   # a process gone mid-scan: awk exits 2
}

# busy_ticks: the machine's busy jiffies (all cores) from /proc/stat.
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

m0=$(busy_ticks)
s0=$(tree_ticks "$server")
i0=$(tree_ticks "$idle")
r0=$(tree_ticks "$redis")
report=$("$@")
s1=$(tree_ticks "$server")
i1=$(tree_ticks "$idle")
r1=$(tree_ticks "$redis")
m1=$(busy_ticks)
jq -c --argjson s "$(( s1 - s0 ))" --argjson i "$(( i1 - i0 ))" --argjson r "$(( r1 - r0 ))" \
    --argjson m "$(( m1 - m0 ))" --argjson tck "$TCK" '
    . + {server_tree_cpu_s: ($s / $tck),
         server_tree_cpu_s_per_request: (if .requests > 0 then $s / $tck / .requests else 0 end),
         idle_server_tree_cpu_s: ($i / $tck),
         redis_cpu_s: ($r / $tck),
         server_plus_redis_cpu_s_per_request: (if .requests > 0 then ($s + $r) / $tck / .requests else 0 end),
         machine_busy_cpu_s: ($m / $tck),
         other_cpu_s: ((($m - $s - $i - $r) / $tck - .client_cpu_s) * 100 | round / 100)}' <<<"$report" >"$out"
cat "$out"
