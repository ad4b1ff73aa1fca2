#!/usr/bin/env bash
# Fails on a relative link in README.md, CONTRIBUTING.md or docs/**/*.md whose target
# (a file or folder, relative to the linking file) does not exist. Links to web pages
# (`scheme:`) and to anchors of the same page (`#...`) are not checked; an anchor after
# a path is dropped. Fenced code blocks are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
broken=0
while IFS= read -r -d '' file; do
  dir=$(dirname "$file")
  # Markdown links `](target)` outside fenced code blocks, one per line: `line<TAB>target`.
  while IFS=$'\t' read -r line target; do
    target=${target%%#*}
    target=${target%% *}
    [ -z "$target" ] && continue
    case "$target" in
      *:*) continue ;; # https:, mailto:, ...
    esac
    if [ ! -e "$dir/$target" ]; then
      echo "$file:$line: broken link: $target" >&2
      broken=1
    fi
  done < <(awk '
    /^[[:space:]]*(```|~~~)/ { fenced = !fenced; next }
    fenced { next }
    {
      rest = $0
      while (match(rest, /\]\([^)]*\)/)) {
        print NR "\t" substr(rest, RSTART + 2, RLENGTH - 3)
        rest = substr(rest, RSTART + RLENGTH)
      }
    }' "$file")
done < <(find README.md CONTRIBUTING.md docs -name '*.md' -print0)
if [ "$broken" -ne 0 ]; then
  echo "check-links: broken relative links (above)" >&2
  exit 1
fi
echo "check-links: every relative link resolves"
