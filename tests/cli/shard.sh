# shard.sh - sharded data parallel in the planning commands (--dp N with
# --zero 0..3): one rank's plan, replay and comparison, its collectives and
# their volume (graphs/README.md, "Sharded data parallel").
#
# The graph: a generated 2-layer transformer in bf16, Psi = 2099712
# trainable elements (remat ledger --graph counts them); mixed-precision
# Adam keeps 2 + 2 + 12 bytes per element (Rajbhandari et al. 2020,
# Figure 1: 16 Psi = 33595392 B unsharded), so no plan fits 12 MiB per
# device without sharding, and ZeRO 3 over 8 ranks divides the 16 Psi by 8.
"$REMAT" gen transformer -s 128 -b 2 -h 256 -a 4 -L 2 --vocab 1024 -o "$T/z.json" >/dev/null 2>&1
ZO="--weights bf16 --optimizer adam --master f32 --states f32"
expect shard_z3_plan 0 'budget (total) 12.00 MiB (12582912 B): met' -- "$REMAT" plan "$T/z.json" --dp 8 --zero 3 --budget 12MiB --strategy chen-greedy $ZO
expect shard_z0_plan 4 'cannot meet the total budget of 12.00 MiB' -- "$REMAT" plan "$T/z.json" --dp 8 --zero 0 --budget 12MiB --strategy chen-greedy $ZO
expect shard_z3_plan_file 0 'plan written to' -- "$REMAT" plan "$T/z.json" --dp 8 --zero 3 --budget 12MiB --strategy chen-greedy $ZO -o "$T/z3.plan"
# The same plan replays under another sharding: the file keeps the compute
# schedule and replay inserts that sharding's collectives.
expect shard_replay_other 0 'ZeRO 1: optimizer state sharded over 8 ranks' -- "$REMAT" replay "$T/z.json" "$T/z3.plan" --dp 8 --zero 1 $ZO
# Section 7: 3 Psi = 6299136 elements for ZeRO 3 under store-all, 2 Psi =
# 4199424 for DDP and ZeRO 1/2; bf16 makes the bytes twice that, and a ring
# over 8 ranks sends 7/8 of it (12598272 x 7/8 = 11023488 B).
expect shard_comm_z3 0 'comm        6299136 elements = 12598272 B per rank per step' -- "$REMAT" replay "$T/z.json" --dp 8 --zero 3 $ZO
expect shard_ring_z3 0 '(N-1)/N = 7/8 of it: 11023488 B' -- "$REMAT" replay "$T/z.json" --dp 8 --zero 3 $ZO
expect shard_comm_ddp 0 'comm        4199424 elements = 8398848 B' -- "$REMAT" replay "$T/z.json" --dp 8 --zero 0 $ZO
expect shard_comm_z2 0 'comm        4199424 elements = 8398848 B' -- "$REMAT" replay "$T/z.json" --dp 8 --zero 2 $ZO
# Each rank owns Psi / 8 = 262464 elements of the flat partition.
expect shard_ranks 0 'elements owned: 262464 262464 262464 262464 262464 262464 262464 262464' -- "$REMAT" replay "$T/z.json" --dp 8 --zero 2 $ZO
# compare judges every strategy on the same rank: store-all's 14573568 B
# (14048640 B of state and activations at bwd:logits plus the ZeRO 3
# gradient partition, Psi / 8 in bf16 = 524928 B, which DeepSpeed allocates
# when the engine starts) does not fit 12 MiB (12582912 B), chen-greedy's
# plan does.
expect shard_compare 0 '{"strategy": "chen-greedy", "feasible": true' -- "$REMAT" compare "$T/z.json" --dp 8 --zero 3 --budget 12MiB --json $ZO
expect shard_compare_store_all 0 '{"strategy": "store-all", "feasible": false, "peak_bytes": 14573568' -- "$REMAT" compare "$T/z.json" --dp 8 --zero 3 --budget 12MiB --json $ZO
expect shard_prefetch_stage 2 '--stage3-prefetch applies to --zero 3 only (not --zero 2)' -- "$REMAT" plan "$T/z.json" --dp 8 --zero 2 --stage3-prefetch 1000 $ZO
expect shard_prefetch_bad 2 '--stage3-prefetch' -- "$REMAT" plan "$T/z.json" --dp 8 --zero 3 --stage3-prefetch 1x $ZO
# Figure 1 at the optimizer step, ZeRO 3 over 8 ranks: 2 Psi / 8 weights and
# gradients (524928 B each), 8 Psi / 8 Adam moments (2099712 B), 4 Psi / 8
# master copy (1049856 B): 16 Psi / 8 = 4199424 B in all.
expect shard_at_opt_json 0 '"at_optimizer": {"params": 524928, "param_grads": 524928, "optimizer_state": 2099712, "master_weights": 1049856,' -- "$REMAT" replay "$T/z.json" --dp 8 --zero 3 --json $ZO
# 15 params, each first read by its own op: 15 units gathered in forward
# and again in backward, and one bucket (5e8 elements holds all of Psi).
expect shard_comm_json 0 '"communication": {"collectives": 31, "elements": 6299136, "bytes": 12598272}' -- "$REMAT" replay "$T/z.json" --dp 8 --zero 3 --json $ZO
