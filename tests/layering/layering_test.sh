#!/bin/bash
# Checks the layer order on every #include of the project's own headers:
#
#   base -> graph -> profiles -> simulator -> policies -> runtime -> placer
#
# A file may include headers of its own layer and the layers below. Also:
# zoo/ (models built on graph/) is included by placer/ only; policies/
# outside policies/rl/ does not include policies/rl/; placer/service/ does
# not include placer/cli/. Inside simulator/, the task graph and the event
# engine know nothing of views, plans or costs (they include only each
# other); the view's index knows nothing of plans or costs (it includes
# no other simulator/ header); a lowering (a wide stage's passes too),
# and the slot copies read off it, include neither the engine that runs its graph nor the memory
# timelines that observe it; the memory timelines (an op placement's,
# a strategy's) do not include the simulators built on them. Inside runtime/, the executor
# (strategy_* and executor.*) runs a plan (simulator/strategy.h,
# placement.h) and includes no engine, simulator, lowering or memory
# timeline: an op placement's memory goes through placement_memory.h.
# Bazel visibility enforces the same order on
# BUILD deps (//:above_* in the top BUILD.bazel); this catches an include
# that reaches a header through some other target's deps.
set -u
rank() {
  case "$1" in
    base) echo 0 ;; graph) echo 1 ;; zoo) echo 1 ;; profiles) echo 2 ;;
    simulator) echo 3 ;; policies) echo 4 ;; runtime) echo 5 ;;
    placer) echo 6 ;; *) echo -1 ;;
  esac
}
root="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-}"
[ -d "$root/base" ] || root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 2
bad=0
checked=0
for f in $(find base graph zoo profiles simulator policies runtime placer \
             -name '*.h' -o -name '*.cc' -o -name '*.proto' | sort); do
  from="${f%%/*}"
  rf=$(rank "$from")
  while IFS= read -r line; do
    inc=$(sed -E 's/^(#include|import) "([^"]+)".*/\2/' <<<"$line")
    to="${inc%%/*}"
    rt=$(rank "$to")
    [ "$rt" -lt 0 ] && continue  # a library's header
    checked=$((checked + 1))
    why=""
    if [ "$rt" -gt "$rf" ]; then
      why="$from/ is below $to/"
    elif [ "$to" = zoo ] && [ "$from" != zoo ] && [ "$from" != placer ]; then
      why="only placer/ builds models from zoo/"
    elif [[ "$inc" == policies/rl/* && "$from" == policies && "$f" != policies/rl/* ]]; then
      why="policies/ does not include the RL placer (policies/rl/)"
    elif [[ "$inc" == placer/cli/* && "$f" == placer/service/* ]]; then
      why="the service does not include the command line"
    elif [[ "$f" =~ ^simulator/(task_graph|engine)\. &&
            ! "$inc" =~ ^simulator/(task_graph|engine)\.h$ ]]; then
      why="the task graph and the engine include only each other"
    elif [[ "$f" =~ ^simulator/view_index\. &&
            "$inc" == simulator/* && "$inc" != simulator/view_index.h ]]; then
      why="the view's index includes no other simulator/ header"
    elif [[ ( "$f" == simulator/*lowering* || "$f" =~ ^simulator/(slot_copies|stage_crossings|wide_passes)\. ) &&
            "$inc" =~ ^simulator/(engine|memory_timeline|strategy_memory)\.h$ ]]; then
      why="a lowering does not include the engine or the memory timelines"
    elif [[ "$f" =~ ^simulator/(memory_timeline|strategy_memory)\. &&
            "$inc" =~ ^simulator/(simulator|strategy_simulator)\.h$ ]]; then
      why="the memory timeline does not include the simulators"
    elif [[ "$f" =~ ^runtime/(strategy_|executor\.) &&
            "$inc" =~ ^simulator/(engine|simulator|strategy_simulator|memory_timeline|strategy_memory|[a-z_]*lowering)\.h$ ]]; then
      why="the executor runs a plan; memory through runtime/placement_memory.h and runtime/pass_memory.h"
    fi
    if [ -n "$why" ]; then
      echo "$f: includes \"$inc\": $why"
      bad=$((bad + 1))
    fi
  done < <(grep -E '^(#include|import) "[^"]+"' "$f")
done
echo "$checked project includes checked, $bad against the layer order"
[ "$checked" -gt 100 ] || { echo "too few includes found: wrong root?"; exit 1; }
[ "$bad" -eq 0 ]
