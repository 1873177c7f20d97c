#!/usr/bin/python3
"""step_peak.py - remat's store-all peak of an exported graph against PyTorch's profiler.

    /usr/bin/python3 tests/torch/step_peak.py REMAT [--tolerance 0.01] GRAPH [GRAPH...]

For each exported graph this rebuilds its model, input and loss from the
graph's "meta" (scripts/torch_setup.py, the exporter's own definitions),
with parameter gradients unset, and runs one training step (forward, loss,
backward) under torch.profiler(profile_memory=True), no dispatch mode: the
running sum of the allocator's memory events in recorded order, whose
maximum is the step's peak of memory allocated beyond what existed before it
(parameters, buffers and the input).

remat's figure is `remat replay GRAPH --json`'s store-all peak_bytes less
the bytes of the graph's params and inputs, which are resident before the
step starts (the target the loss compares with is made inside the step, as
in the exporter; its few bytes are in both).

Prints remat, torch and their ratio per graph; exits 1 if any ratio is
further than the tolerance (default 1%) from 1.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

import torch  # noqa: E402
from torch.profiler import profile, ProfilerActivity  # noqa: E402

import export_torch as ex  # noqa: E402


def profiler_peak(prof):
    cur = peak = 0
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    for e in sorted(evs, key=lambda e: e.start_us()):  # stable: ties keep their recorded order
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


def torch_step_peak(meta):
    torch.set_num_threads(meta.get("threads", 1))  # workspace was measured at this count
    model, x, loss_kind = ex.rebuild(meta)
    for p in model.parameters():
        p.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = ex.pick_output(model(x))
        target = ex.make_target(loss_kind, out.detach(), meta["seed"])
        loss = ex.loss_of(loss_kind, out, target)
        del out
        loss.backward()
        del loss, target
    return profiler_peak(prof)


def remat_step_peak(remat, path, graph):
    out = subprocess.run([remat, "replay", path, "--json"], check=True, capture_output=True, text=True)
    peak = json.loads(out.stdout)["peak_bytes"]
    leaves = sum(t["bytes"] for t in graph["inputs"] + graph["params"] if t["id"] != "target")
    return peak - leaves


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("graphs", nargs="+")
    ap.add_argument("--tolerance", type=float, default=0.01)
    a = ap.parse_args()
    torch.set_num_threads(1)
    bad = 0
    for path in a.graphs:
        with open(path) as f:
            graph = json.load(f)
        r = remat_step_peak(a.remat, path, graph)
        t = torch_step_peak(graph["meta"])
        ratio = r / t
        ok = abs(ratio - 1) <= a.tolerance
        bad += not ok
        print("%s %s: store-all step peak beyond params and inputs: remat %d B, torch profiler %d B, "
              "remat / torch %.4f" % ("ok" if ok else "MISMATCH", os.path.basename(path), r, t, ratio))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
