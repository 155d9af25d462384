#!/bin/bash
# Checks that CMakeLists.txt (the build the GPU machines use, which have no
# Bazel) names every library source that Bazel builds: a .cc file added
# under base/ graph/ zoo/ profiles/ simulator/ policies/ runtime/ placer/
# and left out of CMakeLists.txt builds and tests here and then fails to
# link there. Test sources (tests/) and the fuzz targets are not checked.
set -u
root="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-}"
[ -f "$root/CMakeLists.txt" ] || root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 2
missing=0
checked=0
for f in $(find base graph zoo profiles simulator policies runtime placer \
             -name '*.cc' | sort); do
  checked=$((checked + 1))
  if ! grep -qE "(^|[[:space:](])$f([[:space:])]|$)" CMakeLists.txt; then
    echo "$f: not in CMakeLists.txt (add it to its folder's library there)"
    missing=$((missing + 1))
  fi
done
echo "checked $checked sources, $missing missing from CMakeLists.txt"
[ "$checked" -gt 50 ] || { echo "found only $checked sources under $root"; exit 1; }
[ "$missing" -eq 0 ]
