#!/usr/bin/env bash
# The seed's iteration app in Bash, run by a chain runner (or by hand).
#
# State is the progress counter in $CKPT_PATH.  Every $CHECKPOINT_EVERY
# iterations it is written atomically; on the stop signal (TERM) or when the
# runner's deadline is near, the app writes it and exits 99; at $MAX_ITER it
# exits 0.  Each event is appended to $CHAIN_ITER_LOG for verification.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../chain/shell/chain.sh
. "${CHAIN_SHELL_HELPERS:-$here/../../chain/shell}/chain.sh"

MAX_ITER=${MAX_ITER:-60}
CKPT_PATH=${CKPT_PATH:-state_iter.txt}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-5}
ITER_SECONDS=${ITER_SECONDS:-1.0}

# Stop early enough for one more iteration and a save before the signal.
iter_ms=$(_chain_to_ms "$ITER_SECONDS") || { echo "bad ITER_SECONDS=$ITER_SECONDS" >&2; exit 2; }
lead_ms=$(( iter_ms + 1000 ))
LEAD=$(printf '%d.%03d' $(( lead_ms / 1000 )) $(( lead_ms % 1000 )))

i=$(chain_read_counter "$CKPT_PATH") || exit 1
committed=$i
urgent=0
chain_install_traps
chain_log_iteration start "$i"

commit() {
    chain_write_counter "$i" "$CKPT_PATH"
    committed=$i
    chain_log_iteration ckpt "$i"
}

finish() {  # EXIT_CODE
    if (( i != committed )); then
        commit
    fi
    chain_log_iteration exit "$committed" "$1"
    exit "$1"
}

while (( i < MAX_ITER )); do
    if chain_stop_expected "$LEAD"; then
        if [[ -n "$CHAIN_STOP_EXIT" ]]; then
            echo "stopping at iteration $i: $CHAIN_STOP_REASON" >&2
            finish "$CHAIN_STOP_EXIT"
        fi
        if (( ! urgent && i != committed )); then
            commit  # the guarantee is ending: save once now, keep going
        fi
        urgent=1
    else
        urgent=0    # re-armed: a new episode saves again
    fi
    chain_sleep "$ITER_SECONDS"     # the "computation" of iteration i+1
    if (( CHAIN_STOP )); then
        continue                    # interrupted: iteration i+1 is not done
    fi
    i=$(( i + 1 ))
    chain_log_iteration iter "$i"
    if (( i % CHECKPOINT_EVERY == 0 )); then
        commit
    fi
done
finish "$CHAIN_EXIT_DONE"
