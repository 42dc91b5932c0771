#!/usr/bin/env bash
# The load harness: one command for the figures of BENCHMARKS.md (each
# section names the ONLY= part that printed them). It builds the binaries,
# starts a Vault dev server, Redis and sealers on loopback ports, runs
# bench/sealer-load, and writes the tables, timelines and the soak plot into
# bench-results/<time>/.
#
#   scripts/bench.sh            everything (about 50 minutes)
#   SOAK=60s scripts/bench.sh   a shorter soak
#   ONLY=side-by-side scripts/bench.sh   sections 0 and 1 alone (about 14 minutes)
#   SKIP=side-by-side scripts/bench.sh   all but sections 0 and 1
#   ONLY=scale scripts/bench.sh   the scale curves alone (tenants, ledger
#                                 states, key versions, payload)
#   ONLY=ledger scripts/bench.sh  the embedded ledger beside the durable-append
#                                 floor, one-time Open over gRPC, and
#                                 sealer-proxy beside a plain reverse proxy
#   ONLY=java scripts/bench.sh    the Java client beside the Go client and
#                                 its floor (about 10 minutes)
#   ONLY=nemesis scripts/bench.sh the long nemesis run (about 30 minutes; as
#                                 root: network namespaces)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
tool_gcflags="" # an optimized Vault: it serves the Vault Transit figures

SOAK=${SOAK:-600s}
out="$PWD/bench-results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out/bin"
apt_install redis-server redis-server
apt_install gnuplot gnuplot-nox
apt_install openssl openssl
case "${ONLY:-}" in ledger | nemesis | java) ;; *) ensure_vault >/dev/null ;; esac # those sections need no Vault
go build -o "$out/bin/" ./cmd/sealer ./bench/sealer-load ./bench/sealer-echo
sealer="$out/bin/sealer"
load="$out/bin/sealer-load"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# start_sealer NAME FLAGS...: runs a sealer, waits until it listens, and sets
# ${NAME}_GRPC, ${NAME}_HTTP and ${NAME}_PID.
start_sealer() {
  local name=$1; shift
  local log="$out/$name.log"
  "$sealer" serve --grpc-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --data-dir "$out/data-$name" \
    --log-format json --log-level info --audit-log /dev/null "$@" 2>"$log" &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do
    if grep -q '"msg":"listening"' "$log"; then
      printf -v "${name}_GRPC" '%s' "$(grep -m1 '"msg":"listening"' "$log" | sed 's/.*"grpc":"\([^"]*\)".*/\1/')"
      printf -v "${name}_HTTP" '%s' "$(grep -m1 '"msg":"listening"' "$log" | sed 's/.*"http":"\([^"]*\)".*/\1/')"
      printf -v "${name}_PID" '%s' "$pid"
      return
    fi
    sleep 0.1
  done
  cat "$log" >&2
  exit 1
}

# start_echo NAME starts bench/sealer-echo (the floor: the API doing no
# work) on free loopback ports, and sets NAME_echo_GRPC, NAME_echo_HTTP and
# NAME_echo_PID once it listens.
start_echo() {
  local name=$1 grpc=127.0.0.1:$(free_port) http=127.0.0.1:$(free_port)
  "$out/bin/sealer-echo" -grpc-addr "$grpc" -http-addr "$http" 2>"$out/$name-echo.log" &
  pids+=("$!")
  printf -v "${name}_echo_PID" '%s' "$!"
  printf -v "${name}_echo_GRPC" '%s' "$grpc"
  printf -v "${name}_echo_HTTP" '%s' "$http"
  until grep -qs listening "$out/$name-echo.log"; do sleep 0.1; done
}

metric() { curl -s "http://$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

# proxy_beside_floor NAME SEALER_GRPC: starts the naive MCP server,
# sealer-proxy (its default, latest-only flows) on the sealer at
# SEALER_GRPC, and a plain httputil.ReverseProxy in front of the same
# server, then measures MCP round trips through each and direct, in turns,
# into $out/NAME.md.
proxy_beside_floor() {
  local name=$1 sealer_grpc=$2 naive proxy floor
  go build -o "$out/bin/" ./cmd/sealer-proxy ./bench/sealer-floorproxy
  (cd examples && go build -o "$out/bin/" ./naiveserver)
  naive=127.0.0.1:$(free_port) proxy=127.0.0.1:$(free_port) floor=127.0.0.1:$(free_port)
  "$out/bin/naiveserver" -addr "$naive" 2>"$out/$name-naive.log" &
  pids+=("$!")
  "$out/bin/sealer-proxy" --addr "$proxy" --admin-addr "" --upstream "http://$naive/mcp" --sealer "$sealer_grpc" \
    --principal anonymous --log-level warn 2>"$out/$name-proxy.log" &
  pids+=("$!")
  "$out/bin/sealer-floorproxy" -addr "$floor" -upstream "http://$naive" 2>"$out/$name-floorproxy.log" &
  pids+=("$!")
  until grep -q listening "$out/$name-naive.log" && curl -s -o /dev/null "http://$proxy/mcp" && grep -q listening "$out/$name-floorproxy.log"; do sleep 0.1; done
  echo "uptime before the proxy runs: $(uptime)" | tee -a "$out/$name.md"
  "$load" -mcp-url "http://$proxy/mcp" -mcp-direct-url "http://$naive/mcp" -mcp-floor-url "http://$floor/mcp" \
    -c 1,16 -d 8s -warmup 2s -repeat 3 -ops mcp-mrtr,mcp-mrtr@floor,mcp-mrtr@direct | tee -a "$out/$name.md"
}

# --- At most once under a nemesis ----------------------------------------
# ONLY=nemesis scripts/bench.sh: e2e's TestNemesis_AtMostOnce, long. For
# each seed of NEMESIS_SEEDS (default 1,2,3), NEMESIS_DURATION (default 4m)
# of faults on a Redis Cluster and 3 sealers in network namespaces: first
# as shipped (--ledger-replicas 1, the clock check on), where any double
# open fails the run; then the same schedules without them, where the
# checker counts the losses. Histories go to nemesis-safe/ and
# nemesis-unsafe/ (JSON lines; SEALER_NEMESIS_REPLAY=FILE judges one again).
if [ "${ONLY:-}" = nemesis ]; then
  apt_install ip iproute2
  apt_install redis-cli redis-tools
  for mode in safe unsafe; do
    step "nemesis: $mode, seeds ${NEMESIS_SEEDS:-1,2,3}, ${NEMESIS_DURATION:-4m} each"
    (cd e2e && CI=true SEALER_TEST_LANE=failover SEALER_NEMESIS_SEEDS="${NEMESIS_SEEDS:-1,2,3}" \
      SEALER_NEMESIS_DURATION="${NEMESIS_DURATION:-4m}" SEALER_NEMESIS_UNSAFE=$([ $mode = unsafe ] && echo 1 || echo 0) \
      SEALER_NEMESIS_HISTORY_DIR="$out/nemesis-$mode" \
      go test -count=1 -timeout 120m -run '^TestNemesis_AtMostOnce$' -v .) 2>&1 | tee "$out/nemesis-$mode.txt"
  done
  echo "results in $out"
  exit 0
fi

# --- The embedded ledger at the disk's limit ------------------------------
# ONLY=ledger scripts/bench.sh runs this section alone (under 15 minutes at
# the default LEDGER_STATES=0,1000000,10000000). In the data directory's file
# system: the durable-append floor (64-byte records, one fdatasync per group
# of whatever waits; and one per record), the embedded ledger's Consume and
# Advance, at 1 and 16 callers, in turns; then a sweep of 1 M expiring
# entries under load. Then, on one sealer with file keys and the embedded
# ledger: one-time Open beside ordinary Open over gRPC, and sealer-proxy
# (latest-only flows, its default) beside a plain httputil.ReverseProxy in
# front of the same MCP server.
if [ "${SKIP:-}" != ledger ] && { [ -z "${ONLY:-}" ] || [ "${ONLY:-}" = ledger ]; }; then
go build -o "$out/bin/" ./bench/sealer-scale
step "ledger: the embedded ledger beside the durable-append floor, live states ${LEDGER_STATES:-0,1000000,10000000}"
echo "uptime at the start: $(uptime)" | tee "$out/ledger.md"
"$out/bin/sealer-scale" ledger -dir "$out" -states "${LEDGER_STATES:-0,1000000,10000000}" -sweep 1000000 -c 16 -rounds 3 -d 2s |
  tee -a "$out/ledger.md"

step "ledger: one-time Open beside ordinary Open over gRPC, file keys and the embedded ledger"
start_sealer onetimeembedded
"$load" -targets "$onetimeembedded_GRPC" -c 1,16 -d 8s -warmup 2s -repeat 3 -ops open,open-onetime -pool-rate 40000 |
  tee -a "$out/ledger.md"

step "ledger: sealer-proxy (latest-only flows) beside a plain reverse proxy, the same MCP server behind both"
proxy_beside_floor ledger "$onetimeembedded_GRPC"
fi
[ "${ONLY:-}" = ledger ] && { echo "results in $out"; exit 0; }

# --- Scale: how cost grows with tenants, ledger states, key versions, payload
# ONLY=scale scripts/bench.sh runs this section alone. SCALE_STATES sets the
# ledger levels (default 0,1000000,10000000; the ledgers are filled by a bulk
# loader, see bench/sealer-scale), SCALE_TENANTS the tenant levels.
if [ "${SKIP:-}" != scale ] && { [ -z "${ONLY:-}" ] || [ "${ONLY:-}" = scale ]; }; then
go build -o "$out/bin/" ./bench/sealer-scale
scale="$out/bin/sealer-scale"
echo "uptime at the start: $(uptime)" | tee "$out/scale.md"

step "scale: payload 0 to 1 MiB in process, beside raw XChaCha20-Poly1305"
"$scale" payload -d 300ms | tee -a "$out/scale.md"

step "scale: key versions 1 to 1,000 in the ring"
"$scale" ring -versions 1,10,100,1000 -d 300ms | tee -a "$out/scale.md"

step "scale: tenants 1 to 100,000 (half bearer token, half certificate SAN)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout "$out/scale-key.pem" -out "$out/scale.pem" 2>/dev/null
# write_tenants N FILE: tenant t0 holds the load's token; even tenants a
# token each, odd ones a certificate DNS SAN.
write_tenants() {
  awk -v n="$1" -v tok="$(printf %s scale-token | sha256sum | cut -d' ' -f1)" 'BEGIN {
    print "tenants:"
    for (i = 0; i < n; i++) {
      if (i % 2 == 0) { h = tok; if (i > 0) { h = sprintf("%064x", i) }; printf "  t%d:\n    tokens: [\"sha256:%s\"]\n", i, h }
      else printf "  t%d:\n    mtls: {dns: [\"t%d.tenants.example\"]}\n", i, i
    }
  }' >"$2"
}
echo "| tenants | Seal+Open pairs/s (16 callers) | share of 1 tenant | p99 | RSS | RSS per tenant over 1 | start to listening |" | tee "$out/scale-tenants.md"
echo "|---|---|---|---|---|---|---|" | tee -a "$out/scale-tenants.md"
one_rate="" one_rss=""
for n in ${SCALE_TENANTS:-1 1000 100000}; do
  write_tenants "$n" "$out/tenants-$n.yaml"
  t0=$(date +%s%N)
  start_sealer "scale$n" --tls-cert "$out/scale.pem" --tls-key "$out/scale-key.pem" --tls-client-ca "$out/scale.pem" \
    --tenants "$out/tenants-$n.yaml"
  v="scale${n}_GRPC"; h="scale${n}_HTTP"; p="scale${n}_PID"
  started_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  row=$("$load" -targets "${!v}" -tls-ca "$out/scale.pem" -token scale-token -c 16 -d 8s -warmup 2s -repeat 3 -ops seal-open | grep '^| Seal')
  rate=$(awk -F'|' '{ gsub(/ /, "", $4); print $4 }' <<<"$row")
  p99=$(awk -F'|' '{ gsub(/ /, "", $6); print $6 }' <<<"$row")
  rss=$(curl -sk "https://${!h}/metrics" | awk '$1 == "process_resident_memory_bytes" { printf "%.0f", $2 }')
  [ -z "$one_rate" ] && one_rate=$rate one_rss=$rss
  per=$(awk -v r="$rss" -v o="$one_rss" -v n="$n" 'BEGIN { if (n > 1) printf "%.0f B", (r - o) / (n - 1); else print "-" }')
  echo "| $n | $rate | $(( 100 * rate / one_rate ))% | $p99 | $(( rss / 1048576 )) MiB | $per | ${started_ms} ms |" | tee -a "$out/scale-tenants.md"
  last_pid=${!p} last_grpc=${!v} last_http=${!h}
done
step "scale: SIGHUP reload of the largest tenants file every 5 s under load (16 callers, 30 s)"
( sleep 7; for _ in 1 2 3 4 5; do kill -HUP "$last_pid"; sleep 5; done ) &
"$load" -targets "$last_grpc" -tls-ca "$out/scale.pem" -token scale-token -c 16 -d 30s -warmup 2s -ops seal-open \
  -timeline "$out/scale-reload.csv" | tee "$out/scale-reload.md"
wait $!
echo "reloads: $(curl -sk "https://$last_http/metrics" | grep '^sealer_reloads_total{result=.*tenants')" | tee -a "$out/scale-reload.md"
grep '"tenants reloaded"' "$out/scale${n}.log" | tail -n 1 >>"$out/scale-reload.md" || true
kill "$last_pid" ${scale1_PID:-} ${scale1000_PID:-} 2>/dev/null || true
cat "$out/scale-tenants.md" "$out/scale-reload.md" >>"$out/scale.md"


step "scale: the Redis ledger (AOF, fsync always), live states ${SCALE_STATES:-0,1000000,10000000}"
SCALE_REDIS_PORT=$(free_port)
redis-server --bind 127.0.0.1 --port "$SCALE_REDIS_PORT" --dir "$out" --save "" --appendonly yes --appendfsync always \
  --appendfilename scale.aof --daemonize no --logfile "$out/scale-redis.log" &
pids+=("$!")
until redis-cli -p "$SCALE_REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.1; done
"$scale" redis -addr "127.0.0.1:$SCALE_REDIS_PORT" -states "${SCALE_STATES:-0,1000000,10000000}" -expiring 1000000 -c 16 -d 5s | tee -a "$out/scale.md"
redis-cli -p "$SCALE_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true

step "scale: gRPC Seal+Open at 1 KiB, 16 KiB and 64 KiB beside the echo floor"
start_sealer scalepayload
ECHO_GRPC=127.0.0.1:$(free_port) ECHO_HTTP=127.0.0.1:$(free_port)
"$out/bin/sealer-echo" -grpc-addr "$ECHO_GRPC" -http-addr "$ECHO_HTTP" 2>"$out/scale-echo.log" &
SCALE_ECHO_PID=$!
pids+=("$SCALE_ECHO_PID")
until grep -q listening "$out/scale-echo.log"; do sleep 0.1; done
for size in 1024 16384 65536; do
  "$load" -targets "$scalepayload_GRPC" -echo-grpc "$ECHO_GRPC" -server-pid "$scalepayload_PID" -echo-pid "$SCALE_ECHO_PID" \
    -payload "$size" -c 16 -d 6s -warmup 1s -repeat 3 -ops seal-open,seal-open@echo | tee -a "$out/scale.md"
done
kill "$SCALE_ECHO_PID" "$scalepayload_PID"
echo "uptime at the end: $(uptime)" | tee -a "$out/scale.md"
[ "${ONLY:-}" = scale ] && { echo "results in $out"; exit 0; }
fi

# --- The TypeScript client beside the Go client ---------------------------
# ONLY=typescript scripts/bench.sh runs this section alone (about 5 minutes).
# The TypeScript client (examples/typescript/load.ts) beside the Go client
# (sealer-load) on one sealer, and beside Node's floor (floor.ts: the same
# pairs with the same libraries, none of the client's work) on that sealer
# and on an echo (bench/sealer-echo), where the sealer's cost is out of it.
if [ "${SKIP:-}" != typescript ] && { [ -z "${ONLY:-}" ] || [ "${ONLY:-}" = typescript ]; }; then
ensure_node >/dev/null
step "TypeScript client (examples/typescript/load.ts) beside the Go client (sealer-load) and Node's floor: Seal+Open pairs/s at 16 callers, gRPC and REST, one sealer and one echo"
start_sealer ts
start_echo ts
echo "uptime at the start: $(uptime)" | tee "$out/typescript.md"
"$load" -targets "$ts_GRPC" -http-targets "$ts_HTTP" -c 16 -d 8s -warmup 2s -repeat 3 -ops seal-open,rest-seal-open | tee -a "$out/typescript.md"
# The Go client's pairs/s (a row's third column), for the TypeScript client's share of it.
go_rate() { awk -F' *[|] *' -v call="$1" '$2 == call { print $4 }' "$out/typescript.md"; }
"$SEALER_TEST_NODE_BIN/node" --experimental-strip-types --no-warnings examples/typescript/load.ts \
  --grpc "$ts_GRPC" --rest "$ts_HTTP" --echo-grpc "$ts_echo_GRPC" --echo-http "$ts_echo_HTTP" \
  --go-grpc "$(go_rate 'Seal+Open (1024 B)')" --go-rest "$(go_rate 'REST Seal+Open, params (1024 B)')" \
  -c 16 -d 8s --warmup 2s --repeat 3 | tee -a "$out/typescript.md"
kill "$ts_echo_PID" "$ts_PID"
echo "uptime at the end: $(uptime)" | tee -a "$out/typescript.md"
[ "${ONLY:-}" = typescript ] && { echo "results in $out"; exit 0; }
fi

# --- The Python client beside the Go client -------------------------------
# ONLY=python scripts/bench.sh runs this section alone (about 6 minutes);
# SKIP=python leaves it out. The Python client (clients/python/bench/load.py,
# one asyncio process) beside the Go client (sealer-load) on one sealer, and
# beside Python's floor (the same pairs through the client's libraries,
# grpc.aio and its stubs, httpx, none of the client's work) on that sealer
# and on an echo (bench/sealer-echo), where the sealer's cost is out of it.
if [ "${SKIP:-}" != python ] && { [ -z "${ONLY:-}" ] || [ "${ONLY:-}" = python ]; }; then
ensure_python >/dev/null
step "Python client (clients/python/bench/load.py) beside the Go client (sealer-load) and Python's floor: Seal+Open pairs/s at 16 tasks, gRPC and REST, one sealer and one echo"
start_sealer py
start_echo py
echo "uptime at the start: $(uptime)" | tee "$out/python.md"
"$load" -targets "$py_GRPC" -http-targets "$py_HTTP" -c 16 -d 8s -warmup 2s -repeat 3 -ops seal-open,rest-seal-open | tee -a "$out/python.md"
# The Go client's pairs/s (a row's third column), for the Python client's share of it.
py_go_rate() { awk -F' *[|] *' -v call="$1" '$2 == call { print $4 }' "$out/python.md"; }
PYTHONPATH=clients/python/src "$SEALER_TEST_PYTHON" clients/python/bench/load.py \
  --grpc "$py_GRPC" --rest "$py_HTTP" --echo-grpc "$py_echo_GRPC" --echo-rest "$py_echo_HTTP" \
  --go-grpc "$(py_go_rate 'Seal+Open (1024 B)')" --go-rest "$(py_go_rate 'REST Seal+Open, params (1024 B)')" \
  -c 16 --duration 8 --warmup 2 --repeat 3 | tee -a "$out/python.md"
kill "$py_echo_PID" "$py_PID"
echo "uptime at the end: $(uptime)" | tee -a "$out/python.md"
[ "${ONLY:-}" = python ] && { echo "results in $out"; exit 0; }
fi

# --- The Java client beside the Go client ---------------------------------
# ONLY=java scripts/bench.sh runs this section alone (about 10 minutes);
# SKIP=java leaves it out. The Java client (examples/java's example.Load:
# platform threads calling one blocking SealerClient) beside the Go client
# (sealer-load) on one sealer, and beside its own floor: the same calls to
# an echo (bench/sealer-echo), where the sealer's cost is out of it. 1 and
# 16 callers, gRPC and REST, a JVM of its own for each level; the CPU time
# the sealer and the echo spend per pair beside the JVM's.
if [ "${SKIP:-}" != java ] && { [ -z "${ONLY:-}" ] || [ "${ONLY:-}" = java ]; }; then
step "Java client: clients/java installed into the local Maven repository, examples/java packaged"
java -version 2>&1 | head -1
clients/java/scripts/mvn -q -f clients/java/pom.xml install -DskipTests -Dmaven.javadoc.skip=true
clients/java/scripts/mvn -q -f examples/java/pom.xml package -DskipTests
step "Java client (examples/java example.Load) beside the Go client (sealer-load) and its floor (the echo): Seal+Open pairs/s at 1 and 16 callers, gRPC and REST"
start_sealer java
start_echo java
echo "uptime at the start: $(uptime)" | tee "$out/java.md"
"$load" -targets "$java_GRPC" -http-targets "$java_HTTP" -echo-grpc "$java_echo_GRPC" -echo-http "$java_echo_HTTP" \
  -server-pid "$java_PID" -echo-pid "$java_echo_PID" -c 1,16 -d 8s -warmup 2s -repeat 3 \
  -ops seal-open,seal-open@echo,rest-seal-open,rest-seal-open@echo | tee -a "$out/java.md"
# The Go client's pairs/s at a concurrency (a row's third column), for the Java client's share of it.
java_go_rate() { awk -F' *[|] *' -v call="$1" -v c="$2" '$2 == call && $3 == c { print $4 }' "$out/java.md"; }
for c in 1 16; do
  java -cp 'examples/java/target/classes:examples/java/target/lib/*' example.Load \
    --grpc "$java_GRPC" --rest "$java_HTTP" --echo-grpc "$java_echo_GRPC" --echo-http "$java_echo_HTTP" \
    --server-pid "$java_PID" --echo-pid "$java_echo_PID" \
    --go-grpc "$(java_go_rate 'Seal+Open (1024 B)' "$c")" --go-rest "$(java_go_rate 'REST Seal+Open, params (1024 B)' "$c")" \
    -c "$c" -d 8s --warmup 2s --repeat 3 2>&1 | tee -a "$out/java.md"
done
kill "$java_echo_PID" "$java_PID"
echo "uptime at the end: $(uptime)" | tee -a "$out/java.md"
[ "${ONLY:-}" = java ] && { echo "results in $out"; exit 0; }
fi

# --- Flows: what a flow costs (issue 23) ----------------------------------
# Seal+Open pairs over gRPC through the Go client (the request's digest),
# one sealer with the embedded ledger: plain states beside round 1 of a flow
# asking one input key (the Open answering it), round 2 continuing an opened
# round, and a latest-only flow (the Open advances the flow in the ledger)
# beside a one-time state (the Open consumes it there). The ops take turns,
# 7 short runs each (a shared machine moves one run by more than what is
# measured), the median reported, then each flow op's share of its
# reference. ONLY=flows scripts/bench.sh runs this section alone (about 9
# minutes); SKIP=flows leaves it out.
if [ "${SKIP:-}" != flows ] && { [ -z "${ONLY:-}" ] || [ "${ONLY:-}" = flows ]; }; then
step "flows: Seal+Open pairs/s, plain states beside flow rounds, latest-only flows beside one-time states (gRPC, digest, embedded ledger)"
start_sealer flows
{ echo "load before: $(uptime)"; echo; } | tee "$out/flows.md"
"$load" -targets "$flows_GRPC" -server-pid "$flows_PID" -c 16,64 -d 5s -warmup 1s -repeat 7 \
  -ops flow-off,flow-round1,flow-next,flow-latest,flow-onetime | tee -a "$out/flows.md"
{ echo; echo "load after: $(uptime)"; } | tee -a "$out/flows.md"
kill "$flows_PID"
# The same pairs in process, through the gate without the transport
# (BenchmarkFlows_SealOpen), 5 runs taking turns: the CPU time the process
# spent per pair, which a busy machine disturbs less than the wall clock.
step "flows in process: Seal+Open through the gate, CPU time per pair (5 runs taking turns, medians)"
go test -c -o "$out/bin/server.test" ./server/
for _ in 1 2 3 4 5; do
  for b in plain flow_round_1 flow_round_2 latest-only_flow_round_1 one-time; do
    n=20000x; case $b in latest-only*|one-time) n=400x ;; esac
    "$out/bin/server.test" -test.run XXX -test.bench "BenchmarkFlows_SealOpen/^$b\$" -test.benchtime "$n"
  done
done | grep '^Benchmark' | tee "$out/flows-inprocess.txt"
awk '/^Benchmark/ { for (i = 2; i < NF; i++) if ($(i+1) == "cpu-ns/op") print $1, $i }' "$out/flows-inprocess.txt" |
  sort -k1,1 -k2,2n | awk '{ v[$1] = v[$1] " " $2; n[$1]++ }
    END { for (k in v) { split(v[k], a, " "); printf "%s: median %s cpu-ns/op of %d runs\n", k, a[int((n[k] + 1) / 2)], n[k] } }' |
  sort | tee -a "$out/flows-inprocess.txt"
[ "${ONLY:-}" = flows ] && { echo "results in $out"; exit 0; }
fi
# --- end of the flows section ----------------------------------------------

# --- 0. The core in process -----------------------------------------------
if [ "${SKIP:-}" != side-by-side ]; then
step "core: Seal and Open in process (go test -bench, 3 runs)"
go test ./sealer/ -run XXX -bench . -benchtime 1s -count 3 | tee "$out/core.txt"
go test ./server/ -run XXX -bench BindingDigest -benchtime 1s -count 3 | tee -a "$out/core.txt"
fi

# --- Vault, keys and Redis -------------------------------------------------
VAULT_PORT=$(free_port)
export VAULT_ADDR="http://127.0.0.1:$VAULT_PORT" VAULT_TOKEN="bench-root-$RANDOM$RANDOM"
VAULT_DISABLE_MLOCK=true HOME="$out" "$SEALER_TEST_VAULT" server -dev -dev-root-token-id="$VAULT_TOKEN" \
  -dev-listen-address="127.0.0.1:$VAULT_PORT" -dev-no-store-token -log-level=warn >"$out/vault.log" 2>&1 &
VAULT_PID=$!
pids+=("$VAULT_PID")
vault() { "$SEALER_TEST_VAULT" "$@"; }
for _ in $(seq 100); do vault status >/dev/null 2>&1 && break; sleep 0.2; done
vault secrets enable transit >/dev/null
vault write -f transit/keys/bench type=aes256-gcm96 >/dev/null
vault write transit/keys/sealer type=aes256-gcm96 >/dev/null # non-exportable: --keys vault-transit derives through hmac
sleep 1 # let the first version be older than the activation delay below

REDIS_PORT=$(free_port)
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$out" --save "" --appendonly yes --appendfsync always \
  --daemonize no --logfile "$out/redis.log" &
REDIS_PID=$!
pids+=("$REDIS_PID")
until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.1; done
vault_keys=(--keys vault-transit --vault-transit-key sealer --key-poll 1s --key-activation 3s)

# --- 1. Side by side: sealer, its echo floors, Vault Transit ---------------
# Each path beside its floor, the same API doing no work (bench/sealer-echo):
# a gRPC sealer.v1.Sealer answering prebuilt responses, and a net/http
# server decoding the same JSON with encoding/json. Ops take turns, 3 runs
# each, the median reported; the second table is each path's share of its
# floor, with the CPU time the sealer and the echo spent per pair.
step "side by side: Seal+Open over gRPC and REST beside their echo floors, Vault Transit, health Check (plaintext)"
start_sealer plain "${vault_keys[@]}"
if [ "${SKIP:-}" != side-by-side ]; then
ECHO_GRPC=127.0.0.1:$(free_port) ECHO_HTTP=127.0.0.1:$(free_port)
"$out/bin/sealer-echo" -grpc-addr "$ECHO_GRPC" -http-addr "$ECHO_HTTP" 2>"$out/echo.log" &
ECHO_PID=$!
pids+=("$ECHO_PID")
until grep -q listening "$out/echo.log"; do sleep 0.1; done
"$load" -targets "$plain_GRPC" -http-targets "$plain_HTTP" -echo-grpc "$ECHO_GRPC" -echo-http "$ECHO_HTTP" \
  -server-pid "$plain_PID" -echo-pid "$ECHO_PID" -c 1,16,64 -d 8s -warmup 2s -repeat 3 \
  -ops seal-open,seal-open@echo,seal-open-params,seal-open-params@echo,rest-seal-open,rest-seal-open@echo,vault-transit,health |
  tee "$out/side-by-side.md"
kill "$ECHO_PID"
fi
[ "${ONLY:-}" = side-by-side ] && { echo "results in $out"; exit 0; }

# --- 1c. sealer-proxy in front of an unchanged MCP server ------------------
# An MCP round trip (tools/call, input_required with a state, the retry with
# the state, complete) through sealer-proxy beside the same round trip sent
# to the naive MCP server directly: what the sidecar adds (one Seal and one
# Open, two more HTTP hops). Alone: SKIP=side-by-side ONLY=proxy scripts/bench.sh
step "sealer-proxy: MCP round trips through the proxy beside the same direct to the MCP server"
proxy_beside_floor proxy "$plain_GRPC"
[ "${ONLY:-}" = proxy ] && { echo "results in $out"; exit 0; }

step "the same over TLS with a bearer token"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout "$out/tls-key.pem" -out "$out/tls.pem" 2>/dev/null
token="bench-token-$RANDOM$RANDOM"
printf 'tenants:\n  bench:\n    tokens: ["sha256:%s"]\n' "$(printf %s "$token" | sha256sum | cut -d' ' -f1)" >"$out/tenants.yaml"
start_sealer tls "${vault_keys[@]}" --tls-cert "$out/tls.pem" --tls-key "$out/tls-key.pem" --tenants "$out/tenants.yaml"
"$load" -targets "$tls_GRPC" -tls-ca "$out/tls.pem" -token "$token" -c 1,16,64 -d 8s -warmup 2s -repeat 3 -ops seal-open,health | tee "$out/tls.md"
kill "$tls_PID"

# --- 1b. One-time opens (Redis ledger) beside ordinary opens --------------
step "one-time Open with the Redis ledger (AOF, fsync always) beside ordinary Open"
start_sealer onetimeredis "${vault_keys[@]}" --ledger "redis://127.0.0.1:$REDIS_PORT/0"
"$load" -targets "$onetimeredis_GRPC" -c 1,16,64 -d 8s -warmup 2s -repeat 3 -ops open,open-onetime -pool-rate 40000 |
  tee "$out/onetime.md"
kill "$onetimeredis_PID"
redis-cli -p "$REDIS_PORT" flushall >/dev/null

# --- 2. Rotation under load ------------------------------------------------
step "rotation: 5 Transit rotations during 60 s across 3 replicas"
for r in r1 r2 r3; do start_sealer "$r" "${vault_keys[@]}" --ledger "redis://127.0.0.1:$REDIS_PORT/0"; done
fleet="$r1_GRPC,$r2_GRPC,$r3_GRPC"
( for _ in 1 2 3 4 5; do sleep 10; vault write -f transit/keys/sealer/rotate >/dev/null; done ) &
"$load" -targets "$fleet" -c 16 -d 60s -warmup 2s -ops seal-open -timeline "$out/rotation.csv" | tee "$out/rotation.md"
wait $!
for r in r1 r2 r3; do h="${r}_HTTP"; echo "$r sealing version $(metric "${!h}" sealer_key_sealing_version), versions $(metric "${!h}" sealer_key_versions)"; done | tee -a "$out/rotation.md"

# --- 3. Faults under load --------------------------------------------------
step "faults: Vault stopped (SIGSTOP) for 30 s in a 60 s run"
( sleep 15; kill -STOP "$VAULT_PID"; sleep 25;
  echo "during the outage: refresh age $(metric "$r1_HTTP" sealer_key_refresh_age_seconds) s, refresh errors $(metric "$r1_HTTP" sealer_key_refresh_errors_total)" >"$out/vault-outage-metrics.txt";
  sleep 5; kill -CONT "$VAULT_PID" ) &
"$load" -targets "$fleet" -c 16 -d 60s -warmup 2s -ops seal-open -timeline "$out/vault-outage.csv" | tee "$out/vault-outage.md"
wait $!
cat "$out/vault-outage-metrics.txt" | tee -a "$out/vault-outage.md"

step "faults: Redis stopped for 15 s in a 40 s run; one-time and ordinary traffic side by side"
( sleep 12; redis-cli -p "$REDIS_PORT" shutdown >/dev/null 2>&1 || true; sleep 15;
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$out" --save "" --appendonly yes --appendfsync always \
    --daemonize yes --pidfile "$out/redis.pid" --logfile "$out/redis.log" ) &
restart=$!
"$load" -targets "$fleet" -c 8 -d 40s -warmup 2s -ops seal-open -one-time -timeline "$out/redis-outage-onetime.csv" >"$out/redis-outage-onetime.md" &
onetime=$!
"$load" -targets "$fleet" -c 8 -d 40s -warmup 2s -ops seal-open -timeline "$out/redis-outage-ordinary.csv" | tee "$out/redis-outage.md"
wait "$onetime" "$restart"
tail -n 1 "$out/redis-outage-onetime.md" | tee -a "$out/redis-outage.md"
pids+=("$(cat "$out/redis.pid")")

step "faults: one replica killed with SIGKILL, the client retries on another"
( sleep 12; kill -KILL "$r2_PID" ) &
"$load" -targets "$fleet" -retry -c 16 -d 30s -warmup 2s -ops seal-open -timeline "$out/sigkill.csv" | tee "$out/sigkill.md"
wait $!

# --- 4. Overload -----------------------------------------------------------
step "overload: 4x capacity offered, then back to normal"
# overload NAME TARGET FLAGS...: capacity closed-loop (64 callers), 4x that
# offered open-loop (at most 1,024 calls in flight in the generator), then 64
# callers again. Sets capacity, which the soak below halves.
overload() {
  local name=$1 target=$2; shift 2
  capacity=$("$load" -targets "$target" -c 64 -d 10s -warmup 2s -ops seal-open "$@" | tee "$out/$name.md" | awk -F'|' '/Seal/ { gsub(/ /, "", $4); print $4 }')
  "$load" -targets "$target" -rate $((capacity * 4)) -c 1024 -conns 16 -d 10s -warmup 1s -ops seal-open "$@" | tail -n 1 | tee -a "$out/$name.md"
  "$load" -targets "$target" -c 64 -d 10s -warmup 1s -ops seal-open "$@" | tail -n 1 | tee -a "$out/$name.md"
}
overload overload "$plain_GRPC"
# One-time opens wait for the ledger's fsync, so calls pile up in the sealer
# itself, which is what --max-in-flight (default 512) is for.
start_sealer onetime "${vault_keys[@]}"
overload overload-onetime "$onetime_GRPC" -one-time
kill "$onetime_PID"

# --- 5. Soak ---------------------------------------------------------------
step "soak: $SOAK at half capacity, one-time states with a 30 s TTL"
start_sealer soak "${vault_keys[@]}" --ledger "redis://127.0.0.1:$REDIS_PORT/0" --default-ttl 30s
redis-cli -p "$REDIS_PORT" flushall >/dev/null
( echo "second,rss_mib,goroutines,ledger_entries"
  start=$(date +%s)
  while kill -0 "$soak_PID" 2>/dev/null; do
    rss=$(metric "$soak_HTTP" process_resident_memory_bytes)
    gor=$(metric "$soak_HTTP" go_goroutines)
    [ -n "$rss" ] && echo "$(( $(date +%s) - start )),$(awk -v b="$rss" 'BEGIN { printf "%.1f", b / 1048576 }'),$gor,$(redis-cli -p "$REDIS_PORT" dbsize)"
    sleep 10
  done ) >"$out/soak.csv" &
sampler=$!
"$load" -targets "$soak_GRPC" -rate $((capacity / 2)) -c 256 -d "$SOAK" -warmup 0s -ops seal-open -one-time | tee "$out/soak.md"
kill "$soak_PID"; wait "$sampler" 2>/dev/null || true
gnuplot <<PLOT
set terminal png size 1000,600 noenhanced
set output "$out/soak.png"
set datafile separator ","
set key autotitle columnhead
set xlabel "seconds"
set ylabel "RSS (MiB), goroutines"
set y2label "ledger entries (Redis keys)"
set y2tics
plot "$out/soak.csv" using 1:2 with lines lw 2, "" using 1:3 with lines lw 2, "" using 1:4 axes x1y2 with lines lw 2
PLOT
echo "results in $out"
