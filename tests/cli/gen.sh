# gen.sh - `remat gen`: every family writes a graph that loads and analyzes,
# bad options exit 2 naming the option, the same seed gives the same file,
# and the bundled graphs are exactly what their graphs/README.md commands make.

# Silent commands print a word on success, so `expect` has text to match.
gen_ok() { "$REMAT" gen "$@" && echo "gen ok"; }
gen_same() { cmp "$1" "$2" && echo "identical"; }

# Every family, with defaults and with small explicit sizes.
for fam in chain layered resnet transformer unet; do
    expect "gen_${fam}_writes" 0 "gen ok" -- gen_ok "$fam" -o "$T/gen_$fam.json"
    expect "gen_${fam}_loads" 0 "graph $fam" -- "$REMAT" lifetimes "$T/gen_$fam.json"
done
expect gen_chain_random 0 "gen ok" -- gen_ok chain --ops 40 --random --seed 3 --param-every 4 -o "$T/g.json"
expect gen_chain_random_loads 0 "40 ops" -- "$REMAT" lifetimes "$T/g.json"
expect gen_chain_one_op 0 "gen ok" -- gen_ok chain --ops 1 -o "$T/g.json"
expect gen_chain_one_op_loads 0 "1 ops" -- "$REMAT" lifetimes "$T/g.json"
expect gen_layered_wide 0 "gen ok" -- gen_ok layered --width 7 --layers 5 --fan-in 7 -o "$T/g.json"
expect gen_layered_wide_loads 0 "36 ops" -- "$REMAT" lifetimes "$T/g.json"
expect gen_transformer_small 0 "gen ok" -- gen_ok transformer -s 16 -b 2 -h 32 -a 4 -L 3 --vocab 50 -o "$T/g.json"
expect gen_transformer_small_loads 0 "49 ops" -- "$REMAT" lifetimes "$T/g.json"
expect gen_unet_deep 0 "gen ok" -- gen_ok unet --depth 5 --size 32 -o "$T/g.json"
expect gen_unet_deep_loads 0 "61 ops" -- "$REMAT" lifetimes "$T/g.json"
expect gen_to_stdout 0 '"format": "remat-graph"' -- "$REMAT" gen resnet --blocks 1
expect gen_name 0 '"name": "mine"' -- "$REMAT" gen chain --name mine
expect gen_family_after_options 0 '"name": "chain5"' -- "$REMAT" gen --ops 5 chain
expect gen_big_bytes_as_string 0 '"bytes": "18014398509481984"' -- "$REMAT" gen chain --ops 2 --bytes 16PiB
expect gen_help 0 "ops = 15*layers + 4" -- "$REMAT" gen --help

# Same seed, same file; another seed, another file.
for fam in "chain --random" layered; do
    name=$(echo "$fam" | cut -d' ' -f1)
    "$REMAT" gen $fam --seed 11 -o "$T/s11a.json"
    "$REMAT" gen $fam --seed 11 -o "$T/s11b.json"
    "$REMAT" gen $fam --seed 12 -o "$T/s12.json"
    expect "gen_${name}_same_seed_same_file" 0 "identical" -- gen_same "$T/s11a.json" "$T/s11b.json"
    expect "gen_${name}_other_seed_other_file" 1 "differ" -- cmp "$T/s11a.json" "$T/s12.json"
done

# Bad options: exit 2 and name the option.
expect gen_no_family 2 "expected a FAMILY" -- "$REMAT" gen
expect gen_unknown_family 2 "unknown family 'frob'" -- "$REMAT" gen frob
expect gen_two_families 2 "unexpected argument 'unet'" -- "$REMAT" gen chain unet
expect gen_unknown_option 2 "'--frob'" -- "$REMAT" gen chain --frob
expect gen_missing_value 2 "'--ops' needs a value" -- "$REMAT" gen chain --ops
expect gen_zero_ops 2 "--ops: 0 is out of range" -- "$REMAT" gen chain --ops 0
expect gen_bad_count 2 "--ops: expected a positive integer, got '12x'" -- "$REMAT" gen chain --ops 12x
expect gen_negative_count 2 "--width: expected a positive integer" -- "$REMAT" gen layered --width -3
expect gen_too_many_ops 2 "--ops must be between 1 and 10000000 (got 20000000)" -- "$REMAT" gen chain --ops 20000000
expect gen_bad_bytes 2 "--bytes: unknown unit in '4Q'" -- "$REMAT" gen chain --bytes 4Q
expect gen_fractional_bytes 2 "--max-bytes: '1.5B' is not a whole number" -- "$REMAT" gen chain --max-bytes 1.5B
expect gen_bad_flops 2 "--flops: '2.5' is not a whole number" -- "$REMAT" gen chain --flops 2.5
expect gen_bad_seed 2 "--seed: expected an integer" -- "$REMAT" gen layered --seed x
expect gen_wrong_family_option 2 "--width does not apply to chain" -- "$REMAT" gen chain --width 3
expect gen_wrong_family_short 2 "--hidden does not apply to resnet" -- "$REMAT" gen resnet -h 64
expect gen_range_inverted 2 "--max-bytes (5) is below --bytes (10)" -- \
    "$REMAT" gen chain --random --bytes 10 --max-bytes 5
expect gen_fan_in_too_big 2 "--fan-in must be between 1 and --width (4)" -- \
    "$REMAT" gen layered --fan-in 5
expect gen_heads_divide 2 "-h/--hidden (100) must be a multiple of -a/--heads (3)" -- \
    "$REMAT" gen transformer -h 100 -a 3
expect gen_unet_size 2 "--size (12) must be a multiple of 2^--depth (8)" -- "$REMAT" gen unet --size 12
expect gen_overflow 2 "would exceed 2^64-1 bytes" -- "$REMAT" gen transformer -s 4000000000 -a 1
expect gen_unwritable 5 "cannot create" -- "$REMAT" gen chain -o "$T/no/such/dir/g.json"

# The bundled graphs are reproducible from the commands in graphs/README.md.
"$REMAT" gen chain --ops 16 -o "$T/chain16.json"
expect gen_bundled_chain16 0 "identical" -- gen_same "$T/chain16.json" graphs/chain16.json
"$REMAT" gen chain --ops 12 --random --seed 7 --bytes 256KiB --max-bytes 8MiB --flops 100000000 \
    --max-flops 4000000000 --name hetchain12 -o "$T/hetchain12.json"
expect gen_bundled_hetchain12 0 "identical" -- gen_same "$T/hetchain12.json" graphs/hetchain12.json
"$REMAT" gen resnet --blocks 3 --batch 32 --channels 16 --size 32 -o "$T/resnet8.json"
expect gen_bundled_resnet8 0 "identical" -- gen_same "$T/resnet8.json" graphs/resnet8.json
"$REMAT" gen transformer -L 4 -s 128 -b 2 -h 256 -a 4 --vocab 1024 -o "$T/transformer4.json"
expect gen_bundled_transformer4 0 "identical" -- gen_same "$T/transformer4.json" graphs/transformer4.json
"$REMAT" gen unet --depth 3 --batch 4 --channels 16 --size 64 -o "$T/unet3.json"
expect gen_bundled_unet3 0 "identical" -- gen_same "$T/unet3.json" graphs/unet3.json
for g in chain16 hetchain12 resnet8 transformer4 unet3 bnview; do
    expect "gen_bundled_${g}_loads" 0 "graph $g" -- "$REMAT" lifetimes "graphs/$g.json"
done
# --vocab-parallel: the embedding and head hold V/T rows (2 x 64 x 96 / 4 B),
# the logits V/T columns; T must divide V.
expect gen_vocab_parallel 0 '"id": "head_w", "bytes": 3072' -- "$REMAT" gen transformer -s 16 -b 3 -h 64 -a 8 -L 1 --vocab 96 --tp 4 --vocab-parallel
expect gen_vocab_parallel_ce 0 '"op": "vocab_parallel_cross_entropy"' -- "$REMAT" gen transformer -s 16 -b 3 -h 64 -a 8 -L 1 --vocab 96 --tp 4 --vocab-parallel
expect gen_vocab_parallel_divides 2 "--vocab-parallel: --tp 4 must divide --vocab (50)" -- "$REMAT" gen transformer -s 16 -b 3 -h 64 -a 8 -L 1 --vocab 50 --tp 4 --vocab-parallel
