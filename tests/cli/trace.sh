# trace.sh - `remat trace` and `remat audit`: the format follows the output
# name (or --format), every document is whole and parses, the SVG is
# well-formed XML (xmllint) and renders to a PNG (rsvg-convert), plans and
# budgets carry through, and bad input exits with the right code.

# Silent checks print a word on success, so `expect` has text to match.
trace_ok() { "$REMAT" trace "$@" && echo "trace ok"; }
xml_ok() { xmllint --noout "$1" && echo "well-formed"; }
absent() { [ ! -e "$1" ] && echo "absent"; }
png_ok() { rsvg-convert "$1" -o "$2" && head -c 8 "$2" | od -c | grep -q 'P   N   G' && echo "rendered"; }

# The format from the file name.
expect trace_json 0 "trace ok" -- trace_ok graphs/mlp2.json -o "$T/t.json"
expect trace_json_is_remat_trace 0 '"format": "remat-trace", "version": 1' -- cat "$T/t.json"
expect trace_chrome 0 "trace ok" -- trace_ok graphs/mlp2.json -o "$T/t.trace.json"
expect trace_chrome_is_chrome 0 '"traceEvents"' -- cat "$T/t.trace.json"
expect trace_csv 0 "trace ok" -- trace_ok graphs/mlp2.json -o "$T/t.csv"
expect trace_csv_header 0 "id,tensor,grad,category,bytes,alloc,free,why,by,saved_for" -- cat "$T/t.csv"
expect trace_csv_row 0 "a1,a1,0,activations,4096,1,13,produced,fwd:a1,bwd:h2;bwd:a1" -- cat "$T/t.csv"
expect trace_svg 0 "trace ok" -- trace_ok graphs/mlp2.json -o "$T/t.svg"
expect trace_svg_xml 0 "well-formed" -- xml_ok "$T/t.svg"
expect trace_svg_renders 0 "rendered" -- png_ok "$T/t.svg" "$T/t.png"
expect trace_upper_case_name 0 "trace ok" -- trace_ok graphs/mlp2.json -o "$T/T.SVG"
# --format wins over the name, and is needed for stdout.
expect trace_format_chrome 0 "trace ok" -- trace_ok graphs/mlp2.json --format chrome -o "$T/c.json"
expect trace_format_chrome_is_chrome 0 '"traceEvents"' -- cat "$T/c.json"
expect trace_stdout 0 "id,tensor" -- "$REMAT" trace graphs/mlp2.json --format csv
expect trace_flops_time 0 '"time_unit": "1 us = 1 FLOPs"' -- "$REMAT" trace graphs/mlp2.json --format chrome --flops-time

# A tight plan: Revolve under a 2.5 MiB activation budget on transformer4.
"$REMAT" plan graphs/transformer4.json --strategy revolve --activation-budget 2.5MiB -o "$T/tight.json" >/dev/null
expect trace_plan_svg 0 "trace ok" -- trace_ok graphs/transformer4.json --plan "$T/tight.json" -o "$T/tight.svg"
expect trace_plan_svg_budget 0 "activation budget 2.50 MiB" -- cat "$T/tight.svg"
expect trace_plan_svg_recompute 0 "RECOMPUTE" -- cat "$T/tight.svg"
expect trace_plan_svg_xml 0 "well-formed" -- xml_ok "$T/tight.svg"
expect trace_plan_svg_renders 0 "rendered" -- png_ok "$T/tight.svg" "$T/tight.png"
expect trace_plan_positional 0 '"label": "revolve"' -- "$REMAT" trace graphs/transformer4.json "$T/tight.json" --format json
expect trace_plan_json_budget 0 '"budget": {"kind": "activation", "bytes": 2621440}' -- \
    "$REMAT" trace graphs/transformer4.json --plan "$T/tight.json" --format json
expect trace_budget_option 0 "budget (total) 20.00 MiB" -- "$REMAT" trace graphs/transformer4.json --budget 20MiB --format svg
expect trace_store_all_svg 0 "trace ok" -- trace_ok graphs/transformer4.json -o "$T/sa.svg"
expect trace_store_all_svg_renders 0 "rendered" -- png_ok "$T/sa.svg" "$T/sa.png"

# The audit of the peak.
expect audit_text 0 "peak at step 14: BWD h1 (backward)" -- "$REMAT" audit graphs/mlp2.json
expect audit_why 0 "grad:h1: gradient of h1, written by bwd:a1, read by bwd:h1 (step 14)" -- "$REMAT" audit graphs/mlp2.json
expect audit_json 0 '"why_live": "leaf: param, resident throughout"' -- "$REMAT" audit graphs/mlp2.json --json
expect audit_plan 0 "recomputed" -- "$REMAT" audit graphs/transformer4.json "$T/tight.json" --top 20
expect audit_help 0 "usage: remat audit" -- "$REMAT" audit --help

# Usage errors (2), bad input (3), an invalid schedule (1).
expect trace_no_format 2 "give --format" -- "$REMAT" trace graphs/mlp2.json
expect trace_unknown_extension 2 "give --format" -- "$REMAT" trace graphs/mlp2.json -o "$T/t.txt"
expect trace_bad_format 2 "--format: 'xml' is not" -- "$REMAT" trace graphs/mlp2.json --format xml
expect trace_flops_time_svg 2 "--flops-time applies to the Chrome trace only" -- \
    "$REMAT" trace graphs/mlp2.json --flops-time -o "$T/x.svg"
expect trace_two_budgets 2 "give one of" -- "$REMAT" trace graphs/mlp2.json --budget 1MiB --activation-budget 1MiB -o "$T/x.svg"
expect trace_bad_budget 2 "--budget" -- "$REMAT" trace graphs/mlp2.json --budget 1.5K -o "$T/x.svg"
expect trace_bad_width 2 "--width" -- "$REMAT" trace graphs/mlp2.json --width 0 -o "$T/x.svg"
expect trace_small_width 2 "SVG size" -- "$REMAT" trace graphs/mlp2.json --width 100 -o "$T/x.svg"
expect trace_no_graph 2 "expected GRAPH" -- "$REMAT" trace -o "$T/x.svg"
expect trace_missing_graph 3 "cannot open" -- "$REMAT" trace "$T/none.json" -o "$T/x.svg"
expect trace_wrong_plan 3 "transformer4" -- "$REMAT" trace graphs/mlp2.json --plan "$T/tight.json" -o "$T/x.svg"
# Drop the first RECOMPUTE of the tight plan: a backward step then reads a
# freed tensor, and the trace names the instruction.
awk 'done == 0 && /"RECOMPUTE / { done = 1; next } { print }' "$T/tight.json" >"$T/broken.json"
expect trace_invalid_schedule 1 "is not resident" -- "$REMAT" trace graphs/transformer4.json --plan "$T/broken.json" -o "$T/x.svg"
expect trace_failures_write_nothing 0 "absent" -- absent "$T/x.svg"
