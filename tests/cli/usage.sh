# usage.sh - the usage text is derived from the tables the commands parse
# with: every option a command's getopt table holds appears in its --help
# (and is accepted, not "unknown"), none shows a made-up argument name, and
# every strategy of the library's registry appears in plan's --help and as
# a row of compare's table. The option lists come from `remat help
# --options CMD` (the table itself); the strategies from the library's own
# refusal of an unknown name (the registry, by another path than --help).
usage_check() {
    if [ "$1" -eq 0 ]; then
        pass=$((pass + 1))
    else
        echo "FAIL $2"
        fail=$((fail + 1))
    fi
}
"$REMAT" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}' | grep -v '^help$' >"$T/cmds"
[ "$(wc -l <"$T/cmds")" -ge 11 ]; usage_check $? "usage_lists_the_commands"
for cmd in $(cat "$T/cmds"); do
    "$REMAT" help --options "$cmd" | grep -E '^--[a-z0-9-]+( -.)?$' >"$T/opts"
    "$REMAT" "$cmd" --help >"$T/help" 2>&1
    n=$(wc -l <"$T/opts")
    [ "$n" -ge 2 ]; usage_check $? "usage_${cmd}_has_a_table: $n options"
    missing="" unknown="" madeup=""
    while read -r opt short; do
        [ "$opt" = --help ] && continue # --help is how the usage was asked for
        grep -qE -- "${opt}([^a-z0-9-]|\$)" "$T/help" || { [ -n "$short" ] && grep -qF -- "$short " "$T/help"; } ||
            missing="$missing $opt"
        grep -qF -- "[$opt ARG]" "$T/help" && madeup="$madeup $opt"
        "$REMAT" "$cmd" "$opt" >"$T/one" 2>&1 </dev/null
        grep -qiE "unknown (or ambiguous )?option|unrecognized option" "$T/one" && unknown="$unknown $opt"
    done <"$T/opts"
    [ -z "$missing" ]; usage_check $? "usage_${cmd}_lists_every_option: missing$missing"
    [ -z "$unknown" ]; usage_check $? "usage_${cmd}_accepts_every_listed_option: unknown$unknown"
    [ -z "$madeup" ]; usage_check $? "usage_${cmd}_names_every_argument: no argument name for$madeup"
done
"$REMAT" plan graphs/mlp2.json --strategy no-such-strategy 2>&1 | sed -n 's/.*(known: \(.*\)).*/\1/p' | tr ',' '\n' |
    sed 's/^ *//' >"$T/strategies"
[ "$(wc -l <"$T/strategies")" -ge 9 ]; usage_check $? "usage_registry_lists_strategies"
"$REMAT" plan --help >"$T/plan_help"
"$REMAT" compare graphs/mlp2.json --budget 1GiB >"$T/compare" 2>&1
while read -r s; do
    grep -qE "^  $s " "$T/plan_help"; usage_check $? "usage_plan_help_lists_strategy_$s"
    [ "$s" = auto ] && continue # auto is the choice among the others, not a column
    grep -qE "^$s( |/)" "$T/compare"; usage_check $? "usage_compare_has_a_row_for_$s"
done <"$T/strategies"
