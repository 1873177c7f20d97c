#!/usr/bin/python3
"""rng_replay.py - dropout masks recomputed under their saved generator state (scripts/torch_rng.py).

    /usr/bin/python3 tests/torch/rng_replay.py REMAT

A small MLP with four dropouts (p = 0.5, so a mask drawn again from the live
generator differs in about half its elements), one thread:

1. the remat graph (remat_torch.graph_of) has one `get_rng_state` op per
   dropout, of torch.get_rng_state()'s bytes, read by its random op, which is
   recomputable; with rng=False the random ops are not recomputable and no
   state op exists;
2. remat_torch.compile at 0.7 of the store-all activation peak, once with a
   keep-set strategy (mincut, functorch's split) and once with DTR's own
   schedule (torch_schedule.py): the plan recomputes draws (rng_replays > 0),
   every parameter gradient is bit-identical (torch.equal) to eager
   PyTorch's from the same seed, and the generator's state after the step is
   eager's (the replay set the live state back);
3. the control: the same compiled step with torch.set_rng_state made a no-op
   (so a replay draws from the live generator, as a plain recompute would)
   gives gradients that differ from eager's: the check above can fail.

Prints one line per check; exits 1 on a failure.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import remat_torch  # noqa: E402


class MLP(nn.Module):
    def __init__(self, width=256, layers=4):
        super().__init__()
        self.fc = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])
        self.drop = nn.ModuleList([nn.Dropout(0.5) for _ in range(layers)])

    def forward(self, x, target):
        for fc, drop in zip(self.fc, self.drop):
            x = drop(torch.tanh(fc(x)))
        return F.mse_loss(x, target)


def step(module, params, inputs, seed=7):
    """Gradients of one training step from a fixed seed, and the generator state after it."""
    for p in params:
        p.grad = None
    torch.manual_seed(seed)
    module(*inputs).backward()
    return [p.grad.clone() for p in params], torch.get_rng_state()


def main():
    remat = sys.argv[1]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = MLP()
    params = list(model.parameters())
    g = torch.Generator().manual_seed(1)
    inputs = (torch.randn(128, 256, generator=g), torch.randn(128, 256, generator=g))
    bad = 0

    def check(ok, what):
        nonlocal bad
        bad += not ok
        print("%s %s" % ("ok" if ok else "FAIL", what))
        sys.stdout.flush()

    n_drop = sum(isinstance(m, nn.Dropout) for m in model.modules())
    state_bytes = torch.get_rng_state().numel() * torch.get_rng_state().element_size()
    graph = remat_torch.graph_of(model, inputs)
    states = [d for d in graph["ops"] if d["op"] == "get_rng_state"]
    readers = [d for d in graph["ops"] if d.get("attrs", {}).get("rng_state") in {s["id"] for s in states}]
    check(len(states) == n_drop and all(s["bytes"] == state_bytes and s["recomputable"] is False for s in states)
          and len(readers) == n_drop and all(d.get("recomputable", True) and d["attrs"]["rng_state"] in d["inputs"]
                                             for d in readers),
          "graph: %d get_rng_state ops of %d B for %d dropouts, each read by its recomputable draw" %
          (len(states), state_bytes, n_drop))
    plain = remat_torch.graph_of(model, inputs, rng=False)
    check(not any(d["op"] == "get_rng_state" for d in plain["ops"]) and
          sum(d.get("recomputable") is False for d in plain["ops"]) == n_drop,
          "graph with rng=False: %d draws not recomputable, no state ops" % n_drop)

    workdir = tempfile.mkdtemp(prefix="remat-rng-")
    path = os.path.join(workdir, "g.json")
    with open(path, "w") as f:
        json.dump(graph, f)
    rep = json.loads(subprocess.run([remat, "replay", path, "--json"], check=True, capture_output=True,
                                    text=True).stdout)
    budget = rep["activation_peak_bytes"] * 7 // 10
    eager, eager_state = step(model, params, inputs)
    for strategy in ("mincut", "dtr"):
        st = remat_torch.compile(model, inputs, budget=budget, budget_option="--activation-budget", remat=remat,
                                 strategies=((strategy,),), workdir=workdir)
        r = st.remat_report
        grads, state = step(st, params, inputs)
        same = all(torch.equal(u, v) for u, v in zip(eager, grads))
        check(r["rng_replays"] > 0 and same and torch.equal(state, eager_state),
              "%s at %d B (%s graphs): %d draws replayed, gradients %s, generator state after the step %s" %
              (strategy, budget, r["graphs"], r["rng_replays"], "bit-identical" if same else "DIFFERENT",
               "eager's" if torch.equal(state, eager_state) else "NOT eager's"))
        real_set = torch.set_rng_state
        torch.set_rng_state = lambda s: None      # the control: a replay draws from the live generator
        try:
            grads, _ = step(st, params, inputs)
        finally:
            torch.set_rng_state = real_set
        differ = not all(torch.equal(u, v) for u, v in zip(eager, grads))
        check(differ, "%s control (state not set before the redraw): gradients %s eager's" %
              (strategy, "differ from" if differ else "EQUAL"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
