# Sourced by scripts/lib.sh: the steps of scripts/test.sh and
# scripts/bench.sh, each timed, and the builds that run in the background
# while the steps that need none of them go on.

# now_cs is the wall clock in centiseconds. cpu_cs [PID] is the CPU time,
# in centiseconds, of the shell PID (default: this script) and of the
# processes it has reaped (Linux /proc). fmt_cs prints centiseconds as
# minutes and seconds: 3m07s.
now_cs() { local t=${EPOCHREALTIME/./}; echo $(( 10#${t:0:-4} )); }
clk_tck=$(getconf CLK_TCK)
cpu_cs() {
  local stat f
  read -r stat <"/proc/${1:-$$}/stat"
  read -r -a f <<<"${stat##*) }"
  echo $(( (f[11] + f[12] + f[13] + f[14]) * 100 / clk_tck ))
}
fmt_cs() { printf '%dm%02ds' $(( $1 / 6000 )) $(( $1 / 100 % 60 )); }
script_t0=$(now_cs)

# step starts a step of the output and ends the one before it (step_end),
# after checking that no background job has failed (bg_check).
# step_table prints all steps: wall time, and the CPU time of the step's own
# processes (the background jobs apart: they have their own lines).
step_names=() step_walls=() step_cpus=()
step_name="" step_t0=0 step_c0=0
step() {
  step_end
  bg_check
  step_name=$*
  step_t0=$(now_cs) step_c0=$(cpu_cs)
  printf '\n== %s\n' "$*"
}

step_end() {
  [ -n "$step_name" ] || return 0
  local wall cpu
  bg_cpu_done
  wall=$(( $(now_cs) - step_t0 ))
  cpu=$(( $(cpu_cs) - step_c0 - bg_cpu_new ))
  step_names+=("$step_name") step_walls+=("$wall") step_cpus+=("$cpu")
  printf -- '-- %s wall, %s CPU\n' "$(fmt_cs "$wall")" "$(fmt_cs "$cpu")"
  step_name=""
}

step_table() {
  step_end
  local i name
  printf '\n== step times (wall; CPU of the step'"'"'s own processes)\n'
  printf '%8s %8s  %s\n' wall CPU step
  for i in "${!step_names[@]}"; do
    name=${step_names[$i]}
    [ ${#name} -le 100 ] || name="${name:0:97}..."
    printf '%8s %8s  %s\n' "$(fmt_cs "${step_walls[$i]}")" "$(fmt_cs "${step_cpus[$i]}")" "$name"
  done
  bg_table
  printf '%8s %8s  %s\n' "$(fmt_cs $(( $(now_cs) - script_t0 )))" "$(fmt_cs "$(cpu_cs)")" \
    "total (CPU: every process of the run, the background jobs included)"
}

# Background builds (and tests). start_build NAME FUNCTION [ARGS...] runs
# the function in the background, in a process group of its own, its output
# into a log file; wait_build NAME [all] waits for it in the step that needs
# it (at once if it was never started), then prints the last lines of its
# log, or with all, the whole log.
# A build that fails fails the run, with its log: at wait_build, or at the
# next step if that comes first (bg_check). bg_stop, at exit, ends the
# builds still running. bg_table lists each build: when it started, its wall
# and CPU time, and how long the steps waited for it.
bg_dir="" bg_names=()
declare -A bg_pid=() bg_t0=() bg_waited=() bg_counted=()
start_build() {
  local name=$1
  shift
  [ -n "$bg_dir" ] || bg_dir=$(mktemp -d "${TMPDIR:-/tmp}/sealer-test-builds.XXXXXX")
  bg_t0[$name]=$(now_cs)
  set -m # a process group of its own, so that bg_stop ends the whole build
  (
    set +e
    me=$BASHPID t0=$(now_cs)
    (set -e; "$@")
    rc=$?
    # Written whole, then renamed: after reads it as soon as it exists.
    echo "$rc $(( $(now_cs) - t0 )) $(cpu_cs "$me")" >"$bg_dir/$name.done.tmp"
    mv "$bg_dir/$name.done.tmp" "$bg_dir/$name.done"
    exit "$rc"
  ) </dev/null >"$bg_dir/$name.log" 2>&1 &
  bg_pid[$name]=$!
  set +m
  bg_names+=("$name")
  echo "$name: started in the background (log: $bg_dir/$name.log)"
}

wait_build() {
  local name=$1 t0 rc=0 wall cpu
  [ -n "${bg_pid[$name]:-}" ] || return 0 # not started: the quick tier
  t0=$(now_cs)
  wait "${bg_pid[$name]}" || rc=$?
  bg_waited[$name]=$(( $(now_cs) - t0 ))
  if [ "$rc" != 0 ]; then
    bg_failed "$name" "$rc"
  fi
  read -r rc wall cpu <"$bg_dir/$name.done"
  if [ "${2:-}" = all ]; then
    cat "$bg_dir/$name.log"
  else
    tail -n 5 "$bg_dir/$name.log" | sed 's/^/   | /'
  fi
  printf -- '-- %s: done in the background in %s (%s CPU); waited %s for it\n' \
    "$name" "$(fmt_cs "$wall")" "$(fmt_cs "$cpu")" "$(fmt_cs "${bg_waited[$name]}")"
}

# after NAME FUNCTION [ARGS...], in a background build, waits until the
# build NAME has ended, then runs the function; it fails if NAME failed.
# It chains builds, so that fewer run at once on the 2 cores.
after() {
  local name=$1 rc
  shift
  until [ -e "$bg_dir/$name.done" ]; do sleep 1; done
  read -r rc _ <"$bg_dir/$name.done"
  if [ "$rc" != 0 ]; then
    echo "not started: $name, which this build comes after, failed" >&2
    return 1
  fi
  "$@"
}

bg_failed() {
  local name=$1 rc=$2
  echo "the background job $name failed (exit status $rc); its log ($bg_dir/$name.log):" >&2
  cat "$bg_dir/$name.log" >&2
  exit 1
}

bg_check() {
  local name rc
  for name in "${bg_names[@]}"; do
    [ -z "${bg_waited[$name]:-}" ] && [ -e "$bg_dir/$name.done" ] || continue
    read -r rc _ <"$bg_dir/$name.done"
    [ "$rc" = 0 ] || wait_build "$name"
  done
}

# bg_cpu_done sets bg_cpu_new to the CPU time of the builds that ended
# since it was last called: this script's CPU time counts them from their
# end on, the step's must not.
bg_cpu_new=0
bg_cpu_done() {
  local name rc wall cpu
  bg_cpu_new=0
  for name in "${bg_names[@]}"; do
    [ -z "${bg_counted[$name]:-}" ] && [ -e "$bg_dir/$name.done" ] || continue
    read -r rc wall cpu <"$bg_dir/$name.done"
    bg_counted[$name]=1
    bg_cpu_new=$(( bg_cpu_new + cpu ))
  done
}

bg_stop() {
  local name
  for name in "${bg_names[@]}"; do
    [ -n "${bg_waited[$name]:-}" ] || kill -- "-${bg_pid[$name]}" 2>/dev/null || true
  done
}

bg_table() {
  [ ${#bg_names[@]} -gt 0 ] || return 0
  local name rc wall cpu
  printf '\n== background builds and tests (started at; wall; CPU; how long the steps waited)\n'
  printf '%8s %8s %8s %8s  %s\n' start wall CPU waited build
  for name in "${bg_names[@]}"; do
    if [ -e "$bg_dir/$name.done" ]; then
      read -r rc wall cpu <"$bg_dir/$name.done"
    else
      rc=stopped wall=$(( $(now_cs) - bg_t0[$name] )) cpu=0
    fi
    printf '%8s %8s %8s %8s  %s\n' "$(fmt_cs $(( bg_t0[$name] - script_t0 )))" "$(fmt_cs "$wall")" \
      "$(fmt_cs "$cpu")" "$(fmt_cs "${bg_waited[$name]:-0}")" "$name$([ "$rc" = 0 ] || echo " ($rc)")"
  done
  echo
}

# steps_exit, the exit trap of scripts/test.sh: ends the builds still
# running, prints the table of steps, and removes the builds' logs after a
# run that passed.
steps_exit() {
  local rc=$?
  set +e
  bg_stop
  step_table
  [ "$rc" != 0 ] || [ -z "$bg_dir" ] || rm -rf "$bg_dir"
  return "$rc"
}
