#!/usr/bin/env bash
# The stage allreduce through the Redis channel (issue 12 §3): FuncPipe's
# pipelined scatter-reduce against LambdaML's, for n workers and gradients
# of s bytes, each measured beside its formula (FuncPipe §3.3):
#   pipelined  2·s/w + (2 + n)·t_lat
#   lambdaml   3·s/w − 2·s/(n·w) + 4·t_lat
# with w and t_lat measured on the same channel. Each worker runs in a
# network namespace of its own whose one route is the store, its link
# shaped to RATE each way (a function's bandwidth; FuncPipe measured about
# 70 MB/s on AWS Lambda), like function workers. Needs root (ip, tc).
#
# The latency term is small here (a request's round trip through a veth
# pair is tens of µs; this kernel has no netem to add more).
#
#   bench/channel_bench.sh [workers="2 4 8"] [sizes_mb="1 10 100"]   (env: RATE=25 MB/s, ROUNDS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
[ "$(id -u)" -eq 0 ] || { echo "channel_bench: needs root (network namespaces, tc)" >&2; exit 77; }
bin=build/bench/channel_bench
[ -x "$bin" ] || cmake --build build --target channel_bench >/dev/null
workers=${1:-2 4 8}
sizes=${2:-1 10 100}
rate_mb=${RATE:-25}; rate_mb=${rate_mb%MB/s}
rounds=${ROUNDS:-2}
max_n=$(for n in $workers; do echo "$n"; done | sort -n | tail -1)
tag=hzcb$$
net=10.213.$(( $$ % 200 + 20 ))
work=$(mktemp -d)
redis_pid=""
cleanup() {
  [ -z "$redis_pid" ] || kill "$redis_pid" 2>/dev/null || true
  for k in $(seq 1 "$max_n"); do ip netns delete "$tag-$k" 2>/dev/null || true; done
  ip link delete "$tag" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

rate_bits=$(( rate_mb * 8 ))mbit
burst=$(( rate_mb * 1000000 / 100 )); [ "$burst" -ge 262144 ] || burst=262144
ip link add "$tag" type bridge
ip addr add "$net.1/24" dev "$tag"
ip link set "$tag" up
for k in $(seq 1 "$max_n"); do
  ns="$tag-$k"
  ip netns add "$ns"
  ip link add "${tag}v$k" type veth peer name eth0 netns "$ns"
  ip link set "${tag}v$k" master "$tag" up
  ip -n "$ns" addr add "$net.$(( 10 + k ))/32" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add "$net.1" dev eth0          # the store, and nothing else
  ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate_bits" burst "$burst" latency 200ms
  tc qdisc add dev "${tag}v$k" root tbf rate "$rate_bits" burst "$burst" latency 200ms
done

password=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$password" > "$work/pw"
port=$(( 20000 + $$ % 20000 ))
printf 'bind %s\nport %s\nrequirepass %s\nsave ""\nappendonly no\nmaxmemory-policy noeviction\ndir %s\n' \
  "$net.1" "$port" "$password" "$work" > "$work/redis.conf"
chmod 600 "$work/redis.conf"
redis-server "$work/redis.conf" >"$work/redis.log" 2>&1 &
redis_pid=$!
url="redis://$net.1:$port"
for _ in $(seq 100); do
  ip netns exec "$tag-1" "$bin" probe "$url" "$work/pw" probe 4 >/dev/null 2>&1 && break
  sleep 0.1
done

echo "Scatter-reduce through Redis: each worker's link shaped to $rate_mb MB/s each way, its one route the store"
ip netns exec "$tag-1" "$bin" probe "$url" "$work/pw" probe $(( 10 * 1000 * 1000 )) > "$work/probe.json"
"$py" - "$work/probe.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
print(f'measured on the channel: w = {p["up_bytes_per_s"] / 1e6:.1f} MB/s up, {p["down_bytes_per_s"] / 1e6:.1f} MB/s '
      f'down, t_lat = {p["latency_s"] * 1e3:.2f} ms (one request)')
PY
printf '%3s %7s | %9s %9s %6s | %9s %9s %6s | %s\n' n size pipelined formula ratio lambdaml formula ratio \
  "lambdaml/pipelined"
for n in $workers; do
  for mb in $sizes; do
    bytes=$(( mb * 1000 * 1000 ))
    for method in pipelined lambdaml; do
      pids=()
      for r in $(seq 0 $(( n - 1 ))); do
        ip netns exec "$tag-$(( r + 1 ))" "$bin" reduce "$url" "$work/pw" "b$n-$mb-$method" "$bytes" "$method" \
          "$r" "$n" "$rounds" > "$work/$method.$r.json" &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p"; done
    done
    "$py" - "$work" "$n" "$bytes" "$mb" <<'PY'
import json, sys, glob, statistics
work, n, s, mb = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
p = json.load(open(f"{work}/probe.json"))
w = (p["up_bytes_per_s"] + p["down_bytes_per_s"]) / 2
lat = p["latency_s"]
def measured(method):
    runs = [json.load(open(f"{work}/{method}.{r}.json"))["seconds"] for r in range(n)]
    return statistics.median(max(r[i] for r in runs) for i in range(len(runs[0])))
pipe, lam = measured("pipelined"), measured("lambdaml")
fp = 2 * s / w + (2 + n) * lat
fl = 3 * s / w - 2 * s / (n * w) + 4 * lat
print(f'{n:>3} {mb + " MB":>7} | {pipe:8.3f}s {fp:8.3f}s {pipe / fp:6.2f} | {lam:8.3f}s {fl:8.3f}s {lam / fl:6.2f} | '
      f'{lam / pipe:.2f}x (formulas {fl / fp:.2f}x)')
PY
  done
done
