"""torch_durations.py - each recorded op's measured forward and backward time (export_torch.py --measure-durations).

The recorder (torch_recorder.py) numbers every dispatch call of the step it
records, and each op it keeps remembers the call that made it. Here the same
step runs again, `repeats` times, under a dispatch mode that only times: a
model that is deterministic in its calls makes the same calls in the same
order, so call i here is call i there. Forward: the kernel call alone
(perf_counter_ns around func), not the recording's bookkeeping, and on the
allocator of a plain run (the recorder keeps every tensor alive, so its own
run pays fresh pages). Backward: autograd's CPU engine runs nodes one at a
time on this thread; a hook on each call's grad_fn stamps when it ends, and a
node's time is from the previous stamp (or the start of backward) to its
own, which also charges it the small bookkeeping nodes between
(AccumulateGrad). The figure per op is the median over the repeats.
"""
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class Timer(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ns = []          # per call: the kernel's time
        self.node_call = {}   # id(grad_fn) -> (grad_fn, call)
        self.pending = None

    def settle(self):
        # Autograd attaches grad_fn once the dispatch returns: read it at
        # the next call (as the recorder does).
        if self.pending is not None:
            call, outs = self.pending
            for t in outs:
                gf = t.grad_fn
                if gf is not None:
                    self.node_call.setdefault(id(gf), (gf, call))
                    break
            self.pending = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.settle()
        t0 = time.perf_counter_ns()
        out = func(*args, **(kwargs or {}))
        self.ns.append(time.perf_counter_ns() - t0)
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        if outs:
            self.pending = (len(self.ns) - 1, outs)
        return out


def timed_step(model, x, loss_kind, seed, pick_output, loss_of, make_target):
    """One training step (forward, loss, backward) as export_torch records it: (fwd ns per call, bwd ns per call)."""
    tm = Timer()
    # The recorder runs under saved-tensor hooks, which make autograd save
    # an output without the detach call it makes otherwise: identity hooks
    # here keep the two call sequences the same.
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        with tm:
            out = pick_output(model(x))
        target = make_target(loss_kind, out.detach(), seed)
        with tm:
            loss = loss_of(loss_kind, out, target)
        tm.settle()
    stamps = []
    handles = []
    for gf, call in tm.node_call.values():
        if hasattr(gf, "register_hook"):
            handles.append(gf.register_hook(lambda gi, go, c=call: stamps.append((time.perf_counter_ns(), c))))
    t0 = time.perf_counter_ns()
    loss.backward()
    for h in handles:
        h.remove()
    model.zero_grad(set_to_none=True)
    bwd, prev = {}, t0
    for t, c in sorted(stamps):
        bwd[c] = bwd.get(c, 0) + (t - prev)
        prev = t
    return tm.ns, bwd


def measure(model, x, loss_kind, seed, helpers, repeats=5):
    """Median forward and backward ns per dispatch call over `repeats` steps, after one warm-up step."""
    timed_step(model, x, loss_kind, seed, *helpers)
    fwd_runs, bwd_runs = [], []
    for _ in range(repeats):
        f, b = timed_step(model, x, loss_kind, seed, *helpers)
        fwd_runs.append(f)
        bwd_runs.append(b)
    n = min(len(f) for f in fwd_runs)
    fwd = [int(statistics.median(r[i] for r in fwd_runs)) for i in range(n)]
    bwd = {}
    for c in set().union(*bwd_runs):
        vals = [r[c] for r in bwd_runs if c in r]
        if len(vals) == len(bwd_runs):
            bwd[c] = int(statistics.median(vals))
    return fwd, bwd
