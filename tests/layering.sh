#!/usr/bin/env bash
# The include direction of the tree (issue 15): a layer includes only layers
# below it, never one above or beside it:
#   fabric < systems < harness < {apps, microbench} < cli
# Tests (*_test.cc, tests/) sit above their folder's layer and may include
# any layer below cli. Prints every offending include as file:line and exits
# 1; run from anywhere (ctest style.layering).
set -euo pipefail
cd "$(dirname "$0")/.."

rank() {
  case "$1" in
    fabric) echo 0 ;; systems) echo 1 ;; harness) echo 2 ;;
    apps | microbench) echo 3 ;; cli) echo 4 ;; *) echo -1 ;;
  esac
}

bad=0
while IFS= read -r file; do
  top=${file%%/*}
  case "$file" in
    *_test.cc | tests/*) continue ;;
  esac
  mine=$(rank "$top")
  while IFS=: read -r line inc; do
    dep=${inc#*\"}
    dep=${dep%%/*}
    theirs=$(rank "$dep")
    [ "$theirs" -lt 0 ] && continue
    if [ "$theirs" -gt "$mine" ] || { [ "$theirs" -eq "$mine" ] && [ "$dep" != "$top" ]; }; then
      echo "$file:$line: $top includes $dep (${inc#\#include }): $top may include only" \
           "layers below it (fabric < systems < harness < apps, microbench < cli)"
      bad=1
    fi
  done < <(grep -n '^#include "' "$file" || true)
done < <(find fabric systems harness apps microbench cli \( -name '*.h' -o -name '*.cc' \) | sort)
exit $bad
