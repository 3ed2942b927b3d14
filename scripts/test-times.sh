#!/usr/bin/env bash
# Runs a `cargo test` command (scripts/test.sh gives it one) with its
# output passed through, then prints every test binary's wall time, slowest
# first, so each CI log shows where the suite's time goes:
#
#   scripts/test-times.sh cargo test --workspace -- --include-ignored
#
# The times are cargo's own: libtest ends each binary with "test result:
# ... finished in N.NNs", and the "Running ... (target/debug/deps/NAME-HASH)"
# or "Doc-tests NAME" line before it names the binary. A binary that started
# but printed no result (it crashed, or the run stopped in it) is listed as
# "no result". The table is printed also when the command failed; the exit
# status is the command's.
set -uo pipefail
me=test-times.sh

[ $# -gt 0 ] || {
	echo "usage: scripts/$me COMMAND [ARGS...]" >&2
	exit 2
}

log=$(mktemp "${TMPDIR:-/tmp}/ibtca-test-times.XXXXXX")
# cargo prints "Running" on stderr and the binaries' results on stdout: one
# pipe keeps them in order.
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# One "SECONDS<TAB>BINARY" row per binary; "-" for no result.
awk '
	function flush() { if (name != "") print "-\t" name; name = "" }
	/^ *Running .*\(.*\)$/ {
		flush()
		unit = ($0 ~ /^ *Running unittests /) ? " (unit tests)" : ""
		path = $0
		sub(/^.*\(/, "", path); sub(/\)$/, "", path)
		n = split(path, part, "/")
		base = part[n]
		sub(/-[0-9a-f]+$/, "", base)
		name = base unit
		next
	}
	/^ *Doc-tests / {
		flush()
		name = $0
		sub(/^ *Doc-tests /, "", name)
		name = name " (doc tests)"
		next
	}
	/^test result: .*finished in [0-9.]+s/ && name != "" {
		t = $0
		sub(/^.*finished in /, "", t); sub(/s.*$/, "", t)
		print t "\t" name
		name = ""
	}
	END { flush() }
' "$log" | sort -t "$(printf '\t')" -k1,1gr >"$log.rows"

if [ -s "$log.rows" ]; then
	total=$(awk -F '\t' '$1 != "-" { s += $1 } END { printf "%.1f", s }' "$log.rows")
	echo "test binaries by wall time, slowest first (sum ${total} s):" >&2
	awk -F '\t' '
		$1 == "-" { printf "  %9s  %s\n", "no result", $2; next }
		{ printf "  %7.1f s  %s\n", $1, $2 }
	' "$log.rows" >&2
fi
rm -f -- "$log" "$log.rows"
exit "$rc"
