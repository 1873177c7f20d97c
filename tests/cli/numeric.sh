# numeric.sh - `remat replay --numeric`: real buffers, recomputations checked
# bit for bit, the parameter-gradient hash equal across plans, the allocator's
# peak equal to the accounted one (scaled), and the option errors.
expect numeric_text 0 "0 recomputed tensors checked, 0 mismatches (verified)" -- \
    "$REMAT" replay --numeric graphs/mlp2.json
expect numeric_json 0 '"allocator_peak_bytes": 204800, "accounted_peak_bytes_scaled": 204800, "equal": true' -- \
    "$REMAT" replay --numeric --json graphs/mlp2.json
expect numeric_json_keeps_accounting 0 '"peak_bytes": 204800' -- "$REMAT" replay --numeric --json graphs/mlp2.json
# 4096 -> 586 and 65536 -> 9363 bytes: x + w1 + w2 + h1's and w1's gradients at bwd:h1.
expect numeric_scale_7 0 '"allocator_peak_bytes": 29261, "accounted_peak_bytes_scaled": 29261, "equal": true' -- \
    "$REMAT" replay --numeric --scale 7 --json graphs/mlp2.json
expect numeric_scale_equals_form 0 '"scale": 3' -- "$REMAT" replay --numeric --scale=3 --json graphs/mlp423.json
expect numeric_help 0 "--numeric [--scale K]" -- "$REMAT" replay --help
expect numeric_scale_without_numeric 2 "--scale applies to --numeric only" -- \
    "$REMAT" replay --scale 7 graphs/mlp2.json
expect numeric_scale_zero 2 "--scale: 0 is out of range (1 to" -- "$REMAT" replay --numeric --scale 0 graphs/mlp2.json
expect numeric_scale_text 2 "--scale: '1KiB' is not a whole number" -- \
    "$REMAT" replay --numeric --scale 1KiB graphs/mlp2.json
expect numeric_scale_overflow 2 "is out of range (1 to 18446744073709551615)" -- \
    "$REMAT" replay --numeric --scale 99999999999999999999999 graphs/mlp2.json

# A plan that recomputes a1 (and its view v1) before bwd:h2: the graph's
# fingerprint comes from a plan that `remat plan` writes, the schedule is ours.
"$REMAT" plan graphs/mlp2.json --strategy store-all -o "$T/base.json" >/dev/null 2>&1
fp=$(sed -n 's/.*"fingerprint": "\([0-9a-f]*\)".*/\1/p' "$T/base.json")
plan_with() {
    printf '{"format": "remat-plan", "version": 1, "graph": {"name": "mlp2", "fingerprint": "%s"},\n' "$fp"
    printf ' "strategy": "hand", "keep": ["h1"], "schedule": [%s]}\n' "$1"
}
plan_with '"FWD h1", "FWD a1", "FWD v1", "FWD h2", "FREE v1", "FREE a1", "FWD loss", "FREE h2", "FREE loss",
  "BWD loss", "RECOMPUTE a1", "RECOMPUTE v1", "BWD h2", "FREE v1", "BWD v1", "BWD a1", "FREE a1", "FREE h1",
  "BWD h1", "OPT"' >"$T/recompute.json"
hash=$("$REMAT" replay --numeric --json graphs/mlp2.json | sed -n 's/.*"param_grad_hash": "\([0-9a-f]*\)".*/\1/p')
expect numeric_store_all_hash 0 "64" -- sh -c "printf %s '$hash' | wc -c"
expect numeric_plan_checks_recompute 0 '"recomputed_tensors_checked": 1, "mismatches": 0' -- \
    "$REMAT" replay --numeric --json graphs/mlp2.json "$T/recompute.json"
expect numeric_plan_same_hash 0 "\"param_grad_hash\": \"$hash\"" -- \
    "$REMAT" replay --numeric --json graphs/mlp2.json "$T/recompute.json"
expect numeric_plan_counts 0 '"recompute_counts": {"a1": 1, "v1": 1}' -- \
    "$REMAT" replay --numeric --json graphs/mlp2.json "$T/recompute.json"
plan_with '"FWD h1", "FWD a1", "FWD v1", "FWD h2", "FREE v1", "FREE a1", "FWD loss", "FREE h2", "FREE loss",
  "BWD loss", "BWD h2"' >"$T/broken.json"
expect numeric_invalid_plan 1 "saved tensor 'v1' is not resident" -- \
    "$REMAT" replay --numeric graphs/mlp2.json "$T/broken.json"
expect numeric_invalid_plan_json 1 '"valid": false' -- \
    "$REMAT" replay --numeric --json graphs/mlp2.json "$T/broken.json"
"$REMAT" replay --numeric --json -o "$T/n.json" graphs/mlp2.json "$T/recompute.json"
expect numeric_output_file 0 '"numeric": {"scale": 1' -- cat "$T/n.json"

# A buffer that cannot be allocated is an error naming the tensor (exit 5);
# --scale makes the same graph run. (ASan would abort on the huge request
# instead of returning NULL; the option is ignored by other builds.)
printf '%s\n' '{"format": "remat-graph", "version": 1, "name": "huge",' \
    ' "inputs": [{"id": "x", "bytes": 1125899906842624}], "params": [{"id": "w", "bytes": 1024}],' \
    ' "ops": [{"id": "loss", "op": "dot", "inputs": ["x", "w"], "bytes": 8, "flops": 1}], "outputs": ["loss"]}' >"$T/huge.json"
expect numeric_out_of_memory 5 "cannot allocate 1125899906842624 B for input 'x'" -- \
    env ASAN_OPTIONS=allocator_may_return_null=1 "$REMAT" replay --numeric "$T/huge.json"
expect numeric_huge_scaled 0 "(verified)" -- "$REMAT" replay --numeric --scale 1099511627776 "$T/huge.json"
