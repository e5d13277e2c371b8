# chfs-job.sh — a CHFS pool for the length of one batch job (sourced by the job scripts here).
#
#   source "$CHFS_STACK_ROOT/examples/slurm/chfs-job.sh"
#   chfs_job_begin DEFAULT_ENV   # pool on every node of the job, access path $CHFS_JOB_ENV
#   ...                          # the job's work: CHFS_SERVER, CHFS_SECRET_FILE are set
#   chfs_job_run CMD ARG...      # run a step of the work (so a cancel is handled at once)
#   chfs_job_end                 # stop the pool, remove its storage and secret
#
# chfs_job_begin activates an environment of environments/ (mpiio, native, hook, fuse: the
# access path; $CHFS_JOB_ENV overrides the script's default), writes the job's hostfile (the
# job's nodes, `scontrol show hostnames`, as their NodeAddr), and starts the pool with
# `environments/stack up` on those hosts: one chfsd per node over tcp, storage in node-local
# /tmp/chfs-job-$SLURM_JOB_ID, a secret of this job only (~/.chfs/job-$SLURM_JOB_ID.secret,
# 0600), for fuse a chfuse mount on every node at /tmp/chfs-job-$SLURM_JOB_ID-mnt. It installs
# a trap, so the pool is stopped and everything removed when the script exits, fails, or is
# cancelled (scancel sends SIGTERM, then SIGKILL after KillWait). Bash runs a trap only when
# its foreground command ends, and mpiexec may take longer than KillWait to end: chfs_job_run
# runs a command in the background and waits for it, so the trap runs at once, stops the
# command and cleans up within KillWait (with mpiexec in the foreground, the test's cancelled
# job was SIGKILLed before its trap ran). What a SIGKILL leaves behind,
# the Slurm epilog (examples/slurm/epilog, Epilog= in slurm.conf) removes on each node.
#
# Settings (exported to sbatch, or set in the script before chfs_job_begin):
#   CHFS_JOB_ENV      access path: an environment name (default: the script's)
#   CHFS_JOB_OUT      results directory on the shared file system
#                     (default $SLURM_SUBMIT_DIR/chfs-job-$SLURM_JOB_ID)
#   CHFS_STACK_ROOT   the chfs-stack checkout (eval "$(ci/env)" sets it)

chfs_job_log() { echo "[$(date +%T)] chfs-job: $*" >&2; }   # stderr: stdout may be a step's output file
chfs_job_die() { echo "chfs-job: error: $*" >&2; exit 1; }

chfs_job_begin() {
  : "${SLURM_JOB_ID:?chfs-job: not inside a Slurm job (submit with sbatch)}"
  : "${CHFS_STACK_ROOT:?chfs-job: set CHFS_STACK_ROOT to the chfs-stack checkout}"
  local env=${CHFS_JOB_ENV:-$1} h addr
  CHFS_JOB_OUT=${CHFS_JOB_OUT:-${SLURM_SUBMIT_DIR:-$PWD}/chfs-job-$SLURM_JOB_ID}
  mkdir -p "$CHFS_JOB_OUT"
  # shellcheck disable=SC1091
  source "$CHFS_STACK_ROOT/environments/activate" "$env" || chfs_job_die "no environment $env"
  export CHFS_STACK_SCRATCH=/tmp/chfs-job-$SLURM_JOB_ID
  export CHFS_STACK_MOUNT=$CHFS_STACK_SCRATCH-mnt
  export CHFS_SECRET_FILE=$HOME/.chfs/job-$SLURM_JOB_ID.secret
  export CHFS_STACK_RUN=$CHFS_JOB_OUT/run
  export CHFS_STACK_HOSTFILE=$CHFS_JOB_OUT/hostfile
  : > "$CHFS_STACK_HOSTFILE"
  for h in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
    addr=$(scontrol show node -o "$h" | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
    echo "${addr:-$h}" >> "$CHFS_STACK_HOSTFILE"
  done
  trap chfs_job_end EXIT
  trap 'chfs_job_log "signal received: cleaning up"
    [ -n "${_chfs_job_child:-}" ] && kill -TERM "$_chfs_job_child" 2>/dev/null; exit 143' TERM INT HUP
  _chfs_job_up=1
  local out
  out=$("$CHFS_STACK_ROOT/environments/stack" up "$env") || chfs_job_die "the pool did not start"
  eval "$out"
  chfs_job_log "pool up ($env) on $(paste -sd' ' "$CHFS_STACK_HOSTFILE"): $CHFS_SERVER"
}

chfs_job_run() {
  local rc=0
  "$@" &
  _chfs_job_child=$!
  wait "$_chfs_job_child" || rc=$?
  _chfs_job_child=
  return "$rc"
}

chfs_job_end() {
  local rc=$?
  [ -n "${_chfs_job_up:-}" ] || return "$rc"
  _chfs_job_up=
  trap - EXIT TERM INT HUP
  if [ "$CHFS_STACK_ENV" = fuse ]; then   # unmount chfuse on every node
    "$CHFS_STACK_ROOT/environments/stack" down fuse >/dev/null 2>&1 || true
  fi
  rm -rf "$CHFS_STACK_RUN"
  chfsctl -h "$CHFS_STACK_HOSTFILE" -c "$CHFS_STACK_SCRATCH" -k "$CHFS_SECRET_FILE" clean \
    >/dev/null 2>&1 || true
  rm -f "$CHFS_SECRET_FILE"
  chfs_job_log "pool stopped and removed (exit $rc)"
  return "$rc"
}
