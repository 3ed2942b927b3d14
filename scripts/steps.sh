# Sourced by scripts/test.sh and scripts/demo.sh: `step CMD ARGS...` prints
# "[NAME 3m12s] CMD ARGS..." (NAME is $step_name, the time since the script
# started) on stderr, then runs the command; `say TEXT` prints the same
# prefix before TEXT. `steps_done` prints the total at the end.

step_start=$SECONDS

# The time since the script started, as 3m12s.
step_elapsed() {
	local s=$((SECONDS - step_start))
	printf '%dm%02ds' $((s / 60)) $((s % 60))
}

say() {
	printf '[%s %s] %s\n' "${step_name:-${0##*/}}" "$(step_elapsed)" "$*" >&2
}

step() {
	say "$*"
	"$@"
}

steps_done() {
	say "done"
}
