#!/usr/bin/python3
"""bench_pp_time.py - remat's predicted step time of a real 1F1B pipeline beside the measured one, on this machine.

    /usr/bin/python3 scripts/bench_pp_time.py build/remat [--stages 2 4] [--steps 5]

The run is tests/torch/pp_1f1b.py's: a stack of bias-free Linear + ReLU
layers split into P stages of equal layers, one process per stage on
127.0.0.1 (gloo), PipeDream-Flush 1F1B over M microbatches, activations sent
forward and gradients backward with isend. For each P:

* per-op durations: the whole model exported once by scripts/export_torch.py
  --measure-durations (each op's forward kernel and backward node timed on
  this CPU, one thread, as each pipeline process runs);
* the link: a gloo send/recv ping-pong between two processes on loopback,
  one-way time = half the median round trip, for a 4-byte message (the
  latency) and for one boundary activation (B x D f32; the bandwidth is its
  bytes over the extra time);
* both written as a remat-device file for this host ("cpu-gloo-loopback");
* remat's prediction: `remat replay GRAPH --pp P --microbatches M
  --pp-schedule 1f1b --pp-stages (the same layers per stage) --device FILE
  --json` (remat/pipeline.h: per-stage op times, each boundary tensor a send
  of latency + bytes / bandwidth on its own stream);
* the measurement: the real 1F1B step (forward and backward of every
  microbatch, no optimizer, which the prediction leaves out too), timed
  between barriers as the slowest rank's time, the median of --steps steps
  after one warm-up.

Figures only, never a verdict on time: the machine is shared (the load
average is printed) and P processes on fewer cores than P run slower than
their durations say; the "CPU share" column (the ranks' CPU time over P x
the step) shows how much of a core each rank had, which the prediction
takes to be one. The exit status is 0 unless a run fails. Without torch
it prints a skip line.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "torch"))

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import pp_1f1b
except Exception as e:  # pragma: no cover - environment without torch
    print("pp-time: skipped (%s)" % e)
    sys.exit(0)

# Ops without a measured duration fall back on these (views, which cost 0).
CPU = {"peak_flops": {"f32": 5e10, "f64": 2.5e10}, "memory_bandwidth": 1e10}


def link_worker(rank, port, q, sizes, reps):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=__import__("datetime").timedelta(seconds=60))
    out = {}
    for n in sizes:
        buf = torch.zeros(n // 4)
        rtts = []
        for i in range(reps + 2):
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            if i >= 2:  # two warm-up round trips
                rtts.append(time.perf_counter() - t0)
        out[n] = statistics.median(rtts) / 2
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()


def measure_link(act_bytes, reps=40):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = pp_1f1b.free_port()
    sizes = [4, act_bytes]
    procs = [ctx.Process(target=link_worker, args=(r, port, q, sizes, reps)) for r in range(2)]
    for p in procs:
        p.start()
    try:
        one_way = q.get(timeout=120)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    lat = one_way[4]
    extra = one_way[act_bytes] - lat
    bw = act_bytes / extra if extra > 0 else act_bytes / one_way[act_bytes]
    return lat, bw


def stage_cuts(graph, P):
    """Forward positions that give each stage LAYERS/P layers, as pp_1f1b.py splits the model: a stage ends after
    the ReLU of its last layer (the last stage also takes the head and the loss)."""
    ops = graph["ops"]
    relus = [i for i, op in enumerate(ops) if op["op"].startswith("relu")]
    if len(relus) != pp_1f1b.LAYERS:
        sys.exit("pp-time: the export has %d ReLUs, expected %d" % (len(relus), pp_1f1b.LAYERS))
    per = pp_1f1b.LAYERS // P
    cuts = [0] + [relus[per * (s + 1) - 1] + 1 for s in range(P - 1)] + [len(ops)]
    return ",".join("%d:%d" % (cuts[i], cuts[i + 1]) for i in range(P))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--stages", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    B, D, M = pp_1f1b.B, pp_1f1b.D, pp_1f1b.M
    load = os.getloadavg()
    print("host: %d CPUs, load average %.2f %.2f %.2f; model %d x (Linear(%d, %d) + ReLU) + Linear(%d, 1), "
          "microbatch %d x %d f32, M = %d, 1F1B, gloo on 127.0.0.1" %
          (os.cpu_count(), load[0], load[1], load[2], pp_1f1b.LAYERS, D, D, D, B, D, M))
    act = B * D * 4
    lat, bw = measure_link(act)
    print("link (gloo send/recv ping-pong, one way): latency %.1f us, bandwidth %.3f GB/s (%d B in %.1f us)" %
          (lat * 1e6, bw / 1e9, act, (lat + act / bw) * 1e6))
    with tempfile.TemporaryDirectory() as tmp:
        dev = os.path.join(tmp, "cpu-gloo.json")
        with open(dev, "w") as f:
            json.dump(dict(CPU, format="remat-device", version=1, name="cpu-gloo-loopback", link_bandwidth=bw,
                           link_latency=lat), f)
        g = os.path.join(tmp, "mlp.json")
        subprocess.run([sys.executable, os.path.join(HERE, "export_torch.py"),
                        os.path.join(ROOT, "tests", "torch", "pp_1f1b.py") + ":mlp", "--batch", str(B),
                        "--measure-durations", "--no-workspace", "-o", g], check=True, stderr=subprocess.DEVNULL,
                       timeout=600)
        with open(g) as f:
            graph = json.load(f)
        print("%-3s %13s %13s %8s %9s  %s" % ("P", "predicted ms", "measured ms", "ratio", "CPU share",
                                              "predicted: bubble/exposed send-recv (ms, per device); measured steps"))
        for P in args.stages:
            r = subprocess.run([args.remat, "replay", g, "--pp", str(P), "--microbatches", str(M), "--pp-schedule",
                                "1f1b", "--pp-stages", stage_cuts(graph, P), "--device", dev, "--json"],
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                sys.exit("pp-time: remat failed: " + r.stderr)
            t = json.loads(r.stdout)["time"]
            res = pp_1f1b.run(P, time_steps=args.steps)
            steps = [w for w, _ in res[0][0]]
            share = statistics.median(c for _, c in res[0][0])
            measured = statistics.median(steps)
            parts = " ".join("%.2f/%.2f" % (d["bubble_s"] * 1e3, d["exposed_comm_s"] * 1e3) for d in t["devices"])
            print("%-3d %13.3f %13.3f %8.3f %9.2f  %s; %s" %
                  (P, t["step_s"] * 1e3, measured * 1e3, t["step_s"] / measured, share, parts,
                   " ".join("%.1f" % (x * 1e3) for x in steps)))
    print("predicted: `remat replay --pp P --device` from this CPU's per-op durations (%d of %d op times measured) "
          "and the link above; measured: the median of %d timed 1F1B steps after one warm-up (the slowest rank's); "
          "ratio = predicted / measured; CPU share: the ranks' CPU time over P x the step (1.00: a core each, as "
          "the prediction assumes)" % (t["measured_ops"]["measured"], t["measured_ops"]["of"], args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
