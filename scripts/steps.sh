# Sourced by scripts/lib.sh: the steps of scripts/test.sh and
# scripts/bench.sh, each timed, and the jobs (builds and tests) that run in
# the background while the steps go on.

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
# after checking that no background job has failed (bg_check). Each step's
# line of the closing table (steps_exit): its wall time and the CPU time of
# its own processes.
step_rows=() step_name=""
step() {
  step_end
  bg_check
  step_name=$* step_t0=$(now_cs) step_c0=$(cpu_cs)
  printf '\n== %s\n' "$*"
}
step_end() {
  [ -n "$step_name" ] || return 0
  bg_cpu_ended
  local wall cpu
  wall=$(fmt_cs $(( $(now_cs) - step_t0 ))) cpu=$(fmt_cs $(( $(cpu_cs) - step_c0 - bg_cpu )))
  step_rows+=("$(printf '%8s %8s  %s' "$wall" "$cpu" "${step_name:0:100}")")
  printf -- '-- %s wall, %s CPU\n' "$wall" "$cpu"
  step_name=""
}

# start_build NAME FUNCTION [ARGS...] runs the function in the background,
# in a process group of its own, its output into NAME.log; when it ends,
# NAME.done holds its exit status, wall time and CPU time.
# wait_build NAME [all], in the step that needs the job, waits for it (at
# once if it was never started), then prints the last lines of its log, or
# with all, the whole log. after NAME FUNCTION [ARGS...], as a job, waits
# for the job NAME, then runs the function: it chains jobs, so that fewer
# run at once on the 2 cores.
# A job that fails fails the run, with its log: at wait_build, or at the
# next step if that comes first; a job chained after it does not start.
bg_dir="" bg_names=()
declare -A bg_pid=() bg_t0=() bg_waited=() bg_counted=()
start_build() {
  local name=$1
  shift
  [ -n "$bg_dir" ] || bg_dir=$(mktemp -d "${TMPDIR:-/tmp}/sealer-test-builds.XXXXXX")
  bg_t0[$name]=$(now_cs)
  set -m # a process group of its own, so that steps_exit ends the whole job
  (
    set +e
    me=$BASHPID
    (set -e; "$@")
    rc=$?
    # Written whole, then renamed: after reads it as soon as it exists.
    echo "$rc $(( $(now_cs) - bg_t0[$name] )) $(cpu_cs "$me")" >"$bg_dir/$name.tmp"
    mv "$bg_dir/$name.tmp" "$bg_dir/$name.done"
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
    echo "the background job $name failed (exit status $rc); its log ($bg_dir/$name.log):" >&2
    cat "$bg_dir/$name.log" >&2
    exit 1
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

# after polls: a job is no child of another job, which cannot wait for it.
after() {
  local rc
  until [ -e "$bg_dir/$1.done" ]; do sleep 1; done
  read -r rc _ <"$bg_dir/$1.done"
  [ "$rc" = 0 ] || { echo "not started: $1, which this job comes after, failed ($rc)" >&2; return 1; }
  shift
  "$@"
}

bg_check() {
  local name rc
  for name in "${bg_names[@]}"; do
    [ -z "${bg_waited[$name]:-}" ] && [ -e "$bg_dir/$name.done" ] || continue
    read -r rc _ <"$bg_dir/$name.done"
    [ "$rc" = 0 ] || wait_build "$name"
  done
}

# bg_cpu_ended sets bg_cpu to the CPU time of the jobs that have ended
# since it was last called: this script's CPU time counts a job from its end
# on (it reaps it), a step's must not.
bg_cpu_ended() {
  local name rc wall cpu
  bg_cpu=0
  for name in "${bg_names[@]}"; do
    [ -z "${bg_counted[$name]:-}" ] && [ -e "$bg_dir/$name.done" ] || continue
    read -r rc wall cpu <"$bg_dir/$name.done"
    bg_counted[$name]=1 bg_cpu=$(( bg_cpu + cpu ))
  done
}

# steps_exit, the exit trap of scripts/test.sh: ends the jobs still
# running (first, so that none outlives a run whose output is gone), prints
# the table of steps and jobs, and removes the jobs' logs after a run that
# passed.
steps_exit() {
  local rc=$? name jrc wall cpu
  set +e
  for name in "${bg_names[@]}"; do
    [ -e "$bg_dir/$name.done" ] || kill -- "-${bg_pid[$name]}" 2>/dev/null
  done
  step_end
  printf '\n== step times (wall; CPU of the step'"'"'s own processes)\n%8s %8s  step\n' wall CPU
  printf '%s\n' "${step_rows[@]}"
  [ ${#bg_names[@]} = 0 ] || printf '\n== background jobs (started at; wall; CPU; how long the steps waited)\n%8s %8s %8s %8s  job\n' start wall CPU waited
  for name in "${bg_names[@]}"; do
    if [ -e "$bg_dir/$name.done" ]; then
      read -r jrc wall cpu <"$bg_dir/$name.done"
    else
      jrc=stopped wall=$(( $(now_cs) - bg_t0[$name] )) cpu=0
    fi
    printf '%8s %8s %8s %8s  %s\n' "$(fmt_cs $(( bg_t0[$name] - script_t0 )))" "$(fmt_cs "$wall")" \
      "$(fmt_cs "$cpu")" "$(fmt_cs "${bg_waited[$name]:-0}")" "$name$([ "$jrc" = 0 ] || echo " ($jrc)")"
  done
  printf '\n%8s %8s  total (CPU: every process of the run, the background jobs included)\n' \
    "$(fmt_cs $(( $(now_cs) - script_t0 )))" "$(fmt_cs "$(cpu_cs)")"
  [ "$rc" != 0 ] || [ -z "$bg_dir" ] || rm -rf "$bg_dir"
  return "$rc"
}
