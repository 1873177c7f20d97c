#!/usr/bin/python3
"""bench_remat_torch.py - remat's plan in real PyTorch training against PyTorch's own rematerialization.

    /usr/bin/python3 scripts/bench_remat_torch.py build/remat [--models resnet18,gpt,unet] [--steps 15]

For each model (the small CPU configurations of tests/torch/remat_torch_check.py,
one thread) this measures training steps (forward, loss, backward), each
under torch.profiler(profile_memory=True) for its peak and timed for its
CPU and wall time, and prints medians over --steps steps:

* eager PyTorch, and AOTAutograd with functorch's default partitioner (save
  what the forward made), the store-all baselines;
* functorch's min_cut_rematerialization_partition as torch 1.13 runs it (its
  "nvfuser" op list, the recomputed nodes where functorch puts them); the
  "inductor" op list (views recomputable too) with each recomputed node
  moved to just before its first use (remat_torch.min_cut_compile's ops and
  sink); and functorch's own aggressive mode (AGGRESSIVE_RECOMPUTATION on:
  every op but random and compute-intensive ones may be recomputed, batch
  norm and pooling too; min_cut_compile(ops="aggressive")), sunk the same
  way: the only min-cut that lowers resnet18's and the U-Net's peak. On CPU
  functorch 1.13 traces dropout as bernoulli_, which that mode does not
  count as random, so on the GPT it draws the masks again (the peer's label
  says how many) and its gradients are not eager's;
* torch.utils.checkpoint(use_reentrant=False) around every block (resnet's
  BasicBlocks, the GPT's decoder blocks, the U-Net's conv-BN-ReLU pairs);
* remat_torch.compile at a budget equal to each peer's measured peak (plus
  the resident params and inputs), re-planned under the excess while its
  own measured peak is above (compile's calibrate): remat's plan at the
  same memory, by default with objective="time" (each op's duration
  measured on this CPU, the plan with the least predicted recomputation
  time; --objectives flops,time adds the least-FLOPs plans). Peers with the
  same measured peak share one remat row.

The grads column compares each method's gradients (profiled step, seed
123) with eager PyTorch's: "same" when every one is bit-identical.

Steps are timed in interleaved rounds (one step of every method per round)
so that the shared machine's drift hits every method alike. Two figures of
extra time, per round:

* recompute: the time of the recomputation itself, measured where it runs:
  the thread CPU time (time.thread_time_ns) of every node that recomputes a
  forward value (remat_torch.RECOMPUTE_CLOCK: the nodes functorch's split or
  torch_schedule copies into the graphs), and for checkpointing the thread
  CPU time of each block's forward when it runs again in the backward.
  Printed as ms per step, median [quartiles], with the number of timed
  calls per step;
* step: the step's CPU time over its baseline's in the same round, less 1
  (eager for checkpointing, the default partitioner for the AOTAutograd
  methods), the whole-step cross-check, noisier.

The last lines compare remat with each peer at that peer's measured peak.
The verdict reads the recompute times: "remat costs less" when remat's
measured peak is at most the peer's and the quartile ranges do not overlap
(remat's q3 below the peer's q1), "remat costs more" when they do not
overlap the other way, else "within noise"; beside it, per round, remat's
step extra time less the peer's (points), median [quartiles]. Figures only:
the exit status is 0 unless a run fails (the machine is shared; timings are
noisy, hence CPU time, medians and quartiles).
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "torch"))

import torch  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import remat_torch  # noqa: E402
import remat_torch_check as rc  # noqa: E402


def blocks_of(name, model):
    m = model.model
    if name == "resnet18":
        return [b for layer in (m.layer1, m.layer2, m.layer3, m.layer4) for b in layer]
    if name == "gpt":
        return list(m.blocks)
    if name == "unet":
        return list(m.down) + [m.mid] + list(m.dec)
    return list(m)


AGAIN = [False]     # True while a timed step's backward runs: a checkpointed block's forward then recomputes


def with_checkpoints(blocks):
    """Wraps each block's forward in torch.utils.checkpoint; returns a function that undoes it. A block's
    forward run again in the backward (AGAIN) adds its thread CPU time to remat_torch.RECOMPUTE_CLOCK."""
    saved = []

    def timed(f):
        def run(*a):
            clock = remat_torch.RECOMPUTE_CLOCK if AGAIN[0] else None
            if clock is None:
                return f(*a)
            w, c = time.perf_counter_ns(), time.thread_time_ns()
            out = f(*a)
            clock[2] += time.thread_time_ns() - c
            clock[1] += time.perf_counter_ns() - w
            clock[0] += 1
            return out
        return run
    for b in blocks:
        orig = b.forward
        saved.append((b, orig))
        b.forward = (lambda f: (lambda *a: checkpoint(f, *a, use_reentrant=False)))(timed(orig))

    def undo():
        for b, f in saved:
            b.forward = f
    return undo


def peak_of(step, params, inputs):
    """(measured peak, gradients) of one profiled step after a warming one (kernels, allocator paths)."""
    rc.profiled_step(step, params, inputs)
    return rc.profiled_step(step, params, inputs)


def timed_step(step, params, inputs):
    """(wall s, CPU s of this process, recomputing calls, their wall ns, their thread CPU ns) of one step."""
    for p in params:
        p.grad = None
    torch.manual_seed(123)
    clock = remat_torch.RECOMPUTE_CLOCK = [0, 0, 0]
    try:
        t, c = time.perf_counter(), time.process_time()
        loss = step(*inputs)
        AGAIN[0] = True
        loss.backward()
        dt, dc = time.perf_counter() - t, time.process_time() - c
    finally:
        AGAIN[0] = False
        remat_torch.RECOMPUTE_CLOCK = None
    del loss
    return (dt, dc) + tuple(clock)


def quartiles(r):
    r = sorted(r)
    q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
    return q[0], statistics.median(r), q[2]


def summary(r, scale, fmt):
    q1, m, q3 = quartiles(r)
    return (fmt + " [" + fmt + ", " + fmt + "]") % (scale * m, scale * q1, scale * q3)


def verdict(mine, theirs, my_peak, their_peak, my_grads=True, their_grads=True):
    """The Done-when's comparison on recompute times (ns per round): a win only at a measured peak no
    higher than the peer's, with the quartile ranges apart and remat's gradients eager's. A peer whose
    gradients are not eager's still gets its figures compared, with that said."""
    if not my_grads:
        return "no verdict: remat's gradients are not eager's"
    if not their_grads:
        return verdict(mine, theirs, my_peak, their_peak) + " (but the peer's gradients are not eager's)"
    m, t = quartiles(mine), quartiles(theirs)
    if my_peak > their_peak:
        return "no verdict: remat's measured peak is above the peer's"
    if not any(mine) and not any(theirs):
        return "the same: neither recomputes"
    if m[2] < t[0]:
        return "remat costs less"
    if m[0] > t[2]:
        return "remat costs more"
    return "within noise (the quartile ranges overlap)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--models", default="resnet18,gpt,unet")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--objectives", default="time",
                    help="remat_torch.compile's objective for remat's rows, comma-separated: time (the least "
                    "predicted recomputation time, op durations measured on this CPU), flops")
    a = ap.parse_args()
    torch.set_num_threads(1)
    print("%d interleaved rounds (one step of every method per round), 1 thread (torch.set_num_threads(1)), load "
          "average %s; peak = torch.profiler's step peak beyond params and inputs; CPU = this process's CPU time "
          "per step (median); recompute = thread CPU time of the recomputing nodes (calls per step), ms, median "
          "[quartiles]; step extra = the step's CPU time / its baseline's in the same round, median [quartiles]" %
          (a.steps, " ".join("%.1f" % x for x in os.getloadavg())))
    print("%-9s %-60s %10s %5s %7s %7s %6s %23s %21s" % (
        "model", "method", "peak (B)", "grads", "CPU (s)", "wall(s)", "calls", "recompute ms [q1, q3]",
        "step extra [q1, q3]"))
    for name in a.models.split(","):
        model, inputs = rc.build(name)
        params = list(model.parameters())
        graph = remat_torch.graph_of(model, inputs)
        resident = sum(t["bytes"] for t in graph["inputs"] + graph["params"])
        blocks = blocks_of(name, model)

        def checkpointed(*args):
            undo = with_checkpoints(blocks)
            try:
                return model(*args)
            finally:
                undo()
        # (label, step, baseline label)
        methods = [("eager PyTorch", model, None),
                   ("AOT default partition", remat_torch.store_all_compile(model, inputs), None)]
        peers = []
        for ops, sink, what in (("nvfuser", False, "AOT min-cut"),
                                ("inductor", True, "AOT min-cut, inductor ops, sunk"),
                                ("aggressive", True, "AOT min-cut, aggressive, sunk")):
            mc = remat_torch.min_cut_compile(model, inputs, ops=ops, sink=sink)
            r = mc.remat_report
            lab = "%s (%d again%s, %.1f%% FLOPs)" % (what, r["recomputed_nodes"], ", %d draws" %
                                                     r["random_recomputed"] if r["random_recomputed"] else "",
                                                     100 * r["overhead"])
            methods.append((lab, mc, "AOT default partition"))
            peers.append(lab)
        methods.append(("checkpoint every block", checkpointed, "eager PyTorch"))
        peers.append("checkpoint every block")
        peaks, same = {}, {}   # a method's measured peak; whether its gradients are eager's bit for bit
        eager = []

        def measure(label, step):
            peaks[label], g = peak_of(step, params, inputs)
            if not eager:
                eager.extend(g)     # methods[0] is eager PyTorch
            same[label] = all((u is None) == (v is None) and (u is None or torch.equal(u, v))
                              for u, v in zip(g, eager))
        for m in methods:
            measure(m[0], m[1])
        failed = []
        pairs = []          # (remat's label, the peer's label) at the peer's measured peak
        at_peak = {}        # a peer's measured peak -> remat's row planned there
        for objective in a.objectives.split(","):
            for peer in peers:
                if (objective, peaks[peer]) in at_peak:
                    pairs.append((at_peak[objective, peaks[peer]], peer))
                    continue
                short = peer.split(" (")[0]
                try:
                    st = remat_torch.compile(model, inputs, budget=resident + peaks[peer], remat=a.remat,
                                             calibrate=2, objective=objective)
                except RuntimeError as e:
                    failed.append("remat (%s) at %s's peak: %s" % (objective, short,
                                                                   str(e).split(": build/")[0][13:400]))
                    continue
                rep = st.remat_report
                lab = "remat[%s] at %s's peak (%s, %.1f%% FLOPs%s)" % (
                    objective, short.replace("AOT ", "").replace(", inductor ops, sunk", "+")
                    .replace(", aggressive, sunk", " aggr.+"), rep["chosen"],
                    100 * float(rep["overhead"] or 0),
                    ", %d draws again" % rep["rng_replays"] if rep.get("rng_replays") else "")
                methods.append((lab, st, "AOT default partition"))
                measure(lab, st)
                at_peak[objective, peaks[peer]] = lab
                pairs.append((lab, peer))
        times = {m[0]: [] for m in methods}
        for _ in range(a.steps):
            for label, st, _ in methods:
                times[label].append(timed_step(st, params, inputs))
        base_of = {label: base for label, _, base in methods}

        def extras(label):
            """Per round: the step's CPU time over its baseline's in the same round, less 1."""
            return [r[1] / rb[1] - 1 for r, rb in zip(times[label], times[base_of[label]])]

        def again(label):
            return [r[4] for r in times[label]]
        for label, _, base in methods:
            cpu = statistics.median(r[1] for r in times[label])
            wall = statistics.median(r[0] for r in times[label])
            calls = statistics.median(r[2] for r in times[label])
            print("%-9s %-60s %10d %5s %7.3f %7.3f %6d %23s %21s" % (
                name, label, peaks[label], "same" if same[label] else "DIFF", cpu, wall, calls,
                summary(again(label), 1e-6, "%.2f"),
                summary(extras(label), 100, "%+.1f%%") if base is not None else ""))
        for lab, peer in pairs:
            # The Done-when comparison itself: the recomputation's own time, remat's against the peer's, at
            # the peer's measured peak; the whole-step difference (points of each one's baseline) beside it.
            d = [x - y for x, y in zip(extras(lab), extras(peer))]
            print("%-9s %s vs %s at %d B vs %d B: recompute %s ms vs %s ms: %s; step extra remat - peer %s points" %
                  (name, lab.split(" at ")[0], peer.split(" (")[0], peaks[lab], peaks[peer],
                   summary(again(lab), 1e-6, "%.2f"), summary(again(peer), 1e-6, "%.2f"),
                   verdict(again(lab), again(peer), peaks[lab], peaks[peer], same[lab], same[peer]),
                   summary(d, 100, "%+.1f")))
        for f in failed:
            print("%-9s %s" % (name, f))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
