#!/usr/bin/python3
"""bench_step_time.py - remat's predicted step time beside a measured one, on this machine's CPU.

    /usr/bin/python3 scripts/bench_step_time.py build/remat [--steps 7] [--models gpt,chain]

For each small model: export it with scripts/export_torch.py
--measure-durations (each op's forward kernel timed as it is recorded, after
a warm-up step; each backward node timed between autograd hooks), ask
`remat replay --device` for the forward + backward time those durations
predict (remat/time.h: a compute stream in schedule order, no
communication), then time real training steps of the same model (forward,
loss, backward; no optimizer, which the durations do not cover) and print
the median beside the prediction with their ratio. One thread, as the
export. Figures only, never a verdict on time: the machine is shared and
its timings are noisy (hence medians); the exit status is 0 unless a run
fails. The gap the ratio shows is what per-op durations leave out: the
framework's own dispatch between kernels, and variation between one timed
call and the median step.
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
sys.path.insert(0, HERE)

import torch  # noqa: E402

from torch_setup import loss_of, make_target, pick_output, rebuild  # noqa: E402

MODELS = {
    "gpt": ["scripts/models.py:gpt", "--arg", "layers=2", "--arg", "d_model=64", "--batch", "4"],
    "chain": ["scripts/models.py:chain", "--arg", "blocks=8", "--arg", "width=512", "--batch", "64",
              "--input-shape", "512"],
}

# Only the ops without a measured figure use these (views, which cost 0);
# the prediction rests on the measured durations.
CPU_DEVICE = {"format": "remat-device", "version": 1, "name": "cpu-this-machine",
              "peak_flops": {"f32": 5e10, "f64": 2.5e10}, "memory_bandwidth": 1e10,
              "link_bandwidth": 1e9, "link_latency": 1e-5}


def measure(meta, steps):
    model, x, kind = rebuild(meta)
    times = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        out = pick_output(model(x))
        loss = loss_of(kind, out, make_target(kind, out.detach(), meta["seed"]))
        loss.backward()
        t = time.perf_counter() - t0
        model.zero_grad(set_to_none=True)
        if i:  # the first step warms up, as the export's does
            times.append(t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--models", default="gpt,chain")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("%-8s %6s %14s %14s %8s  %s" % ("model", "ops", "predicted ms", "measured ms", "ratio", "durations"))
    with tempfile.TemporaryDirectory() as tmp:
        dev = os.path.join(tmp, "cpu.json")
        with open(dev, "w") as f:
            json.dump(CPU_DEVICE, f)
        for name in args.models.split(","):
            g = os.path.join(tmp, name + ".json")
            subprocess.run([sys.executable, os.path.join(HERE, "export_torch.py")] + MODELS[name] +
                           ["--measure-durations", "--no-workspace", "-o", g], check=True, stderr=subprocess.DEVNULL)
            rep = json.loads(subprocess.run([args.remat, "replay", g, "--device", dev, "--json"], check=True,
                                            capture_output=True, text=True).stdout)
            t = rep["time"]
            predicted = t["forward_s"] + t["backward_s"]
            with open(g) as f:
                meta = json.load(f)["meta"]
            measured = measure(meta, args.steps)
            print("%-8s %6d %14.3f %14.3f %8.3f  %d fwd, %d bwd of %d ops measured" %
                  (name, t["measured_ops"]["of"], predicted * 1e3, measured * 1e3, predicted / measured,
                   t["measured_ops"]["forward"], t["measured_ops"]["backward"], t["measured_ops"]["of"]))
    print("predicted: remat's forward + backward from the exported per-op durations; measured: the median of "
          "%d timed steps (forward, loss, backward) after one warm-up; ratio = predicted / measured" % args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
