# shard_torch.sh - PyTorch's sharding in the planning commands:
# `--shard zero-redundancy` (ZeroRedundancyOptimizer on DDP), `--rank R` and
# `--optimizer-workspace torch` (graphs/README.md, "Sharded data parallel").
#
# The graph: tests/check_shard_torch.c's five params of 3, 5, 4, 3 and 1 f32
# elements (p1..p5) and a frozen one. By torch 1.13's _partition_parameters,
# 3 ranks get p2 (5) | p3, p5 (5) | p1, p4 (6) elements: Adam's two f32
# moments are 40, 40 and 48 B, and rank 2 bounds them (without --rank).
cat >"$T/five.json" <<'JSON'
{"format": "remat-graph", "version": 1, "name": "five",
 "inputs": [{"id": "x", "bytes": 16}],
 "params": [{"id": "p1", "bytes": 12}, {"id": "p2", "bytes": 20}, {"id": "p3", "bytes": 16},
            {"id": "p4", "bytes": 12}, {"id": "p5", "bytes": 4}, {"id": "f", "bytes": 400, "frozen": true}],
 "ops": [{"id": "a", "op": "matmul", "inputs": ["x", "p1", "f"], "bytes": 16, "flops": 1},
         {"id": "b", "op": "matmul", "inputs": ["a", "p2"], "bytes": 16, "flops": 1},
         {"id": "c", "op": "matmul", "inputs": ["b", "p3"], "bytes": 16, "flops": 1},
         {"id": "d", "op": "matmul", "inputs": ["c", "p4"], "bytes": 16, "flops": 1},
         {"id": "e", "op": "matmul", "inputs": ["d", "p5"], "bytes": 4, "flops": 1}],
 "outputs": ["e"]}
JSON
F="$T/five.json"
expect zr_ranks 0 'elements with optimizer state per rank: 5 5 6' -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --optimizer adam
expect zr_default_rank 0 "replayed    every rank's bound: the most optimizer state (rank 2, 48 B); peak 628 B, the largest rank's" -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --optimizer adam
expect zr_rank0_json 0 '"optimizer_state": 40, "master_weights": 0' -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --optimizer adam --rank 0 --json
# Weights and gradients stay whole (DDP): 64 B each at OPT on every rank.
expect zr_whole_grads 0 '"at_optimizer": {"params": 64, "param_grads": 64, "optimizer_state": 40' -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --optimizer adam --rank 1 --json
# Every param is broadcast once after OPT: Psi = 16 elements.
expect zr_broadcast 0 'broadcasts the params it updated: 16 elements per step' -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --optimizer adam
# The single-tensor Adam over p1..p5 in graph order holds at most
# max(2x3, 2x5 + 3, 2x4 + 5, 2x3 + 4, 2x1 + 3) = 13 elements = 52 B of
# temporaries at OPT, where the peak is then: 64 + 64 + 128 (moments) + 400
# + 16 + 52 = 724 B. Under ZeroRedundancyOptimizer over 2 ranks, rank 0
# updates p2 then p4: max(10, 6 + 5) = 11 elements = 44 B, and its peak is
# at OPT: 64 + 64 + 64 (8 elements' moments) + 400 + 16 + 44 = 652 B. Rank
# 1 (p3, p1, p5: 8 elements) has 10 elements of temporaries, so the bound
# is rank 0's figure; over 3 ranks, rank 0 holds p2 alone (2 x 5 = 10
# elements) where rank 2 (the most state) holds p1 then p4 (2 x 3 + 3 = 9):
# the bound is 48 B of state with 40 B of temporaries.
expect zr_ws_ddp 0 '"peak_bytes": 724, "peak_step": "optimizer"' -- "$REMAT" replay "$F" --dp 2 --optimizer adam --optimizer-workspace torch --json
expect zr_ws_rank 0 '"peak_bytes": 652, "peak_step": "optimizer"' -- "$REMAT" replay "$F" --dp 2 --shard zero-redundancy --rank 0 --optimizer adam --optimizer-workspace torch --json
expect zr_ws_bound 0 'with the largest optimizer temporaries (rank 0); peak' -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --optimizer adam --optimizer-workspace torch
expect zr_ws_bound_json 0 '"optimizer_state": 48, "master_weights": 0, "frozen": 400, "inputs": 16, "activations": 0, "recomputed": 0, "activation_grads": 0, "workspace": 40,' -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --optimizer adam --optimizer-workspace torch --json
expect zr_ws_bytes 0 '"workspace": 1000,' -- "$REMAT" replay "$F" --optimizer adam --optimizer-workspace 1000B --json
expect zr_plan 0 'the most optimizer state (rank 2, 48 B)' -- "$REMAT" plan "$F" --dp 3 --shard zero-redundancy --optimizer adam --strategy store-all
expect zr_compare 0 '"strategy": "store-all", "feasible": true' -- "$REMAT" compare "$F" --dp 3 --shard zero-redundancy --optimizer adam --budget 1MiB --json
expect zr_bad_shard 2 "--shard: 'megatron' is not a sharding" -- "$REMAT" replay "$F" --dp 2 --shard megatron
expect zr_no_dp 2 '--shard zero-redundancy needs --dp N with N >= 2' -- "$REMAT" replay "$F" --shard zero-redundancy
expect zr_with_zero 2 'drop --zero 1' -- "$REMAT" replay "$F" --dp 2 --zero 1 --shard zero-redundancy
expect zr_rank_alone 2 '--rank applies to --shard zero-redundancy only' -- "$REMAT" replay "$F" --dp 2 --rank 1
expect zr_rank_range 2 '--rank 3: there are 3 ranks (0 to 2)' -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --rank 3
expect zr_adam8bit 2 "adam8bit's state depends on each tensor's shape" -- "$REMAT" replay "$F" --dp 2 --shard zero-redundancy --optimizer adam8bit
expect zr_ws_zero 2 '--optimizer-workspace torch models PyTorch' -- "$REMAT" replay "$F" --dp 2 --zero 2 --optimizer-workspace torch
expect zr_ws_bad 2 "--optimizer-workspace" -- "$REMAT" replay "$F" --optimizer-workspace lots
expect zr_ledger 2 '--shard, --rank and --optimizer-workspace apply to plan, replay and compare' -- "$REMAT" ledger --params 10 --shard zero-redundancy
# A master copy is sharded with the state: rank 0's 5 elements in f32 = 20 B.
expect zr_master 0 '"optimizer_state": 40, "master_weights": 20,' -- "$REMAT" replay "$F" --dp 3 --shard zero-redundancy --optimizer adam --master f32 --rank 0 --json
