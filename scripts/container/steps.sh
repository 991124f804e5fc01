# Step reporting shared by the container scripts (verify-container.sh, compose-check.sh):
# `step NAME` starts a step (timing the one before), `ok`/`log` report, and `print_timings`
# lists how long each step took. Sourced; sets no options of its own.
timings=()
step_name=
step_start=

log() { printf '==> %s\n' "$*" >&2; }
ok() { printf '    ok: %s\n' "$*" >&2; }
now() { date +%s.%N; }
seconds_since() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "$1" "$(now)"; }
step() {
    if [[ -n $step_name ]]; then timings+=("$(printf '%7ss  %s' "$(seconds_since "$step_start")" "$step_name")"); fi
    step_name=$1
    step_start=$(now)
    [[ -n $step_name ]] && printf '\n==> %s\n' "$step_name" >&2
    return 0
}
print_timings() {
    step ""
    if ((${#timings[@]})); then
        echo >&2
        echo "timings:" >&2
        printf '  %s\n' "${timings[@]}" >&2
    fi
}
