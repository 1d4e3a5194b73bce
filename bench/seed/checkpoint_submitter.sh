#!/bin/bash
###############################################################################
# CHECKPOINT SUBMITTER: self-restarting to re-submit runner
# Controls repeated submissions of checkpoint_runner.sh
###############################################################################
# User settings with defaults
###############################################################################
# CKPT_PATH : path to checkpoint file
# MAX_ITER : stop application after this many iterations total
# RUNNER_SCRIPT : job script with checkpoint before end of time limit
# SUBMITTER_MARGIN_SEC : time margin to restart before time limit
# SUBMITTER_TIME_LIMIT : wall time <= 24 hours (format as --time in man sbatch)
###############################################################################
# Edit settings below
# Or pass values via...
# sbatch --export=ALL,Var1=...,...,VarN=... checkpoint_submitter.sh
# Or pass values via...
# Var1=... VarN=... sbatch checkpoint_submitter.sh
###############################################################################
CKPT_PATH="${CKPT_PATH:-state_iter.txt}"
MAX_ITER="${MAX_ITER:-500}"
RUNNER_SCRIPT="${RUNNER_SCRIPT:-checkpoint_runner.sh}"
SUBMITTER_MARGIN_SEC="${SUBMITTER_MARGIN_SEC:-60}"
SUBMITTER_TIME_LIMIT="${SUBMITTER_TIME_LIMIT:-3:30}"
###############################################################################
# Slurm directives (keep SUBMITTER_TIME_LIMIT <= 24 hours)
###############################################################################
#SBATCH --job-name=ckpt_submitter
#SBATCH --output=log_submitter_%j.out
#SBATCH --error=log_submitter_%j.err
#SBATCH --time=24:00:00
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=256M
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
alias dtstamp='date +%Y%m%d-%H:%M:%S'
info(){ echo "Info[$(dtstamp)]: $*"; }
get_ckpt_iter() {
    [[ -f "${CKPT_PATH}" ]] || { echo 0; return; }
    tr -cd '0-9' < "${CKPT_PATH}" 2>/dev/null || echo 0
}
submit_worker() {
    sbatch "${RUNNER_SCRIPT}" | awk '{print $4}'
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
should_restart() {
    now=$(date +%s)
    elapsed=$(( now - restart_start_sec ))
    remaining=$(( restart_limit_sec - elapsed ))
    echo -ne "Time before restart: $remaining (sec)\r" >&2
    (( remaining < SUBMITTER_MARGIN_SEC ))
}
###############################################################################
# Log settings
###############################################################################
info "Start on $(hostname); JOBID=${SLURM_JOB_ID:-unknown}"
info "Submitter settings:"
info "CKPT_PATH=${CKPT_PATH}"
info "MAX_ITER=${MAX_ITER}"
info "RUNNER_SCRIPT=${RUNNER_SCRIPT}"
info "SUBMITTER_MARGIN_SEC=${SUBMITTER_MARGIN_SEC}"
info "SUBMITTER_TIME_LIMIT=${SUBMITTER_TIME_LIMIT}"
###############################################################################
# Restore state if present
###############################################################################
state_file="submitter_state.txt"
submitter_cycle=0
if [[ -f "${state_file}" ]]; then
    source "${state_file}"
    info "Loaded state: submitter_cycle=${submitter_cycle}"
else
    info "No previous state found; starting fresh."
fi
###############################################################################
# Track time for restart
###############################################################################
restart_start_sec=$(date +%s)
restart_limit_sec=$(to_seconds "${SUBMITTER_TIME_LIMIT}")
###############################################################################
# Main Loop
###############################################################################
info "Submitter cycle: ${submitter_cycle}"
module load anaconda3/2023.07 # using python3
while true; do
    current_iter=$(get_ckpt_iter)
    info "Current checkpoint iteration: ${current_iter}"
    if (( current_iter >= MAX_ITER )); then
        info "Reached MAX_ITER=${MAX_ITER}; running final analytics."
        # List of analytics scripts to check
        analytics_scripts=(
            "aggregate_usage.py"
            "plot_progress.py"
        )
        # Run resource usage aggregation
        if command -v python3 >/dev/null 2>&1; then
            # Loop over each script and run only if present
            for script in "${analytics_scripts[@]}"; do
                if [[ -f "${script}" ]]; then
                    info "Running analytics ${script} ..."
                    python3 "${script}"
                else
                    info "WARNING: ${script} not found; skipping."
                fi
            done
        else
            info "WARNING: python3 not found; skipping analytics."
        fi
        info "Workflow complete. Exiting submitter."
        exit 0
    fi
    JOBID=$(submit_worker)
    info "Submitted worker: ${JOBID}"
    # Log worker JobIDs for later aggregation
    id_log="worker_ids.txt"
    echo "${JOBID}" >> "${id_log}"
    # Wait for worker to finish
    info "Waiting on first of worker ${JOBID} to finish or self-restart."
    while squeue -j "${JOBID}" >/dev/null 2>&1; do
        sleep 10
        if should_restart; then
            info "Submitter approaching timeout -> restarting self"
            # Save state
            echo "submitter_cycle=$((submitter_cycle+1))" > "${state_file}"
            # Submit a new submitter instance
            sbatch checkpoint_submitter.sh
            exit 0
        fi
    done
    # Read worker exit code
    rc=$(sacct -j "${JOBID}" --format=ExitCode -P | awk -F: 'NR==2{print $1}')
    info "Worker finished with code ${rc}"
    case "${rc}" in
        0)
            info "Worker reports completed workflow."
            exit 0
            ;;
        99|124)
            info "Checkpoint advance -> continuing workflow."
            ;;
        *)
            info "Unexpected worker failure (code ${rc}). Stopping."
            exit "${rc}"
            ;;
    esac
    # Loop continues to submit next worker
done
