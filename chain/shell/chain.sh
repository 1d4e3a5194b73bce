# shellcheck shell=bash
# chain.sh: helpers for a Bash app run by a `chain` runner.  Source it:
#
#   . "${CHAIN_SHELL_HELPERS:-/path/to/chain/shell}/chain.sh"
#
# Provides
#   CHAIN_EXIT_DONE=0 CHAIN_EXIT_TEMPFAIL=75 CHAIN_EXIT_STOPPED=99
#   chain_write_atomic PATH        stdin -> PATH via temporary + sync + mv
#   chain_write_counter N [PATH]   publish the progress counter (default $CKPT_PATH)
#   chain_read_counter [PATH]      print the counter (0 when the file is absent);
#                                  fails on anything but a plain integer
#   chain_install_traps            TERM/INT only set CHAIN_STOP=1 (and record which)
#   chain_sleep SECONDS            a sleep the stop signal interrupts at once
#   chain_stop_expected [LEAD]     true when a checkpoint should be written now:
#                                  stop signal, $CHAIN_DEADLINE within LEAD seconds,
#                                  or a podinfo instant within LEAD plus
#                                  $CHAIN_WARNING_MARGIN (default 60) seconds
#                                  (warnings arrive late and name only the
#                                  earliest stop); sets CHAIN_STOP_REASON,
#                                  CHAIN_STOP_EXIT (99, 75 or empty: save and go
#                                  on) and CHAIN_WARNING_PRESENT (0/1)
#   chain_now                      epoch seconds with 3 decimals
#   chain_log_iteration EVENT N [CODE]
#                                  append to the iteration log ($CHAIN_ITER_LOG, default
#                                  iterations.log): EVENT is start, iter, ckpt or exit;
#                                  `chain report` counts the work redone from it
#
# Works under `set -euo pipefail`.  A trap runs only after the foreground
# command returns, so sleep or compute with `cmd & wait $!` (chain_sleep does)
# for the stop signal to be seen at once.  Note that a shell started in the
# background by a non-interactive shell inherits SIGINT ignored, and Bash
# cannot trap a signal ignored on entry: run Bash apps with stop signal TERM.

CHAIN_EXIT_DONE=0
CHAIN_EXIT_TEMPFAIL=75   # EX_TEMPFAIL: stopped on a termination warning
CHAIN_EXIT_STOPPED=99    # checkpointed and stopped voluntarily
CHAIN_STOP=0
CHAIN_STOP_SIGNAL_RECEIVED=""
CHAIN_STOP_REASON=""
CHAIN_STOP_EXIT=""
CHAIN_WARNING_PRESENT=0
_CHAIN_SLEEP_PID=""

# Current time in integer milliseconds (EPOCHREALTIME avoids a fork; Bash 5).
chain_now_ms() {
    if [[ -n "${EPOCHREALTIME:-}" ]]; then
        local us=${EPOCHREALTIME/[.,]/}
        echo $(( 10#$us / 1000 ))
    else
        date +%s%3N
    fi
}

chain_now() {
    local ms
    ms=$(chain_now_ms)
    printf '%d.%03d\n' $(( ms / 1000 )) $(( ms % 1000 ))
}

# "12", "12.5", "12.3456" -> milliseconds; fails on anything else.
_chain_to_ms() {
    [[ "${1:-}" =~ ^([0-9]+)(\.([0-9]*))?$ ]] || return 1
    local int=${BASH_REMATCH[1]} frac="${BASH_REMATCH[3]}000"
    echo $(( 10#$int * 1000 + 10#${frac:0:3} ))
}

_chain_sync() {
    # coreutils >= 8.24 fsyncs just the named file or directory; older ones
    # ignore the argument and sync everything, which is slower but also safe.
    sync -- "$1" 2>/dev/null || true
}

chain_write_atomic() {
    local path=${1:?chain_write_atomic: PATH required}
    local dir base tmp
    dir=$(dirname -- "$path")
    base=$(basename -- "$path")
    tmp="$dir/.tmp-$base.$$"
    if ! cat > "$tmp"; then
        rm -f -- "$tmp"
        return 1
    fi
    _chain_sync "$tmp"            # the data is durable before the rename
    if ! mv -f -T -- "$tmp" "$path"; then  # rename(2); -T: never into a directory
        rm -f -- "$tmp"
        echo "chain_write_atomic: cannot rename into $path" >&2
        return 1                  # never report a checkpoint that was not published
    fi
    _chain_sync "$dir"            # and the rename itself is durable
}

chain_write_counter() {
    local n=${1:?chain_write_counter: N required}
    local path=${2:-${CKPT_PATH:?CKPT_PATH not set}}
    [[ "$n" =~ ^[0-9]+$ ]] || { echo "chain_write_counter: not an integer: $n" >&2; return 1; }
    printf '%s\n' "$n" | chain_write_atomic "$path"
}

chain_read_counter() {
    local path=${1:-${CKPT_PATH:?CKPT_PATH not set}}
    if [[ ! -e "$path" ]]; then
        echo 0
        return 0
    fi
    local text
    # Strip surrounding whitespace only: "v2 iter 10" must not become 210.
    text=$(< "$path") || { echo "chain_read_counter: cannot read $path" >&2; return 1; }
    text=${text#"${text%%[![:space:]]*}"}
    text=${text%"${text##*[![:space:]]}"}
    if [[ ! "$text" =~ ^[0-9]+$ ]]; then
        echo "chain_read_counter: $path does not hold a plain integer" >&2
        return 1
    fi
    text=${text#"${text%%[!0]*}"}  # leading zeros: bash arithmetic wraps above 2^63
    if (( ${#text} > 18 )); then
        echo "chain_read_counter: $path holds a counter too large for bash" >&2
        return 1
    fi
    echo $(( 10#${text:-0} ))
}

_chain_on_signal() {
    # Only set the flag: the app saves at its next iteration boundary.
    CHAIN_STOP=1
    CHAIN_STOP_SIGNAL_RECEIVED=$1
    if [[ -n "$_CHAIN_SLEEP_PID" ]]; then
        kill "$_CHAIN_SLEEP_PID" 2>/dev/null || true
    fi
}

chain_install_traps() {
    trap '_chain_on_signal TERM' TERM
    trap '_chain_on_signal INT' INT
}

chain_sleep() {
    sleep "${1:?chain_sleep: SECONDS required}" &
    _CHAIN_SLEEP_PID=$!
    wait "$_CHAIN_SLEEP_PID" 2>/dev/null || true
    _CHAIN_SLEEP_PID=""
}

# Instant in a podinfo file as epoch ms; fails when empty, missing or unparseable.
_chain_instant_ms() {
    local file=$1 value secs
    [[ -s "$file" ]] || return 1          # empty file = absent annotation
    value=$(< "$file") || return 1
    value=${value//[[:space:]]/}
    if _chain_to_ms "$value" 2>/dev/null; then
        return 0
    fi
    secs=$(date -u -d "$value" +%s%3N 2>/dev/null) || return 1
    [[ "$secs" =~ ^[0-9]+$ ]] || return 1
    echo "$secs"
}

chain_stop_expected() {
    local lead_ms warn_ms now dl at
    lead_ms=$(_chain_to_ms "${1:-0}") || lead_ms=0
    warn_ms=$(_chain_to_ms "${CHAIN_WARNING_MARGIN:-60}") || warn_ms=60000
    warn_ms=$(( lead_ms + warn_ms ))
    now=$(chain_now_ms)
    CHAIN_STOP_REASON=""
    CHAIN_STOP_EXIT=""
    CHAIN_WARNING_PRESENT=0
    if (( CHAIN_STOP )); then
        CHAIN_STOP_REASON="signal"
        CHAIN_STOP_EXIT=$CHAIN_EXIT_STOPPED
    fi
    if [[ -n "${CHAIN_DEADLINE:-}" ]] && dl=$(_chain_to_ms "$CHAIN_DEADLINE"); then
        if (( dl - now <= lead_ms )); then
            CHAIN_STOP_REASON="${CHAIN_STOP_REASON:+$CHAIN_STOP_REASON }deadline"
            CHAIN_STOP_EXIT=$CHAIN_EXIT_STOPPED
        fi
    fi
    local podinfo=${CHAIN_PODINFO:-/etc/podinfo}
    # Re-read on every call: a warning can be withdrawn at any time.
    if at=$(_chain_instant_ms "$podinfo/termination-warning-at") && (( at >= now )); then
        CHAIN_WARNING_PRESENT=1           # (an instant in the past is stale)
        if (( at - now <= warn_ms )); then
            CHAIN_STOP_REASON="${CHAIN_STOP_REASON:+$CHAIN_STOP_REASON }termination-warning"
            CHAIN_STOP_EXIT=${CHAIN_STOP_EXIT:-$CHAIN_EXIT_TEMPFAIL}
        fi
    fi
    if at=$(_chain_instant_ms "$podinfo/guaranteed-until") && (( at >= now && at - now <= warn_ms )); then
        # The guarantee ending is a reason to save, not to stop.
        CHAIN_STOP_REASON="${CHAIN_STOP_REASON:+$CHAIN_STOP_REASON }guarantee-ending"
    fi
    [[ -n "$CHAIN_STOP_REASON" ]]
}

# One line of the iteration log: `<epoch> <event> <iteration> <job|-> <pid> [code]`.
chain_log_iteration() {  # EVENT ITERATION [EXIT_CODE]
    printf '%s %s %s %s %s%s\n' "$(chain_now)" "$1" "$2" "${SLURM_JOB_ID:--}" "$$" "${3:+ $3}" \
        >> "${CHAIN_ITER_LOG:-iterations.log}"
}
