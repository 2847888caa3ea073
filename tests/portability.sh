#!/usr/bin/env bash
# The suite under other CPUs' float kernels: numpy's OpenBLAS kernel (OPENBLAS_CORETYPE) and
# torch's (ATEN_CPU_CAPABILITY), one set a run, and a table of the results (docs/testing.md).
#   bash tests/portability.sh                 # every set below, two at a time
#   JOBS=1 bash tests/portability.sh          # one at a time
#   bash tests/portability.sh -m 'not blender' tests/test_dualquat.py   # extra arguments: pytest
#   SETS="OPENBLAS_CORETYPE=Zen ATEN_CPU_CAPABILITY=avx2" bash tests/portability.sh   # some sets
# Each run's log is in out/portability/<set>.log; the table is printed and written beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tests/setup.sh || exit 1
ALL_SETS=(
    "OPENBLAS_CORETYPE=Prescott"
    "OPENBLAS_CORETYPE=Haswell"
    "OPENBLAS_CORETYPE=SkylakeX"
    "OPENBLAS_CORETYPE=Zen"
    "ATEN_CPU_CAPABILITY=default"
    "ATEN_CPU_CAPABILITY=avx2"
    "ATEN_CPU_CAPABILITY=native"  # not a value torch knows: it warns and keeps the CPU's own
)
read -r -a SETS <<<"${SETS:-${ALL_SETS[*]}}"
# a kernel newer than the CPU is an illegal instruction (neither library checks a forced one)
BEST=$(.venv/bin/python -c 'from neurok_core.blas import cpu_flags, suited_kernel
print(suited_kernel(cpu_flags()) or "none")')
runnable() {
    case "$1:$BEST" in
        *SkylakeX:Haswell | *SkylakeX:none | *Haswell:none | *Zen:none | *avx2:none) return 1 ;;
    esac
}
OUT=out/portability
mkdir -p "$OUT"
JOBS="${JOBS:-2}"

run_set() {  # one set: its log and a line "set|passed|failed|errors|minutes|rc"
    local set="$1"; shift
    local log="$OUT/${set//=/_}.log" start end rc
    start=$(date +%s)
    env -u OPENBLAS_CORETYPE -u ATEN_CPU_CAPABILITY "$set" \
        .venv/bin/python -m pytest -q -p no:cacheprovider "$@" >"$log" 2>&1
    rc=$?
    end=$(date +%s)
    local summary passed failed errors
    summary=$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$log" | tail -1)
    passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
    failed=$(grep -oE '[0-9]+ failed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
    errors=$(grep -oE '[0-9]+ error' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
    printf '%s|%s|%s|%s|%.1f|%s\n' "$set" "${passed:-0}" "${failed:-0}" "${errors:-0}" \
        "$(echo "($end - $start) / 60" | bc -l)" "$rc" >"$log.row"
}

running=0
for set in "${SETS[@]}"; do
    if ! runnable "$set"; then
        echo "$set|skipped: this CPU cannot run it|||-|0" >"$OUT/${set//=/_}.log.row"
        continue
    fi
    run_set "$set" "$@" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

status=0
rows=("| kernel set | passed | failed | errors | minutes |" "|---|---|---|---|---|")
for set in "${SETS[@]}"; do
    IFS='|' read -r name passed failed errors minutes rc <"$OUT/${set//=/_}.log.row"
    rows+=("| \`$name\` | $passed | $failed | $errors | $minutes |")
    [ "$rc" -eq 0 ] || status=1
done
printf '%s\n' "${rows[@]}" | tee "$OUT/table.md"
exit "$status"
