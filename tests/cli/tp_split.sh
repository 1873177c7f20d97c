# tp_split.sh - `remat tp-split`: one rank of Megatron tensor parallelism from
# the exported GPT and its partition (graphs/partitions/gpt4-b4.tp.json). The figures
# are worked by hand in tests/check_tp_split.c: per layer the rank saves
# sbh(24 + 48/t + 12as/(ht)) + 16sb + 8 B (s = 128, b = 4, h = 128, a = 4),
# so 4 layers at t = 2 save 4 x 3145728 B less than at t = 1, and the
# replayed activations fall from 34377760 B to 21794848 B at the peak.
TPG=graphs/gpt4-b4.json
TPP=graphs/partitions/gpt4-b4.tp.json
expect tp_split_help 0 "remat-tp-partition" -- "$REMAT" tp-split --help
expect tp_split_in_help 0 "tp-split" -- "$REMAT" help
expect tp_split_two 0 "8 column- and 8 row-parallel linears, 168 ops doing 1/2 of their work, 168 activations and 24 params split (3160064 B of params -> 1580032 B), 16 collectives inserted -> graph 'gpt4-b4-tp2': 266 ops" -- "$REMAT" tp-split "$TPG" --tp 2 --partition "$TPP" -o "$T/gpt-tp2.json"
expect tp_split_two_replays 0 "activations              21794848 B at the peak" -- "$REMAT" replay "$T/gpt-tp2.json"
expect tp_split_one_replays 0 "activations              34377760 B at the peak" -- sh -c "\"$REMAT\" tp-split $TPG --tp 1 --partition $TPP -o \"$T/gpt-tp1.json\" >/dev/null && \"$REMAT\" replay \"$T/gpt-tp1.json\""
expect tp_split_f 0 '{"id":"view7_tp","op":"tp_copy","inputs":["view7"],"alias_of":"view7"' -- cat "$T/gpt-tp2.json"
expect tp_split_g 0 '"id":"view45","op":"view","inputs":["addmm44_ar"]' -- cat "$T/gpt-tp2.json"
expect tp_split_plans 0 "valid" -- "$REMAT" plan "$T/gpt-tp2.json" --strategy auto --activation-budget 12MiB
expect tp_split_no_tp 2 "--tp T is required" -- "$REMAT" tp-split "$TPG" --partition "$TPP"
expect tp_split_no_partition 2 "--partition FILE is required" -- "$REMAT" tp-split "$TPG" --tp 2
expect tp_split_bad_tp 2 "--tp" -- "$REMAT" tp-split "$TPG" --tp 0 --partition "$TPP"
expect tp_split_indivisible 3 "tensor 'split10' has 262144 bytes, which --tp 3 does not divide" -- "$REMAT" tp-split "$TPG" --tp 3 --partition "$TPP" -o "$T/never-tp.json"
expect tp_split_writes_nothing 0 "absent" -- sh -c "test -e \"$T/never-tp.json\" || echo absent"
printf '{"format": "remat-tp-partition", "version": 1, "column": ["blocks.*.attn.qkv"], "row": ["blocks.*.fc2"]}' >"$T/open.tp.json"
expect tp_split_open_region 3 "op 'add50' reads a split tensor and the whole tensor 'mul5' of its own size" -- "$REMAT" tp-split "$TPG" --tp 2 --partition "$T/open.tp.json"
expect tp_split_missing_partition 3 "cannot open" -- "$REMAT" tp-split "$TPG" --tp 2 --partition "$T/nope.json"
