#!/usr/bin/env bash
# Make the worked example of objects-spec section 5.7 for real: hel (with
# the scripted model server hel-mock, offline) records a session of two
# instructions without workspace snapshots, and annotate_journal.py prints
# its journal and sidecar byte by byte into journal-example.txt. Ids, times
# and the session id differ from run to run; the layout does not.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cargo build -q --manifest-path "$root/Cargo.toml" -p hel -p hel-mock
bin="$root/target/debug"
work="$(mktemp -d)"
trap 'kill "$mock_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/project" "$work/home"
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config"
cat > "$work/script.json" <<'JSON'
[
  {"content": "4."},
  {"content": "6."}
]
JSON
"$bin/hel-mock" --port 0 --script "$work/script.json" > "$work/mock.out" &
mock_pid=$!
until grep -q listening "$work/mock.out" 2>/dev/null; do sleep 0.05; done
url="http://$(sed -n 's/^listening on //p' "$work/mock.out")"
cd "$work/project"
flags=(--base-url "$url" --model demo --no-workspace)
"$bin/hel" "${flags[@]}" -p "What is 2+2?" > /dev/null
session=$("$bin/hel" sessions | awk 'NR == 2 { print $1 }')
"$bin/hel" "${flags[@]}" resume "$session" -p "And 3+3?" > /dev/null
journal=$(ls .hel/packs/journals/*.journal)
{
  echo "# $("$bin/hel" --version 2>/dev/null | head -1), made by make_journal_example.sh"
  echo "# .hel/format: $(cat .hel/format)"
  echo "# ref $(basename "$journal" .journal): $(cat .hel/refs/sessions/"$(basename "$journal" .journal)")"
  python3 "$here/annotate_journal.py" "$journal" "${journal%.journal}.jidx"
} > "$here/journal-example.txt"
echo "wrote $here/journal-example.txt" >&2
