# ledger.sh - `remat ledger`: the specification's worked numbers through the
# CLI, ZeRO against the paper's Figure 1, and bad options (exit 2) or bad
# graphs (exit 3) with messages that name the option or the param.
L="$REMAT ledger"
F64="--weights f64 --grads f64 --states f64 --optimizer adam"
expect ledger_help 0 "usage: remat ledger" -- $L --help
expect ledger_in_help 0 "ledger" -- "$REMAT" help

# 423 binary64 params (graphs/mlp423.json): 3384 B weights, 6768 B Adam
# moments, 13536 B with gradients; a frozen reference adds 3384 B.
expect ledger_mlp423_weights 0 '"weights": 3384,' -- $L --graph graphs/mlp423.json $F64 --json
expect ledger_mlp423_states 0 '"optimizer_state": 6768,' -- $L --graph graphs/mlp423.json $F64 --json
expect ledger_mlp423_total 0 '"total_bytes": 13536,' -- $L --graph graphs/mlp423.json $F64 --json
expect ledger_mlp423_elements 0 '"elements": {"weights": 423,' -- $L --graph graphs/mlp423.json $F64 --json
expect ledger_mlp423_frozen 0 '"frozen": 3384,' -- $L --graph graphs/mlp423.json $F64 --frozen-copies 1 --json
expect ledger_mlp423_frozen_total 0 '"total_bytes": 16920,' -- $L --graph graphs/mlp423.json $F64 --frozen-copies 1 --json
expect ledger_mlp423_defaults 0 '"total_bytes": 13536,' -- $L --graph graphs/mlp423.json --json
expect ledger_mlp423_text 0 "total                                                                 13536" -- $L --graph graphs/mlp423.json
expect ledger_text_units 0 "GiB (2^30)      GB (10^9)" -- $L --graph graphs/mlp423.json
expect ledger_text_assumptions 0 "optimizer adam: 2 states" -- $L --graph graphs/mlp423.json
expect ledger_text_excluded 0 "activations, activation gradients" -- $L --graph graphs/mlp423.json
expect ledger_count_423 0 '"total_bytes": 13536,' -- $L --params 423 $F64 --json

# 10^9 params: bf16 weights and gradients, two f32 Adam states = 12e9 B; an
# f32 master copy adds 4e9 B.
MIXED="--weights bf16 --grads bf16 --states f32"
expect ledger_1e9 0 '"total_bytes": 12000000000,' -- $L --params 1B $MIXED --json
expect ledger_1e9_exp 0 '"total_bytes": 12000000000,' -- $L --params 1e9 $MIXED --json
expect ledger_1e9_master 0 '"total_bytes": 16000000000,' -- $L --params 1000000000 $MIXED --master f32 --json
expect ledger_1e9_master_line 0 '"master_weights": 4000000000,' -- $L --params 1B $MIXED --master fp32 --json

# ZeRO, Rajbhandari et al. 2019 Figure 1: 7.5B params on 64 devices, K = 12.
Z="--params 7.5B $MIXED --master f32 --dp 64"
expect ledger_zero0 0 '"total_bytes": 120000000000,' -- $L $Z --zero 0 --json
expect ledger_zero1 0 '"total_bytes": 31406250000,' -- $L $Z --zero 1 --json
expect ledger_zero2 0 '"total_bytes": 16640625000,' -- $L $Z --zero 2 --json
expect ledger_zero3 0 '"total_bytes": 1875000000,' -- $L $Z --zero 3 --json
expect ledger_zero2_comm 0 '"elements_per_step": 15000000000, "bytes_per_step": 30000000000' -- $L $Z --zero 2 --json
expect ledger_zero3_comm 0 '"elements_per_step": 22500000000,' -- $L $Z --zero 3 --json
# 423 on 4 devices: ceil(423/4) = 106 elements per shard.
expect ledger_zero_round 0 '"gradients": 106,' -- $L --params 423 --zero 2 --dp 4 --json

# Optimizers.
expect ledger_adam8bit 0 '"optimizer_state": 10024,' -- $L --params 5000 --optimizer adam8bit --json
expect ledger_adam8bit_block 0 '"optimizer_state": 10632,' -- $L --params 5000 --optimizer adam8bit --block 64 --json
expect ledger_adafactor_graph 0 '"optimizer_state": 904,' -- $L --graph graphs/mlp423.json --optimizer adafactor --json
expect ledger_sgd 0 '"optimizer_state": 0,' -- $L --params 10 --optimizer SGD --json
expect ledger_buffers 0 '"comm_buffers": 50000000,' -- $L --params 1B --dp 8 --bucket 25MB --prefetch 1 --json
expect ledger_workspace 0 '"workspace": 1048576, "fragmentation_reserve": 2000000000}' -- $L --params 1B --workspace 1MiB --reserve 2GB --json
expect ledger_tf32 0 "tf32 arrays are stored as 4-byte f32" -- $L --params 10 --weights tf32
$L --graph graphs/mlp423.json --json -o "$T/ledger.json"
expect ledger_output_file 0 '"total_bytes": 13536' -- cat "$T/ledger.json"

# Bad options: exit 2, naming the option.
expect ledger_bad_dtype 2 "--weights: unknown dtype 'fp12'" -- $L --params 10 --weights fp12
expect ledger_bad_optimizer 2 "--optimizer: unknown optimizer 'adagrad'" -- $L --params 10 --optimizer adagrad
expect ledger_zero3_no_dp 2 "give their number with --dp N" -- $L --params 10 --zero 3
expect ledger_dp0 2 "--dp: the data-parallel degree must be at least 1" -- $L --params 10 --dp 0
expect ledger_zero5 2 "--zero: stage 5 does not exist" -- $L --params 10 --zero 5 --dp 2
expect ledger_dp_junk 2 "--dp: '8x' is not a non-negative integer" -- $L --params 10 --dp 8x
expect ledger_params0 2 "--params: the parameter count must be at least 1" -- $L --params 0
expect ledger_params_frac 2 "not a whole number" -- $L --params 1.5
expect ledger_params_bytes 2 "unknown suffix" -- $L --params 7GB
expect ledger_overflow_count 2 "exceeds 2^64-1" -- $L --params 20e18
expect ledger_overflow_bytes 2 "weights (--weights)" -- $L --params 18446744073709551615 --weights f64
expect ledger_overflow_copies 2 "--frozen-copies" -- $L --params 1T --frozen-copies 100000000000
expect ledger_both 2 "exactly one of --params N and --graph GRAPH" -- $L --params 10 --graph graphs/mlp423.json
expect ledger_neither 2 "exactly one of --params N and --graph GRAPH" -- $L --json
expect ledger_adafactor_count 2 "cannot factor without shapes" -- $L --params 1B --optimizer adafactor
expect ledger_block_wrong_opt 2 "--block applies to --optimizer adam8bit only" -- $L --params 10 --block 64
expect ledger_adam8bit_states 2 "adam8bit stores one-byte states" -- $L --params 10 --optimizer adam8bit --states f32
expect ledger_prefetch_no_bucket 2 "--prefetch counts buckets" -- $L --params 10 --prefetch 2
expect ledger_bad_bucket 2 "--bucket: unknown unit" -- $L --params 10 --bucket 12parsecs
expect ledger_extra_arg 2 "unexpected argument 'x'" -- $L --params 10 x

# Bad graphs: exit 3, naming the file and the param.
expect ledger_missing_graph 3 "cannot open" -- $L --graph "$T/nope.json"
cat >"$T/badparam.json" <<'JSON'
{"format": "remat-graph", "version": 1, "name": "bad",
 "inputs": [{"id": "x", "bytes": 8}],
 "params": [{"id": "w", "bytes": 100, "dtype": "f64", "shape": [2, 3]}],
 "ops": [{"id": "loss", "op": "f", "inputs": ["x", "w"], "bytes": 8, "flops": 1}],
 "outputs": ["loss"]}
JSON
expect ledger_bad_param 3 "badparam.json: param 'w': bytes 100 do not match its shape" -- $L --graph "$T/badparam.json"
sed 's/"dtype": "f64", "shape": \[2, 3\]/"dtype": "f64"/; s/"bytes": 100/"bytes": 48/' "$T/badparam.json" >"$T/noshape.json"
expect ledger_adafactor_noshape 3 "param 'w' has no shape" -- $L --graph "$T/noshape.json" --optimizer adafactor
expect ledger_comm_dtype 0 '"bytes_per_step": 8000, "dtype": "f32"' -- $L --params 1000 --weights bf16 --dp 2 --comm f32 --json
expect ledger_bucket_elements 0 '"comm_buffers": 800,' -- $L --params 1000 --weights bf16 --dp 2 --bucket-elements 200 --prefetch 1 --json
# The library's notes name its config fields ("`master` f32 adds ..."); the
# command tells them in its flags, in text and JSON alike.
expect ledger_notes_in_flags 0 "no master weights (--master f32 adds a mixed-precision master copy)" -- $L --params 10
expect ledger_excluded_in_flags 0 "not modelled (give --bucket and --prefetch)" -- $L --params 10
expect ledger_source_in_flags 0 '{"source": "--params 10",' -- $L --params 10 --json
expect ledger_adafactor_in_flags 2 "a bare --params count has none (use --graph with param shapes)" -- $L --params 1B --optimizer adafactor
expect ledger_bucket_elements_overflow 2 "--bucket-elements" -- $L --params 10 --dp 2 --bucket-elements 18446744073709551615 --weights f64
