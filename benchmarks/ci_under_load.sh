#!/usr/bin/env bash
# The README's test command, several times in a row, each on a fresh clone, while a
# process spins one core: hardening's acceptance (timing-dependent tests show up here).
#
#   bash benchmarks/ci_under_load.sh [COMMIT] [RUNS]
#
# Clones go beside this clone (so shared/ is at ../shared for each) as ci-load-N, which
# must not exist yet; stops at the first failure; one line per run in
# ci-load-results.txt beside them.  Figures: docs/getting-started.md.
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
commit=${1:-$(git -C "$repo" rev-parse --short HEAD)}
runs=${2:-3}
parent=$(dirname "$repo")
results="$parent/ci-load-results.txt"
python3 -c 'while True: pass' &
hog=$!
trap 'kill "$hog" 2>/dev/null' EXIT
for i in $(seq "$runs"); do
  clone="$parent/ci-load-$i"
  if [ -e "$clone" ]; then  # never removed here: it may not be ours
    echo "$clone exists: remove or move it, then run again" >&2
    exit 2
  fi
  git clone -q "$repo" "$clone" && git -C "$clone" checkout -q "$commit" || exit 1
  start=$(date +%s)
  (cd "$clone" && CI=true bash .ci/run) > "$parent/ci-load-$i.log" 2>&1
  rc=$?
  echo "run $i commit $commit rc $rc seconds $(( $(date +%s) - start ))" | tee -a "$results"
  [ "$rc" -eq 0 ] || exit "$rc"
done
