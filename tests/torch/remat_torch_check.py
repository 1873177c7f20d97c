#!/usr/bin/python3
"""remat_torch_check.py - remat's plan run in PyTorch training (scripts/remat_torch.py), measured.

    /usr/bin/python3 tests/torch/remat_torch_check.py REMAT [--models chain,resnet18,gpt,unet]
                                                      [--fractions 0.5,0.7,0.9] [--tolerance 0.05]

For each model (small configurations: CPU, one thread) and each fraction f:

1. remat_torch.graph_of gives the remat graph of the model's AOTAutograd
   joint graph (random draws kept, no generator state saved: the graph
   store-all runs with); `remat replay` its store-all peak P (whole step), its
   activation peak A (activations, their gradients, workspace: what a plan
   can change) and the bytes R resident before the step (params and inputs).
   The budget is remat's --activation-budget f x A (the quantity Checkmate
   calls the budget; with --budget-kind total, --budget P - (1 - f) x A on
   the whole step, the weights and their gradients as they are).
2. remat_torch.compile(model, inputs, budget=...) plans with remat (every
   candidate strategy, the least extra FLOPs within the budget) and builds
   the training step: a keep set through functorch's split, a schedule of
   its own through scripts/torch_schedule.py; one step runs under
   torch.profiler(profile_memory=True): its step peak (the peak of the
   allocator's running sum: what the step allocates beyond what existed
   before it) and its activation peak (the same less the parameter
   gradients the backward has returned, remat_torch.measured_peaks).
3. Checks: every parameter gradient bit-identical (torch.equal) to eager
   PyTorch's on the same weights, input and RNG state; the measured step
   peak within the tolerance (default 5%) of remat's prediction (the plan's
   replayed peak less R); the measured activation peak within the budget
   (with --budget-kind total: R + the measured step peak within it).

Prints one line per model and fraction; exits 1 on a failed check.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import profile, ProfilerActivity  # noqa: E402

import models  # noqa: E402
import remat_torch  # noqa: E402


class WithLoss(nn.Module):
    """The model and its loss in one module, so the compiled graph is the whole training step."""

    def __init__(self, model, kind):
        super().__init__()
        self.model, self.kind = model, kind

    def forward(self, x, target):
        out = self.model(x)
        if self.kind == "ce":
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
        return F.mse_loss(out, target)


def build(name, seed=0):
    """(module with its loss, example inputs) of a small configuration of one model."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    if name == "chain":
        m = models.chain(blocks=8, width=128)
        x = torch.randn(256, 128, generator=g)
        return WithLoss(m, "mse"), (x, torch.randn(256, 128, generator=g))
    if name == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(weights=None, num_classes=10)
        x = torch.randn(16, 3, 96, 96, generator=g)
        return WithLoss(m, "ce"), (x, torch.randint(0, 10, (16,), generator=g))
    if name == "gpt":
        m = models.gpt(vocab=256, block=64, layers=4, heads=4, d_model=64, dropout=0.1)
        x = torch.randint(0, 256, (8, 64), generator=g)
        return WithLoss(m, "ce"), (x, torch.randint(0, 256, (8, 64), generator=g))
    if name == "unet":
        m = models.unet(depth=3, channels=8, size=64)
        x = torch.randn(4, 3, 64, 64, generator=g)
        return WithLoss(m, "mse"), (x, torch.randn(4, 1, 64, 64, generator=g))
    raise SystemExit("remat_torch_check: no model '%s'" % name)


# remat's proof that a budget is out of reach of every schedule (src/plan/plan.c, floor_note)
FLOOR = re.compile(r"no schedule that runs each step once, in the graph's order, can \(at (\S+) every such schedule "
                   r"holds at least [^(]*\(([0-9]+) B\)")


def profiled_step(step, params, inputs, seed=123, activation=False):
    """One training step under the profiler: (peak bytes beyond what existed, gradients), and with
    activation=True (peak, activation peak, gradients): remat_torch.measured_peaks."""
    for p in params:
        p.grad = None
    torch.manual_seed(seed)
    remat_torch.MARK_RETURNED = activation
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            loss = step(*inputs)
            loss.backward()
            del loss
    finally:
        remat_torch.MARK_RETURNED = False
    peak, act = remat_torch.measured_peaks(prof)
    grads = [p.grad.clone() if p.grad is not None else None for p in params]
    return (peak, act, grads) if activation else (peak, grads)


def replay(remat, graph, workdir, name):
    path = os.path.join(workdir, name + ".json")
    with open(path, "w") as f:
        json.dump(graph, f)
    out = subprocess.run([remat, "replay", path, "--json"], check=True, capture_output=True, text=True)
    rep = json.loads(out.stdout)
    resident = sum(t["bytes"] for t in graph["inputs"] + graph["params"])
    return rep["peak_bytes"], resident, rep["activation_peak_bytes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--models", default="chain,resnet18,gpt,unet")
    ap.add_argument("--fractions", default="0.5,0.7,0.9")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--calibrate", type=int, default=2,
                    help="rounds of plan, measure, plan again under the excess (remat_torch.compile's calibrate)")
    ap.add_argument("--no-auto", action="store_true",
                    help="leave out remat's auto (its exact MILP has a time limit, so its plan can vary with load)")
    ap.add_argument("--budget-kind", choices=("activation", "total"), default="activation",
                    help="activation: remat's --activation-budget f x A (activations, their gradients and "
                    "workspace, the quantity Checkmate calls the budget); total: --budget P - (1 - f) x A")
    ap.add_argument("--schedule", choices=("auto", "always", "never"), default="auto",
                    help="remat_torch.compile's schedule: which plans run as remat's own schedule")
    ap.add_argument("--strategy", help="only this one of remat_torch.CANDIDATES (e.g. dtr)")
    ap.add_argument("--no-rng", action="store_true",
                    help="random ops kept (not recomputable), as before scripts/torch_rng.py")
    a = ap.parse_args()
    strategies = tuple(c for c in remat_torch.CANDIDATES if not (a.no_auto and c[0] == "auto") and
                       (a.strategy is None or c == (a.strategy,)))
    torch.set_num_threads(1)
    import tempfile
    workdir = tempfile.mkdtemp(prefix="remat-torch-check-")
    bad = 0
    for name in a.models.split(","):
        model, inputs = build(name)
        params = list(model.parameters())
        _, eager_grads = profiled_step(model, params, inputs)
        # store-all's graph: its draws kept, as compile plans a budget that needs no recomputation (a
        # generator state is saved only for a draw a plan recomputes), so P is what store-all measures
        graph = remat_torch.graph_of(model, inputs, rng=False)
        P, R, A = replay(a.remat, graph, workdir, name)
        sa = remat_torch.store_all_compile(model, inputs)
        sa_peak, sa_grads = profiled_step(sa, params, inputs)
        same = all(torch.equal(u, v) for u, v in zip(eager_grads, sa_grads))
        print("%s: %d ops; store-all: remat %d B beyond %d B resident, measured %d B (%.4f); gradients %s" %
              (name, len(graph["ops"]), P - R, R, sa_peak, sa_peak / (P - R),
               "bit-identical" if same else "DIFFERENT"))
        queue = [(float(s), None) for s in a.fractions.split(",")]
        while queue:
            f, floor = queue.pop(0)
            if floor is not None:
                budget, option = floor, option
            elif a.budget_kind == "activation":
                budget, option = int(f * A), "--activation-budget"
            else:
                budget, option = P - int((1 - f) * A), "--budget"
            try:
                step = remat_torch.compile(model, inputs, budget=budget, budget_option=option, remat=a.remat,
                                           strategies=strategies, calibrate=a.calibrate if option == "--budget"
                                           else 0, schedule=a.schedule, rng=not a.no_rng)
            except RuntimeError as e:
                msg = str(e)
                proof = FLOOR.search(msg)
                if proof and floor is None and int(proof.group(2)) > budget:
                    # Out of reach of every schedule, and remat says where: plan at that floor instead,
                    # which checks that the floor is reached, so the proof is tight. Plus the gradient
                    # seed's bytes (ones_like(loss)): torch.autograd.backward holds it in its frame until
                    # the backward returns, where remat frees it after the first backward step (the 4 B
                    # every measured peak here is above remat's).
                    seed = sum(o["bytes"] for d in graph["ops"] for o in d.get("outputs", [d])
                               if o["id"] in graph["outputs"])
                    print("  below the floor f=%.1f %s %d B: no schedule fits (at %s every schedule holds at "
                          "least %s B); planned at that floor plus the %d B gradient seed:" %
                          (f, option[2:], budget, proof.group(1), proof.group(2), seed))
                    queue.insert(0, (f, int(proof.group(2)) + seed))
                    continue
                bad += 1
                # every strategy says the least peak it reaches: quote the least of them
                least = sorted(re.findall(r"the smallest [^;]*? \(([0-9]+) B\)", msg), key=int)
                small = msg.find("the smallest") if not least else msg.find("(%s B)" % least[0])
                small = msg.rfind("the smallest", 0, small + 1) if least else small
                print("  FAIL f=%.1f %s %d B: %s" % (f, option[2:], budget,
                                                     msg[small:(msg.find(";", small) + 1 or len(msg) + 1) - 1] if small >= 0 else msg[:300]))
                continue
            rep = step.remat_report
            predicted = int(rep["peak_bytes"]) - R
            peak, act, grads = profiled_step(step, params, inputs, activation=True)
            same = all(torch.equal(u, v) for u, v in zip(eager_grads, grads))
            ratio = peak / predicted
            within = act <= budget if option == "--activation-budget" else R + peak <= budget
            ok = same and abs(ratio - 1) <= a.tolerance and within
            bad += not ok
            cal = rep.get("calibration") or []
            print("  %s f=%s %s %d B%s: %s (%s graphs) keeps %d, %d recomputed nodes, extra FLOPs %.1f%%; "
                  "step peak predicted %d B, measured %d B (%.4f); activation peak predicted %d B, measured %d B, "
                  "within budget: %s; gradients %s%s" %
                  ("ok" if ok else "FAIL", "%.1f" % f if floor is None else "%.3f (the floor)" % (budget / A),
                   option[2:], budget,
                   " (planned at %d B after %d calibration rounds)" % (cal[-1]["planned_budget"], len(cal) - 1)
                   if len(cal) > 1 else "", rep["chosen"], rep["graphs"], len(rep["keep"]), rep["recomputed_nodes"],
                   100 * float(rep["overhead"] or 0), predicted, peak, ratio, int(rep["activation_peak_bytes"]), act,
                   "yes" if within else "NO", "bit-identical" if same else "DIFFERENT",
                   "; random ops: %s" % rep["random_ops"] if rep.get("random_ops") != "draws kept" or
                   "draws replayed" in [c.get("graph") for c in rep["commands"]] else ""))
            sys.stdout.flush()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
