# alloc.sh - `remat alloc` (allocator simulation and static offsets), the
# "offsets" object of plan files, and `remat plan --budget-mode arena`. The
# figures are those tests/check_alloc.c derives; the SVG must be well-formed
# XML and render to a PNG.

# Silent checks print a word on success, so `expect` has text to match.
alloc_xml_ok() { xmllint --noout "$1" && echo "well-formed"; }
alloc_png_ok() { rsvg-convert "$1" -o "$2" && head -c 8 "$2" | od -c | grep -q 'P   N   G' && echo "rendered"; }
alloc_svg_ok() { "$REMAT" alloc "$@" >/dev/null && echo "svg ok"; }

expect alloc_text 0 "logical peak     200.00 KiB (204800 B) at bwd:h1" -- "$REMAT" alloc graphs/mlp2.json
expect alloc_text_policies 0 "caching model assumptions:" -- "$REMAT" alloc graphs/mlp2.json
expect alloc_json_peak 0 '"logical_peak_bytes": 204800, "logical_peak_step": "bwd:h1"' -- \
    "$REMAT" alloc graphs/mlp2.json --json
# transformer4 under store-all: best fit leaves 525316 B of holes; the static
# plan reaches the logical peak.
expect alloc_best_fit 0 '{"policy": "best-fit", "high_water_bytes": 19168260' -- \
    "$REMAT" alloc graphs/transformer4.json --policy best-fit --json
expect alloc_fragmentation 0 '"fragmentation_bytes": 525316' -- \
    "$REMAT" alloc graphs/transformer4.json --policy best-fit --json
expect alloc_static_greedy 0 '"chosen": "greedy-size", "arena_bytes": 18642944, "lower_bound_bytes": 18642944' -- \
    "$REMAT" alloc graphs/transformer4.json --policy none --static greedy-size --json
expect alloc_static_only_text 0 "arena            17.78 MiB (18642944 B) by greedy-size" -- \
    "$REMAT" alloc graphs/transformer4.json --policy none
expect alloc_caching 0 '"policy": "caching", "high_water_bytes": 18874368' -- \
    "$REMAT" alloc graphs/transformer4.json --policy caching --static none --json
expect alloc_caching_assumption 0 "rounded up to a multiple of 512 B" -- \
    "$REMAT" alloc graphs/transformer4.json --policy caching
expect alloc_activation_only 0 '"categories": "activation"' -- \
    "$REMAT" alloc graphs/transformer4.json --activation-only --json

# A plan file: its offsets, and `remat alloc` on it.
"$REMAT" plan graphs/mlp2.json --strategy store-all -o "$T/alloc_sa.json" >/dev/null 2>&1
expect alloc_plan_offsets 0 '"offsets": {"arena_bytes": 204800, "lower_bound_bytes": 204800' -- cat "$T/alloc_sa.json"
expect alloc_plan_offsets_interval 0 \
    '{"tensor": "x", "grad": false, "category": "inputs", "instruction": -1, "free": null, "offset": 0,' -- \
    cat "$T/alloc_sa.json"
expect alloc_plan_replays 0 '"peak_bytes": 204800' -- "$REMAT" replay graphs/mlp2.json "$T/alloc_sa.json" --json
"$REMAT" plan graphs/transformer4.json --strategy sqrtn -o "$T/alloc_sq.json" >/dev/null 2>&1
expect alloc_with_plan 0 '"category": "recomputed"' -- cat "$T/alloc_sq.json"
expect alloc_with_plan_runs 0 "graph transformer4" -- "$REMAT" alloc graphs/transformer4.json "$T/alloc_sq.json"
grep -v '"FWD h1"' "$T/alloc_sa.json" >"$T/alloc_broken.json"
expect alloc_invalid_plan 1 "is not resident" -- "$REMAT" alloc graphs/mlp2.json "$T/alloc_broken.json"

# The address space as SVG: static plan (default) and a dynamic layout.
expect alloc_svg 0 "svg ok" -- alloc_svg_ok graphs/transformer4.json "$T/alloc_sq.json" --svg "$T/alloc.svg"
expect alloc_svg_xml 0 "well-formed" -- alloc_xml_ok "$T/alloc.svg"
expect alloc_svg_renders 0 "rendered" -- alloc_png_ok "$T/alloc.svg" "$T/alloc.png"
expect alloc_svg_title 0 "static plan (greedy-size)" -- cat "$T/alloc.svg"
expect alloc_svg_caching 0 "svg ok" -- alloc_svg_ok graphs/resnet8.json --svg "$T/alloc_c.svg" --svg-layout caching
expect alloc_svg_caching_renders 0 "rendered" -- alloc_png_ok "$T/alloc_c.svg" "$T/alloc_c.png"
expect alloc_svg_caching_title 0 "caching allocator, high-water" -- cat "$T/alloc_c.svg"

# Usage errors.
expect alloc_bad_policy 2 "--policy: 'worst-fit' is not one of" -- "$REMAT" alloc graphs/mlp2.json --policy worst-fit
expect alloc_bad_static 2 "--static: 'optimal' is not one of" -- "$REMAT" alloc graphs/mlp2.json --static optimal
expect alloc_bad_layout 2 "--svg-layout: 'x' is not one of" -- \
    "$REMAT" alloc graphs/mlp2.json --svg "$T/x.svg" --svg-layout x
expect alloc_nothing_to_draw 2 "nothing to draw" -- \
    "$REMAT" alloc graphs/mlp2.json --policy none --static none --svg "$T/x.svg"
expect alloc_bad_work 2 "--work: '0' is not a positive whole number" -- "$REMAT" alloc graphs/mlp2.json --work 0
expect alloc_no_graph 2 "expected GRAPH [PLAN]" -- "$REMAT" alloc
expect alloc_missing_graph 3 "nope.json" -- "$REMAT" alloc "$T/nope.json"
expect alloc_help 0 "caching allocator model" -- "$REMAT" alloc --help

# --budget-mode arena: hetchain12's store-all arena (48419846 B) is above its
# logical peak (47474524 B): a budget at the peak fits only logically.
expect arena_mode_refused 4 "in arena mode: the smallest static arena it reaches on this graph is 46.18 MiB (48419846 B)" -- \
    "$REMAT" plan graphs/hetchain12.json --strategy store-all --budget 47474524 --budget-mode arena
expect arena_mode_logical_fits 0 "budget (total) 45.28 MiB (47474524 B): met" -- \
    "$REMAT" plan graphs/hetchain12.json --strategy store-all --budget 47474524
expect arena_mode_fits 0 "arena       46.18 MiB (48419846 B) (static offset plan; the budget caps it)" -- \
    "$REMAT" plan graphs/hetchain12.json --strategy store-all --budget 48419846 --budget-mode arena
expect arena_mode_json 0 '"budget_mode": "arena", "arena_bytes": 48419846' -- \
    "$REMAT" plan graphs/hetchain12.json --strategy store-all --budget 48419846 --budget-mode arena --json
expect arena_mode_auto 0 "(static offset plan; the budget caps it)" -- \
    "$REMAT" plan graphs/hetchain12.json --budget 40MiB --budget-mode arena --time-limit 1
expect arena_mode_bad 2 "--budget-mode: 'peak' is not one of logical, arena" -- \
    "$REMAT" plan graphs/mlp2.json --budget 1MiB --budget-mode peak

# remat compare: every strategy's best-fit high-water and fragmentation.
expect compare_alloc_columns 0 "best-fit HW (B)" -- "$REMAT" compare graphs/mlp2.json --budget 1MiB --time-limit 1
expect compare_alloc_json 0 '"best_fit_high_water_bytes": 204800, "fragmentation_bytes": 0, "static_arena_bytes": 204800' -- \
    "$REMAT" compare graphs/mlp2.json --budget 1MiB --time-limit 1 --json
