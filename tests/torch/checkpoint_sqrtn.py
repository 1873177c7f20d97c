#!/usr/bin/python3
"""checkpoint_sqrtn.py - remat's sqrtn plan applied in PyTorch, measured.

    /usr/bin/python3 tests/torch/checkpoint_sqrtn.py REMAT [--blocks N --width W --batch B]

1. Exports scripts/models.py:chain (nn.Sequential of Linear+ReLU blocks) with
   scripts/export_torch.py and asks remat for two plans: store-all
   (`remat replay GRAPH --json`) and sqrtn (`remat plan GRAPH --strategy sqrtn
   -o PLAN --json`). remat's prediction is the difference of the two
   replayed peaks.
2. Applies the sqrtn plan in PyTorch: every kept activation is the output of
   one layer (the op's attrs.module), so the layers are cut after each kept
   output and every segment between cuts runs under
   torch.utils.checkpoint.checkpoint(use_reentrant=False): its input is held,
   everything inside is recomputed in backward, as remat's schedule does.
3. Measures each training step (forward, loss, backward) with
   torch.profiler(profile_memory=True): the running sum of the allocator's
   memory events in the order recorded, whose maximum is the step's peak of
   memory allocated beyond what existed before it (params and input).
4. Checks that the measured reduction is within 10% of the predicted one and
   that every parameter gradient is equal with and without checkpointing.

Prints the figures; exits 1 on a failed check.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import torch  # noqa: E402
from torch.profiler import profile, ProfilerActivity  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import export_torch as ex  # noqa: E402
import models  # noqa: E402


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out.stdout


def segments_for(g, keep, index, n_layers):
    """Layer ranges (lo, hi, checkpointed) that realize the keep set.

    A kept tensor is the output of one layer. If that layer's backward reads
    its own output (a ReLU saves its result), the layer runs outside any
    checkpoint, so autograd stores that output as the plan keeps it; the
    layers before it form a checkpointed segment. Otherwise (a Linear saves
    its input, not its output) the kept output ends a checkpointed segment
    and is the next one's input, which checkpoint holds until that segment's
    backward is done. Everything else is inside some checkpoint: recomputed.
    """
    info = {}
    for op in g["ops"]:
        outs = [o["id"] for o in op.get("outputs", [])] or [op["id"]]
        for t in outs:
            info[t] = ((op.get("attrs") or {}).get("module"), t in op.get("saves", []))
    segs, lo = [], 0
    for k, own in sorted({(index[info[t][0]], info[t][1]) for t in keep}):
        if own:
            if k > lo:
                segs.append((lo, k, True))
            segs.append((k, k + 1, False))
        else:
            segs.append((lo, k + 1, True))
        lo = k + 1
    if lo < n_layers:
        segs.append((lo, n_layers, True))
    return segs


def step_peak(model, layers, x, segments):
    """One training step; returns (peak bytes allocated during it, param grads)."""
    for p in model.parameters():
        p.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        h = x
        if segments is None:
            for layer in layers:
                h = layer(h)
        else:
            for lo, hi, ckpt in segments:
                seg = torch.nn.Sequential(*layers[lo:hi])
                h = checkpoint(seg, h, use_reentrant=False) if ckpt else seg(h)
        loss = h.sum()
        del h  # the loss's graph holds what backward needs; a Python reference would add one tensor
        loss.backward()
        del loss
    cur = peak = 0
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    for e in sorted(evs, key=lambda e: e.start_us()):  # stable: ties keep their recorded order
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak, [p.grad.clone() for p in model.parameters()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8192)
    a = ap.parse_args()
    torch.set_num_threads(2)
    tmp = tempfile.mkdtemp(prefix="remat-ckpt-")
    graph = os.path.join(tmp, "chain.json")
    plan = os.path.join(tmp, "sqrtn.json")
    ex.main(["scripts/models.py:chain", "--batch", str(a.batch), "--arg", "blocks=%d" % a.blocks,
             "--arg", "width=%d" % a.width, "-o", graph])
    store = json.loads(run([a.remat, "replay", graph, "--json"]))
    sq = json.loads(run([a.remat, "plan", graph, "--strategy", "sqrtn", "-o", plan, "--json"]))["replay"]
    with open(plan) as f:
        keep = json.load(f)["keep"]
    with open(graph) as f:
        g = json.load(f)

    torch.manual_seed(0)  # the exporter's seed: the same weights and input
    model = models.chain(a.blocks, a.width)
    x = ex.make_inputs(model, a.batch, (a.width,), "float32", 2, 0)
    names = {m: n for n, m in model.named_modules()}
    layers = [m for blk in model for m in blk]
    index = {names[m]: i for i, m in enumerate(layers)}
    segments = segments_for(g, keep, index, len(layers))

    step_peak(model, layers, x[:8], None)  # warm up kernels and allocator paths
    base, g0 = step_peak(model, layers, x, None)
    ckpt, g1 = step_peak(model, layers, x, segments)
    predicted = store["peak_bytes"] - sq["peak_bytes"]
    measured = base - ckpt
    rel = abs(measured - predicted) / predicted
    same = all(torch.equal(u, v) for u, v in zip(g0, g1))
    close = all(torch.allclose(u, v, rtol=1e-5, atol=1e-7) for u, v in zip(g0, g1))
    leaves = sum(t["bytes"] for t in g["inputs"] + g["params"])
    print("chain of %d Linear+ReLU blocks, width %d, batch %d; sqrtn keeps %s; segments %s" %
          (a.blocks, a.width, a.batch, ",".join(keep), segments))
    print("remat: store-all peak %d B, sqrtn peak %d B (beyond params and inputs: %d B and %d B); "
          "predicted reduction %d B" % (store["peak_bytes"], sq["peak_bytes"], store["peak_bytes"] - leaves,
                                        sq["peak_bytes"] - leaves, predicted))
    print("torch: step peak %d B plain, %d B with checkpoint; measured reduction %d B; diff %.2f%%" %
          (base, ckpt, measured, 100 * rel))
    print("gradients: %s" % ("bitwise equal" if same else "allclose" if close else "DIFFERENT"))
    ok = rel <= 0.10 and close
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
