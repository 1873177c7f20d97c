# ledger_plan.sh - the ledger's options in plan, replay and compare: the
# budget becomes the device's capacity. Expected figures by hand: mlp423's
# store-all replay peaks at 14608 B (tests/cli/replay-independent figures
# aside, `remat replay graphs/mlp423.json` without options), Adam's two f64
# moments are 2 x 423 x 8 = 6768 B, an f64 master copy 423 x 8 = 3384 B, a
# frozen reference copy 3384 B; all resident throughout, so they add to the
# peak as they are.
expect lp_base 0 '"peak_bytes": 14608' -- "$REMAT" replay graphs/mlp423.json --json
expect lp_adam 0 '"peak_bytes": 21376' -- "$REMAT" replay graphs/mlp423.json --json --optimizer adam
expect lp_adam_state 0 '"optimizer_state": 6768' -- "$REMAT" replay graphs/mlp423.json --json --optimizer adam
expect lp_master 0 '"peak_bytes": 24760' -- "$REMAT" replay graphs/mlp423.json --json --optimizer adam --master f64
expect lp_frozen 0 '"peak_bytes": 24760' -- "$REMAT" replay graphs/mlp423.json --json --optimizer adam --frozen-copies 1
expect lp_sgd 0 '"peak_bytes": 14608' -- "$REMAT" replay graphs/mlp423.json --json --optimizer sgd
expect lp_momentum 0 '"peak_bytes": 17992' -- "$REMAT" replay graphs/mlp423.json --json --optimizer momentum
expect lp_plan_fits 0 '"peak_bytes": 21376' -- "$REMAT" plan graphs/mlp423.json --strategy store-all --budget 21376 --optimizer adam --json
expect lp_plan_over 4 'smallest peak it reaches on this graph is 20.88 KiB (21376 B)' -- "$REMAT" plan graphs/mlp423.json --strategy store-all --budget 21375 --optimizer adam
# The reserve comes off the budget: 22528 - 1024 = 21504 >= 21376 fits;
# 22528 - 2048 = 20480 does not.
expect lp_reserve_fits 0 'met' -- "$REMAT" plan graphs/mlp423.json --strategy store-all --budget 22KiB --reserve 1KiB --optimizer adam
expect lp_reserve_over 4 'cannot meet' -- "$REMAT" plan graphs/mlp423.json --strategy store-all --budget 22KiB --reserve 2KiB --optimizer adam
expect lp_reserve_huge 2 'exceeds the budget' -- "$REMAT" plan graphs/mlp423.json --budget 1KiB --reserve 2KiB
# ZeRO 2 over 2 ranks is planned now, not refused: the communication is a
# reduce-scatter of the 423 gradient elements and an all-gather of the 423
# updated weights, 2 x 423 = 846 elements x 8 B (f64) = 6768 B per rank;
# a ring sends (2-1)/2 of it, 3384 B.
expect lp_zero2 0 'comm        846 elements = 6768 B per rank per step' -- "$REMAT" plan graphs/mlp423.json --zero 2 --dp 2
expect lp_zero2_ring 0 '(N-1)/N = 1/2 of it: 3384 B' -- "$REMAT" plan graphs/mlp423.json --zero 2 --dp 2
# ZeRO-1 over 2 devices: the 423-element flat partition is ceil(423/2) =
# 212 elements per device, x 2 moments x 8 B = 3392 B.
expect lp_zero1 0 '"optimizer_state": 3392' -- "$REMAT" replay graphs/mlp423.json --json --optimizer adam --zero 1 --dp 2
expect lp_weights 2 'export the graph in the training precision' -- "$REMAT" plan graphs/mlp423.json --weights f32
expect lp_grads 2 "at its param's size" -- "$REMAT" replay graphs/mlp423.json --grads f32
expect lp_bad_opt 2 'adamx' -- "$REMAT" compare graphs/mlp423.json --budget 1MiB --optimizer adamx
expect lp_numeric 2 'drop the ledger options' -- "$REMAT" replay graphs/mlp423.json --numeric --optimizer adam
expect lp_compare 0 'store-all                    yes' -- "$REMAT" compare graphs/mlp423.json --budget 22KiB --optimizer adam
