# deepspeed.sh - DeepSpeed ZeRO as the engine runs it, from its JSON config
# (--deepspeed-config) and the flags that mirror its keys: padding,
# persistence, offload, the reduce buffer, and bad configs refused with the
# key's path (graphs/README.md, "DeepSpeed").
#
# The graph: shard.sh's 2-layer transformer in bf16 (Psi = 2099712, 15
# params; its five layer norms hold 512 elements each, every other param
# at least 65536; every param divides by 8).
"$REMAT" gen transformer -s 128 -b 2 -h 256 -a 4 -L 2 --vocab 1024 -o "$T/ds.json" >/dev/null 2>&1
F=tests/fixtures/deepspeed
# z3_bf16.json: stage 3, bf16, AdamW, persistence threshold 1e4 (the five
# layer norms, 2560 elements), reduce_bucket_size 5e5. By hand per rank of
# 8: weights Psi/8 = 262464 partition elements + the persistent params'
# gathered wholes 2560 = 265024 elements = 530048 B; gradients 524928 B;
# AdamW f32 2 x 262464 x 4 = 2099712 B; the fp32 master 1049856 B; the
# reduce buffer 5e5 x 2 B = 1000000 B (DeepSpeed allocates it whole):
# 5204544 B. Communication 3 Psi - 2560 = 6296576 elements (the persistent
# params are gathered once, after the step, not twice).
expect ds_z3_ledger 0 '"total_bytes": 5204544,' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/z3_bf16.json --json
expect ds_z3_weights 0 '"weights": 530048, "gradients": 524928, "optimizer_state": 2099712, "master_weights": 1049856' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/z3_bf16.json --json
expect ds_z3_comm 0 '"elements_per_step": 6296576,' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/z3_bf16.json --json
# The replay of the same rank holds the same state at the optimizer step.
expect ds_z3_replay 0 '"at_optimizer": {"params": 530048, "param_grads": 524928, "optimizer_state": 2099712, "master_weights": 1049856, "frozen": 0, "inputs": 4096, "activations": 0, "recomputed": 0, "activation_grads": 0, "workspace": 0, "comm_buffers": 1000000' -- "$REMAT" replay "$T/ds.json" --dp 8 --deepspeed-config $F/z3_bf16.json --json
expect ds_z3_replay_comm 0 'comm        6296576 elements' -- "$REMAT" replay "$T/ds.json" --dp 8 --deepspeed-config $F/z3_bf16.json
# Flags win over the file: --stage3-persistence 0 partitions every param
# again (262464 elements = 524928 B, 3 Psi = 6299136); --zero 2 makes it a
# stage 2 rank (whole weights 4199424 B).
expect ds_flag_persist 0 '"weights": 524928,' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/z3_bf16.json --stage3-persistence 0 --json
expect ds_flag_zero 0 '"zero_stage": 2,' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --zero 2 --deepspeed-config $F/z3_bf16.json --json
expect ds_flag_zero_w 0 '"weights": 4199424,' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/z3_bf16.json --zero 2 --json
# z2_offload.json: stage 2, bf16, Adam, offload_optimizer cpu, overlap_comm
# with reduce_bucket_size 2e5. By hand: the partition is 2 ceil(Psi / 16) =
# 262464; the device keeps the whole bf16 weights (4199424 B) and two reduce
# buffers (2 x 2e5 x 2 B = 800000 B): 4999424 B; the host keeps Adam (2 x
# 262464 x 4), the master and the fp32 gradient partition (262464 x 4
# each): 4199424 B; per step the gradient partition goes down in f32 and
# the weights come up in bf16: 524928 elements, 1574784 B.
expect ds_z2_total 0 '"total_bytes": 4999424,' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/z2_offload.json --json
expect ds_z2_host 0 '"host": {"elements": 1049856, "bytes": 4199424, "step_tensors": 1},' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/z2_offload.json --json
expect ds_z2_offload 0 '"offload": {"elements_per_step": 524928, "bytes_per_step": 1574784},' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/z2_offload.json --json
expect ds_z2_replay 0 '524928 elements = 1574784 B cross PCIe per step' -- "$REMAT" replay "$T/ds.json" --dp 8 --deepspeed-config $F/z2_offload.json
expect ds_z2_plan 0 'budget (total) 12.00 MiB (12582912 B): met' -- "$REMAT" plan "$T/ds.json" --dp 8 --deepspeed-config $F/z2_offload.json --budget 12MiB
expect ds_z2_compare 0 '"strategy": "store-all", "feasible": true' -- "$REMAT" compare "$T/ds.json" --dp 8 --deepspeed-config $F/z2_offload.json --budget 12MiB --json
# Bad configs: the file and the key's path, exit 3.
expect ds_bad_key 3 'bad_key.json: zero_optimization.stage3_prefetch_bucket: unknown key' -- "$REMAT" replay "$T/ds.json" --dp 8 --deepspeed-config $F/bad_key.json
expect ds_bad_nvme 3 'zero_optimization.offload_optimizer.device: NVMe offload (ZeRO-Infinity) is not modelled' -- "$REMAT" plan "$T/ds.json" --dp 8 --deepspeed-config $F/bad_nvme.json
expect ds_bad_auto 3 'zero_optimization.reduce_bucket_size: "auto" is filled in by the Hugging Face Trainer' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config $F/bad_auto.json
expect ds_bad_syntax 3 'bad_syntax.json:1:36: not valid JSON' -- "$REMAT" compare "$T/ds.json" --dp 8 --budget 12MiB --deepspeed-config $F/bad_syntax.json
expect ds_bad_stage 3 'zero_optimization.stage: stage 4 does not exist' -- "$REMAT" ledger --params 1B --dp 8 --deepspeed-config $F/bad_stage.json
expect ds_missing 3 'cannot open' -- "$REMAT" ledger --params 1B --deepspeed-config "$T/none.json"
# The world size is not in the file: stage 3 without --dp is a usage error.
expect ds_no_dp 2 'give their number with --dp N' -- "$REMAT" replay "$T/ds.json" --deepspeed-config $F/z3_bf16.json
# The flags that mirror the keys.
expect ds_offload_z0 2 'offload_optimizer: DeepSpeed offloads the optimizer of ZeRO stages 1-3 only' -- "$REMAT" ledger --params 1B --offload-optimizer
expect ds_persist_stage 2 '--stage3-persistence applies to --zero 3 only (not --zero 2)' -- "$REMAT" ledger --params 1B --zero 2 --dp 8 --stage3-persistence 10
expect ds_adam_step_bad 2 "--adam-step: 'gpu' is not host, device or none" -- "$REMAT" ledger --params 1B --adam-step gpu
# Adam's step counters: one per param without ZeRO, on the host by default
# (PyTorch 1.13, capturable=False): 15 x 4 B; --adam-step device puts them in
# the optimizer state instead (the graph gives no dtype, so f32 states:
# 2 x 2099712 x 4 B + 60 B).
expect ds_step_host 0 '"host": {"elements": 15, "bytes": 60, "step_tensors": 15},' -- "$REMAT" ledger --graph "$T/ds.json" --json
expect ds_step_device 0 '"optimizer_state": 16797756,' -- "$REMAT" ledger --graph "$T/ds.json" --adam-step device --json
# trace and audit take the same options: the rank's collectives are steps,
# gathered units, the gradient partition and the flat group's padding
# intervals of their own ("why": "sharding"). Store-all at ZeRO 3 over 8
# ranks peaks at 14573568 B in the replay (shard.sh); the trace and the
# audit of the same rank say the same, and each unit's gather is closed by
# its own RELEASE (the embedding's is gathered first, by step 0).
ZO="--weights bf16 --optimizer adam --master f32 --states f32"
expect ds_audit_dp 0 'store-all: 174 steps, peak 13.90 MiB (14573568 B)' -- "$REMAT" audit "$T/ds.json" --dp 8 --zero 3 $ZO
expect ds_audit_gathered 0 'gathered_params           4199424 B' -- "$REMAT" audit "$T/ds.json" --dp 8 --zero 3 $ZO
expect ds_trace_steps 0 '"instruction": "ALLGATHER embed"' -- sh -c "'$REMAT' trace '$T/ds.json' --dp 8 --zero 3 $ZO -o '$T/ds-trace.json' --format json && cat '$T/ds-trace.json'"
expect ds_trace_by 0 '"why": "sharding", "by": "allgather:embed"' -- cat "$T/ds-trace.json"
expect ds_trace_peak 0 '"peak": {"bytes": 14573568,' -- cat "$T/ds-trace.json"
expect ds_trace_csv 0 'sharding:param_grads' -- "$REMAT" trace "$T/ds.json" --dp 8 --zero 2 $ZO --format csv
expect ds_trace_cfg 0 '"instruction": "RELEASE embed"' -- "$REMAT" trace "$T/ds.json" --dp 8 --deepspeed-config $F/z3_bf16.json --format json
expect ds_trace_bad 3 'unknown key' -- "$REMAT" trace "$T/ds.json" --dp 8 --deepspeed-config $F/bad_key.json --format json
# plan --write-deepspeed-config: the file again with what remat planned.
# chen-greedy at 12 MiB cuts the transformer once and keeps its last
# segment (its params say "cuts": 1, "last_segment": "kept"), so one
# segment is recomputed: one function to checkpoint, embed..l0_ctx. The
# written file reads back to the same rank (5204544 B, as from the input).
expect ds_write_plan 0 'activation_checkpointing.number_checkpoints = 1' -- "$REMAT" plan "$T/ds.json" --dp 8 --budget 12MiB --strategy chen-greedy $ZO --deepspeed-config $F/z3_bf16.json --write-deepspeed-config "$T/ds-out.json"
expect ds_write_ops 0 'deepspeed.checkpointing.checkpoint: embed..l0_ctx' -- "$REMAT" plan "$T/ds.json" --dp 8 --budget 12MiB --strategy chen-greedy $ZO --deepspeed-config $F/z3_bf16.json --write-deepspeed-config "$T/ds-out.json"
expect ds_write_file 0 '"number_checkpoints":	1' -- cat "$T/ds-out.json"
expect ds_write_keeps 0 '"weight_decay":	0.01' -- cat "$T/ds-out.json"
expect ds_write_reads 0 '"total_bytes": 5204544,' -- "$REMAT" ledger --graph "$T/ds.json" --dp 8 --deepspeed-config "$T/ds-out.json" --json
expect ds_write_none 0 'the plan recomputes nothing' -- "$REMAT" plan "$T/ds.json" --dp 8 --strategy store-all --deepspeed-config $F/z3_bf16.json --write-deepspeed-config "$T/ds-out2.json"
expect ds_write_null 0 '"number_checkpoints":	null' -- cat "$T/ds-out2.json"
# Revolve with 4 slots on 16 blocks replays t1 twice: no checkpoint
# wrapping says that.
echo '{"zero_optimization": {"stage": 0}}' >"$T/z0.json"
expect ds_write_multi 0 'not expressible: op t1 is recomputed 2 times' -- "$REMAT" plan graphs/chain16.json --strategy revolve --activation-budget 6MiB --deepspeed-config "$T/z0.json" --write-deepspeed-config "$T/ds-out3.json"
expect ds_write_needs 2 '--write-deepspeed-config rewrites a config: give it with --deepspeed-config' -- "$REMAT" plan "$T/ds.json" --write-deepspeed-config "$T/x.json"
expect ds_write_plan_only 2 '--write-deepspeed-config applies to remat plan only' -- "$REMAT" replay "$T/ds.json" --deepspeed-config $F/z3_bf16.json --dp 8 --write-deepspeed-config "$T/x.json"
# stage3_max_reuse_distance (tests/check_deepspeed.c works it by hand): the
# flag, the config key, and DeepSpeed's default of 1e9 for a file without
# it all reach the builder. On units3 (Psi = 21, 4 ranks) with no prefetch,
# any distance above the model keeps every unit gathered from forward into
# backward: 2 Psi = 42 elements, where 0 (no file) moves 3 Psi = 63.
expect ds_max_reuse_flag 0 "42 elements = 84 B per rank per step" -- \
    "$REMAT" replay tests/fixtures/fsdp/units3.json --dp 4 --zero 3 --weights bf16 --grads bf16 --stage3-prefetch 0 --stage3-max-reuse 1000
printf '{"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 1000}}' >"$T/reuse.json"
expect ds_max_reuse_config 0 "42 elements = 84 B per rank per step" -- \
    "$REMAT" replay tests/fixtures/fsdp/units3.json --dp 4 --deepspeed-config "$T/reuse.json" --weights bf16 --grads bf16
printf '{"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 0}}' >"$T/reuse_default.json"
expect ds_max_reuse_default 0 "42 elements = 84 B per rank per step" -- \
    "$REMAT" replay tests/fixtures/fsdp/units3.json --dp 4 --deepspeed-config "$T/reuse_default.json" --weights bf16 --grads bf16
expect ds_max_reuse_none 0 "63 elements = 126 B per rank per step" -- \
    "$REMAT" replay tests/fixtures/fsdp/units3.json --dp 4 --zero 3 --weights bf16 --grads bf16 --stage3-prefetch 0
expect ds_max_reuse_bad 3 "zero_optimization.stage3_max_reuse_distance: must be a whole number" -- \
    "$REMAT" replay tests/fixtures/fsdp/units3.json --dp 4 --deepspeed-config tests/fixtures/deepspeed/bad_reuse.json --weights bf16 --grads bf16
