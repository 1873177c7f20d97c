# time.sh - step time (remat/time.h): --device on replay, plan and trace,
# --objective time, and bad devices refused with their place.
#
# tests/fixtures/time/pq.json is check_time.c's four-op graph, worked by
# hand there at 1 TFLOP/s and 1 GB/s (unit-device.json): store-all takes
# 17.004 us forward + 24.004 us backward = 41.008 us; at a 14500 B budget
# the least-FLOPs plan recomputes q (1e6 FLOPs, but 10 us: it reads an
# 8000 B weight), the least-time plan p (4e6 FLOPs, 4 us).
TF=tests/fixtures/time
expect time_replay 0 'step time   41.008 us = compute 41.008 us + exposed communication 0 s' -- "$REMAT" replay $TF/pq.json --device $TF/unit-device.json
expect time_plan_flops 0 'step time   51.008 us' -- "$REMAT" plan $TF/pq.json --budget 14500 --device $TF/unit-device.json
expect time_plan_time 0 'step time   45.008 us' -- "$REMAT" plan $TF/pq.json --budget 14500 --device $TF/unit-device.json --objective time
expect time_plan_time_flops 0 'recompute 4000000' -- "$REMAT" plan $TF/pq.json --budget 14500 --device $TF/unit-device.json --objective time
expect time_plan_params 0 '"objective": "time", "device": "unit", "cost_unit": "ps"' -- "$REMAT" plan $TF/pq.json --budget 14500 --device $TF/unit-device.json --objective time --json
expect time_replay_json 0 '"step_time_s": 4.1008e-05' -- "$REMAT" replay $TF/pq.json --device $TF/unit-device.json --json
expect time_objective_needs_device 2 '--objective time needs --device' -- "$REMAT" plan $TF/pq.json --budget 14500 --objective time
expect time_objective_bad 2 "--objective: 'speed' is not one of flops, time" -- "$REMAT" plan $TF/pq.json --objective speed --device h200
expect time_objective_replay 2 '--objective applies to the planning commands' -- "$REMAT" replay $TF/pq.json --objective time
expect time_device_unknown 2 "unknown device 'tpu9'" -- "$REMAT" replay $TF/pq.json --device tpu9
expect time_device_twice 2 '--device given twice' -- "$REMAT" replay $TF/pq.json --device h200 --device h200
printf '{"format": "remat-device", "version": 1, "peak_flops": {"f32": 1e12}, "memory_bandwidth": -5}' >"$T/bad-device.json"
expect time_device_bad_file 3 'bad-device.json: memory_bandwidth: must be positive' -- "$REMAT" replay $TF/pq.json --device "$T/bad-device.json"
expect time_device_missing 3 'nodev.json' -- "$REMAT" replay $TF/pq.json --device "$T/nodev.json"
# A graph in bf16 on a device without a bf16 unit: the op is named.
sed 's/"f32"/"bf16"/' $TF/pq.json >"$T/pq-bf16.json"
expect time_device_no_unit 3 "ops[0] (op 'p'): device v100-sxm2 has no bf16 peak" -- "$REMAT" replay "$T/pq-bf16.json" --device v100-sxm2
# The Chrome trace on the time axis: one thread per stream, the recompute
# of p on the compute stream for its 4 us (ts/dur in us, three decimals),
# after the forward (17.004 us), BWD loss (2.004 us) and BWD r (3 us).
"$REMAT" plan $TF/pq.json --budget 14500 --device $TF/unit-device.json --objective time -o "$T/pq.plan" >/dev/null 2>&1
expect time_trace_streams 0 '"name": "compute stream"' -- "$REMAT" trace $TF/pq.json --plan "$T/pq.plan" --format chrome --device $TF/unit-device.json
expect time_trace_recompute 0 '"name": "RECOMPUTE p", "cat": "recompute", "ph": "X", "ts": 22.008, "dur": 4.000, "pid": 1, "tid": 0' -- "$REMAT" trace $TF/pq.json --plan "$T/pq.plan" --format chrome --device $TF/unit-device.json
expect time_trace_device_svg 2 '--device applies to the Chrome trace only' -- "$REMAT" trace $TF/pq.json --format svg --device h200
# Collectives on their own stream: DDP over 8 ranks of the generated
# transformer (shard.sh's), its all-reduces on thread 1.
"$REMAT" gen transformer -s 128 -b 2 -h 256 -a 4 -L 2 --vocab 1024 -o "$T/tz.json" >/dev/null 2>&1
TZO="--weights bf16 --optimizer adam --master f32 --states f32"
expect time_trace_comm 0 '"cat": "allreduce", "ph": "X"' -- "$REMAT" trace "$T/tz.json" --format chrome --device a100-sxm-80gb --dp 8 --zero 0 $TZO
expect time_replay_comm 0 'of it hidden behind compute' -- "$REMAT" replay "$T/tz.json" --device a100-sxm-80gb --dp 8 --zero 3 $TZO
# A measured duration that is not a number is the graph's error, with its path.
sed 's/"flops": 4000000/"flops": 4000000, "attrs": {"duration_ns": "slow"}/' $TF/pq.json >"$T/pq-bad.json"
expect time_bad_duration 3 'ops[0].attrs.duration_ns (op' -- "$REMAT" replay "$T/pq-bad.json"
# compare prices every strategy's plan on the device: at 14500 B the
# least-FLOPs plans take 51.008 us, and under --objective time auto finds
# the 45.008 us one (its FLOP bound is not printed: the costs were ps).
expect time_compare 0 '"strategy": "auto", "feasible": true, "peak_bytes": 14004, "budgeted_peak_bytes": 14004, "extra_flops": 1000000' -- "$REMAT" compare $TF/pq.json --budget 14500 --device $TF/unit-device.json --json
expect time_compare_step 0 '"step_time_s": 5.1008e-05' -- "$REMAT" compare $TF/pq.json --budget 14500 --device $TF/unit-device.json --json
expect time_compare_objective 0 '"strategy": "auto", "feasible": true, "peak_bytes": 14004, "budgeted_peak_bytes": 14004, "extra_flops": 4000000' -- "$REMAT" compare $TF/pq.json --budget 14500 --device $TF/unit-device.json --objective time --json
# A pipeline in time: two measured ops (1 us forward, 2 us backward each),
# one per stage, and a link of 1 us latency and 4096 B/us, so each 4096 B
# boundary send takes 2 us. By hand, one microbatch: F0 [0,1], send [1,3],
# F1 [3,4], B1 [4,6], send [6,8], B0 [8,10]: step 10 us, each device waits
# 2 us on the link (4 us exposed), and 2 x 10 - 6 - 4 = 10 us of bubble (50%).
printf '%s' '{"format": "remat-graph", "version": 1, "inputs": [{"id": "x", "bytes": 4096}],
 "params": [{"id": "w0", "bytes": 1024}, {"id": "w1", "bytes": 1024}],
 "ops": [{"id": "h0", "op": "matmul", "inputs": ["x", "w0"], "bytes": 4096, "flops": 1000, "attrs": {"duration_ns": 1000, "bwd_duration_ns": 2000}},
  {"id": "h1", "op": "matmul", "inputs": ["h0", "w1"], "bytes": 4096, "flops": 1000, "attrs": {"duration_ns": 1000, "bwd_duration_ns": 2000}}],
 "outputs": ["h1"]}' >"$T/pp2.json"
printf '%s' '{"format": "remat-device", "version": 1, "name": "link", "peak_flops": {"f32": 1e12}, "memory_bandwidth": 1e12, "link_bandwidth": 4096e6, "link_latency": 1e-6}' >"$T/link.json"
expect time_pp_step 0 'step 10.0000 us on link (op times: 4 of 4 measured' -- "$REMAT" replay "$T/pp2.json" --pp 2 --device "$T/link.json"
expect time_pp_bubble 0 'bubble 50.00% of device time (166.67% of the ideal), exposed send/recv 4.0000 us' -- "$REMAT" replay "$T/pp2.json" --pp 2 --device "$T/link.json"
expect time_pp_device 0 '0            3.0000       0.0000             2.0000       5.0000' -- "$REMAT" replay "$T/pp2.json" --pp 2 --device "$T/link.json"
expect time_pp_json 0 '"time": {"device": "link", "step_s": 1.00000000000000' -- "$REMAT" plan "$T/pp2.json" --pp 2 --device "$T/link.json" --json
# The Chrome trace of the same pipeline: device 1's forward starts when the
# activation has arrived (3 us), the gradient's send is on device 1's lane 2.
expect time_pp_trace_f1 0 '"name": "F mb 0 stage 1", "cat": "forward", "ph": "X", "ts": 3.000, "dur": 1.000, "pid": 1, "tid": 0' -- "$REMAT" trace "$T/pp2.json" --pp 2 --device "$T/link.json" --format chrome
expect time_pp_trace_send 0 '"name": "send grad mb 0 to device 0", "cat": "send_gradient", "ph": "X", "ts": 6.000, "dur": 2.000, "pid": 1, "tid": 2' -- "$REMAT" trace "$T/pp2.json" --pp 2 --device "$T/link.json" --format chrome
expect time_pp_trace_needs_device 2 'a pipeline is traced on a device' -- "$REMAT" trace "$T/pp2.json" --pp 2 --format chrome
expect time_pp_trace_svg 2 'a pipeline is traced on a device' -- "$REMAT" trace "$T/pp2.json" --pp 2 --format svg
# A stage op the device cannot time is the graph's error, naming the op.
sed 's/"bytes": 4096, "flops": 1000, "attrs": {"duration_ns": 1000, "bwd_duration_ns": 2000}}],/"bytes": 4096, "dtype": "bf16", "flops": 1000}],/' "$T/pp2.json" >"$T/pp2-bf16.json"
expect time_pp_untimed_op 3 "has no bf16 peak" -- "$REMAT" replay "$T/pp2-bf16.json" --pp 2 --device v100-sxm2
