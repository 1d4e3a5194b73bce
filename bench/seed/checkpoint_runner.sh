#!/bin/bash
###############################################################################
# CHECKPOINT RUNNER: run application w/ checkpoint + controlled stop
# Use with checkpoint_submitter.sh to re-submit as needed
###############################################################################
# User settings with defaults
###############################################################################
# APP_CMD : command to run (string) - must handle signal SIGTERM
# CHECKPOINT_EVERY : checkpoint after every this many application iterations
# CKPT_PATH : path to checkpoint file
# LAUNCH_MODE : run app command directly or via srun
# MAX_ITER : stop application after this many iterations total
# MODULE_LIST : modules loaded before running app command
# RUNNER_MARGIN_SEC: seconds before wall time to checkpoint (for timeout)
# RUNNER_TIME_LIMIT: wall time <= 24 hours (format as --time in man sbatch)
# SRUN_ARGS : arguments to srun, if needed
###############################################################################
# Edit settings below
# Or pass values via...
# sbatch --export=ALL,Var1=...,...,VarN=... checkpoint_submitter.sh
# Or pass values via...
# Var1=... VarN=... sbatch checkpoint_submitter.sh
###############################################################################
APP_CMD="${APP_CMD:-python3 checkpoint_signal_iter.py}"
CHECKPOINT_EVERY="${CHECKPOINT_EVERY:-20}"
CKPT_PATH="${CKPT_PATH:-state_iter.txt}"
LAUNCH_MODE="${LAUNCH_MODE:-direct}"
MAX_ITER="${MAX_ITER:-500}"
MODULE_LIST="${MODULE_LIST:-anaconda3/2023.07}"
RUNNER_MARGIN_SEC="${RUNNER_MARGIN_SEC:-60}"
RUNNER_TIME_LIMIT="${RUNNER_TIME_LIMIT:-00:03:00}"
SRUN_ARGS="${SRUN_ARGS:--n 1}"
###############################################################################
# Slurm directives (keep RUNNER_TIME_LIMIT <= 24 hours)
###############################################################################
#SBATCH --job-name=ckpt_runner_demo
#SBATCH --output=log_runner_%j.out
#SBATCH --error=log_runner_%j.err
#SBATCH --time=00:03:00
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=512M
#SBATCH --partition=debug
#SBATCH --qos=normal
###############################################################################
# Exit on error
###############################################################################
set -euo pipefail
###############################################################################
# Helpers
###############################################################################
shopt -s expand_aliases
alias dtstamp="date +%Y%m%d-%H:%M:%S"
info(){ echo "Info[$(dtstamp)]: $*"; }
get_ckpt_iter() {
    [[ -f "${CKPT_PATH}" ]] || { echo 0; return; }
    tr -cd '0-9' < "${CKPT_PATH}" 2>/dev/null || echo 0
}
to_seconds() {
    # Acceptable time formats include "minutes", "minutes:seconds", "hours:min- utes:seconds",
    # "days-hours", "days-hours:minutes" and "days-hours:minutes:seconds"
    local input="$1"
    # Handle days-hours format by replacing '-' with ':' to unify the delimiter
    # Then split components into an array
    IFS=':' read -r -a parts <<< "${input//-/:}"
    case ${#parts[@]} in
        1) # Format: minutes
            seconds=$((parts[0] * 60))
            ;;
        2) # Formats: minutes:seconds OR days-hours
            if [[ $input == *"-"* ]]; then
                seconds=$((parts[0] * 86400 + parts[1] * 3600))
            else
                seconds=$((parts[0] * 60 + parts[1]))
            fi
            ;;
        3) # Formats: hours:minutes:seconds OR days-hours:minutes
            if [[ $input == *"-"* ]]; then
                seconds=$((parts[0] * 86400 + parts[1] * 3600 + parts[2] * 60))
            else
                seconds=$((parts[0] * 3600 + parts[1] * 60 + parts[2]))
            fi
            ;;
        4) # Format: days-hours:minutes:seconds
            seconds=$((parts[0] * 86400 + parts[1] * 3600 + parts[2] * 60 + parts[3]))
            ;;
        *)
            echo "Unsupported format"
            exit 1
            ;;
    esac
    echo "$seconds"
}
###############################################################################
# Log settings
###############################################################################
info "Start on $(hostname); JOBID=${SLURM_JOB_ID:-unknown}"
info "Runner settings:"
info "APP_CMD=${APP_CMD}"
info "CHECKPOINT_EVERY=${CHECKPOINT_EVERY}"
info "CKPT_PATH=${CKPT_PATH}"
info "LAUNCH_MODE=${LAUNCH_MODE}"
info "MAX_ITER=${MAX_ITER}"
info "MODULE_LIST=${MODULE_LIST}"
info "RUNNER_MARGIN_SEC=${RUNNER_MARGIN_SEC}"
info "RUNNER_TIME_LIMIT=${RUNNER_TIME_LIMIT}"
info "SRUN_ARGS=${SRUN_ARGS}"
###############################################################################
# Load requested modules
###############################################################################
info "Loading modules."
module load "${MODULE_LIST}"
###############################################################################
# Timeout window
###############################################################################
TOTAL_SEC=$(to_seconds "${RUNNER_TIME_LIMIT}")
RUN_WINDOW_SEC=$(( TOTAL_SEC - RUNNER_MARGIN_SEC ))
if (( RUN_WINDOW_SEC <= 0 )); then
    info "WARNING: RUN_WINDOW_SEC <= 0; using 1s."
    RUN_WINDOW_SEC=1
fi
before_iter=$(get_ckpt_iter)
set +e
if [[ "${LAUNCH_MODE}" == "srun" ]]; then
    # timeout -> srun -> bash -lc "APP_CMD"
    # On expiry, timeout sends TERM to srun; srun forwards signals to its job step tasks.
    timeout "${RUN_WINDOW_SEC}s" srun ${SRUN_ARGS} bash -lc "${APP_CMD}"
else
    # direct mode: run in the batch shell
    timeout "${RUN_WINDOW_SEC}s" bash -lc "${APP_CMD}"
fi
rc=$?
set -e
info "Program exit code (from timeout wrapper): ${rc}"
###############################################################################
# Interpret exit-code from timeout
# 0 = completed all iterations (no further submissions necessary)
# 99 = app voluntarily checkpointed early -> submitter should continue
# 124 = timeout before walltime expiry -> checkpoint likely written -> continue
###############################################################################
if [[ ${rc} -eq 0 ]]; then
    info "Application finished all iterations."
    exit 0
elif [[ ${rc} -eq 99 ]]; then
    info "Application exited after writing checkpoint."
    exit 99
elif [[ ${rc} -eq 124 ]]; then
    after_iter=$(get_ckpt_iter)
    if (( after_iter > before_iter )); then
        info "Timeout + checkpoint advance detected (${before_iter}->${after_iter})."
        exit 124
    else
        info "Timeout but checkpoint did not advance. Marking failure."
        exit 1
    fi
else
    info "Unexpected exit code: ${rc}"
    exit "${rc}"
fi
