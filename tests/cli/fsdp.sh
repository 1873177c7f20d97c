# fsdp.sh - PyTorch FSDP (--shard fsdp) and units by module (--fsdp-wrap,
# --fsdp-units) end to end. The figures are tests/check_fsdp.c's hand-worked
# case (tests/fixtures/fsdp/units3.json, Psi = 21 over 4 ranks): FULL_SHARD
# gathers 6 + 10 + 5 in forward, 10 + 6 again in backward (the root head is
# not freed after forward) and reduce-scatters 21: 58 elements, 116 B in
# bf16, of which a ring sends 3/4: 87 B; the rate limiter holds at most
# 40 B gathered.
FS=tests/fixtures/fsdp/units3.json
FO="--weights bf16 --grads bf16 --optimizer adam"
expect fsdp_comm_ring 0 "58 elements = 116 B per rank per step in 8 collectives (2.762 Psi); a ring sends (N-1)/N = 3/4 of it: 87 B" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-wrap depth:2 --fsdp-limit-all-gathers $FO
expect fsdp_units_line 0 "units       3, by module (--fsdp-units); root unit c" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-units blocks.0,blocks.1 --fsdp-limit-all-gathers $FO
expect fsdp_gathered_bound 0 "gathered_params                40 B at the peak; own max             40 B" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-wrap depth:2 --fsdp-limit-all-gathers $FO
expect fsdp_no_limiter 0 "own max             96 B" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-wrap depth:2 $FO
expect fsdp_grad_op 0 "42 elements = 84 B per rank per step" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-strategy grad-op --fsdp-wrap depth:2 --fsdp-limit-all-gathers $FO
expect fsdp_no_shard 0 "FSDP NO_SHARD over 4 ranks; 3 units, each one flat parameter kept whole" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-strategy none --fsdp-wrap depth:2 $FO
expect fsdp_ranks 0 "elements owned: 7 7 6 1" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-wrap depth:2 $FO
expect fsdp_plan 0 "budget (total) 420 B: met" -- \
    "$REMAT" plan "$FS" --dp 4 --shard fsdp --fsdp-wrap depth:2 --fsdp-limit-all-gathers $FO --budget 420
expect fsdp_trace 0 ",gathered_params,24," -- \
    sh -c "\"\$0\" trace $FS --dp 4 --shard fsdp --fsdp-wrap depth:2 --fsdp-limit-all-gathers --fsdp-backward-prefetch pre $FO --format csv -o $T/fsdp.csv && cat $T/fsdp.csv" "$REMAT"
expect fsdp_zero3_units 0 "units       3, by module (--fsdp-wrap); root unit c" -- \
    "$REMAT" replay "$FS" --dp 4 --zero 3 --fsdp-wrap depth:2 $FO
expect fsdp_bad_strategy 2 "--fsdp-strategy: 'bogus' is not one (use full, grad-op or none" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-strategy bogus $FO
expect fsdp_bad_prefetch 2 "--fsdp-backward-prefetch: 'early' is not one" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-backward-prefetch early $FO
expect fsdp_unknown_prefix 2 "--fsdp-units: no op that reads a param runs in module 'blocks.7' or below it (prefix 1)" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-units blocks.7 $FO
expect fsdp_empty_prefix 2 "--fsdp-units: prefix 2 is empty" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-units "blocks.0,,x" $FO
expect fsdp_bad_wrap 2 "--fsdp-wrap: 'level:2' is not a wrap policy" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-wrap level:2 $FO
expect fsdp_wrap_depth0 2 "--fsdp-wrap depth: 0 is out of range" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --fsdp-wrap depth:0 $FO
expect fsdp_no_modules 2 "--fsdp-wrap: the graph's ops carry no attrs.module" -- \
    "$REMAT" replay graphs/mlp2.json --dp 4 --shard fsdp --fsdp-wrap depth:2
expect fsdp_with_zero 2 "--shard fsdp shards by --fsdp-strategy: drop --zero 3" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --zero 3 $FO
expect fsdp_opts_without 2 "apply to --shard fsdp" -- \
    "$REMAT" replay "$FS" --dp 4 --fsdp-limit-all-gathers $FO
expect fsdp_needs_dp 2 "--shard fsdp needs --dp N with N >= 2" -- \
    "$REMAT" replay "$FS" --shard fsdp $FO
expect fsdp_not_ledger 2 "the --fsdp-* options apply to plan, replay, compare, trace and audit" -- \
    "$REMAT" ledger --graph "$FS" --fsdp-strategy full
printf '{"format": "remat-graph", "version": 1, "inputs": [{"id": "x", "bytes": 4}], "ops": [{"id": "a", "op": "relu", "inputs": ["x"], "bytes": 4, "flops": 1, "attrs": {"module": 3}}], "outputs": ["a"]}' >"$T/badmod.json"
expect fsdp_module_type 3 "ops[0].attrs.module: must be a string" -- \
    "$REMAT" replay "$T/badmod.json"
expect fsdp_ds_knob 2 "--stage3-max-reuse applies to --zero 3 only (not --zero 0)" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --stage3-max-reuse 10 $FO
expect fsdp_ds_sub_group 2 "--sub-group-size is DeepSpeed's" -- \
    "$REMAT" replay "$FS" --dp 4 --shard fsdp --sub-group-size 10 $FO
