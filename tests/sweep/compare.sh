#!/usr/bin/env bash
# Compare two sweeps of tests/sweep/identical.sh byte for byte:
#
#   tests/sweep/compare.sh A B
#
# prints "N identical, M differ", then each differing (or one-sided) file's name; exit 1 if
# any differ.
set -uo pipefail
if [[ $# -ne 2 ]]; then
    echo "usage: $0 A B" >&2
    exit 2
fi
same=0
differ=()
while IFS= read -r name; do
    if [[ -f "$1/$name" && -f "$2/$name" ]] && cmp -s "$1/$name" "$2/$name"; then
        same=$((same + 1))
    else
        differ+=("$name")
    fi
done < <( (ls -A "$1"; ls -A "$2") | LC_ALL=C sort -u)
echo "$same identical, ${#differ[@]} differ"
for name in "${differ[@]}"; do
    echo "  $name"
done
[[ ${#differ[@]} -eq 0 ]]
