#!/usr/bin/python3
"""bench_remat_torch.py - remat's plan in real PyTorch training against PyTorch's own rematerialization.

    /usr/bin/python3 scripts/bench_remat_torch.py build/remat [--models resnet18,gpt,unet] [--steps 5]

For each model (the small CPU configurations of tests/torch/remat_torch_check.py,
one thread) this measures training steps (forward, loss, backward), each
under torch.profiler(profile_memory=True) for its peak and timed for its
wall time, and prints medians over --steps steps:

* eager PyTorch, and AOTAutograd with functorch's default partitioner (save
  what the forward made), the store-all baselines;
* functorch's min_cut_rematerialization_partition (AOTAutograd's own
  rematerialization) and torch.utils.checkpoint(use_reentrant=False) around
  every block (resnet's BasicBlocks, the GPT's decoder blocks, the U-Net's
  conv-BN-ReLU pairs);
* remat_torch.compile at a budget equal to each peer's measured peak (plus
  the resident params and inputs): remat's plan at the same memory.

Steps are timed in interleaved rounds (one step of every method per round)
so that the shared machine's drift hits every method alike. Extra time is,
per round, a method's step CPU time over its baseline's in that round, less
1 (the baseline: eager for checkpointing, the default partitioner for the
AOTAutograd methods), printed as the median and quartiles over rounds. The
last lines compare remat with each peer at that peer's measured peak: per
round, remat's extra time less the peer's (percentage points), median and
quartiles, and a verdict that says "within noise" unless the quartiles lie
on one side of 0. min-cut's line counts the forward nodes its backward
recomputes and their FLOPs (over forward + backward, as remat reports). Figures only: the exit status is 0 unless a run
fails (the machine is shared; timings are noisy, hence medians).
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


def with_checkpoints(blocks):
    """Wraps each block's forward in torch.utils.checkpoint; returns a function that undoes it."""
    saved = []
    for b in blocks:
        orig = b.forward
        saved.append((b, orig))
        b.forward = (lambda f: (lambda *a: checkpoint(f, *a, use_reentrant=False)))(orig)

    def undo():
        for b, f in saved:
            b.forward = f
    return undo


def peak_of(step, params, inputs):
    rc.profiled_step(step, params, inputs)  # warm: kernels, allocator paths
    return rc.profiled_step(step, params, inputs)[0]


def timed_step(step, params, inputs):
    """(wall seconds, CPU seconds of this process) of one training step."""
    for p in params:
        p.grad = None
    torch.manual_seed(123)
    t, c = time.perf_counter(), time.process_time()
    loss = step(*inputs)
    loss.backward()
    dt, dc = time.perf_counter() - t, time.process_time() - c
    del loss
    return dt, dc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--models", default="resnet18,gpt,unet")
    ap.add_argument("--steps", type=int, default=15)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print("%d interleaved rounds (one step of every method per round), 1 thread (torch.set_num_threads(1)); "
          "peak = torch.profiler's step peak beyond params and inputs; CPU = this process's CPU time per step "
          "(median); extra = median over rounds of the step's CPU time / its baseline's in the same round, "
          "[quartiles]" % a.steps)
    print("%-9s %-44s %12s %8s %8s %20s" % ("model", "method", "peak (B)", "CPU (s)", "wall (s)", "extra [q1, q3]"))
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
        mc = remat_torch.min_cut_compile(model, inputs)
        mc_label = "AOT min-cut (%d nodes again, %.1f%% FLOPs)" % (mc.remat_report["recomputed_nodes"],
                                                                  100 * mc.remat_report["overhead"])
        methods = [("eager PyTorch", model, None),
                   ("AOT default partition", remat_torch.store_all_compile(model, inputs), None),
                   (mc_label, mc, "AOT default partition"),
                   ("checkpoint every block", checkpointed, "eager PyTorch")]
        peaks = {m[0]: peak_of(m[1], params, inputs) for m in methods}
        failed = []
        pairs = []          # (remat's label, the peer's label) at the peer's measured peak
        for label, peer in (("min-cut", mc_label), ("checkpoint", "checkpoint every block")):
            try:
                st = remat_torch.compile(model, inputs, budget=resident + peaks[peer], remat=a.remat)
            except RuntimeError as e:
                failed.append("remat at %s's peak: %s" % (label, str(e).split(": build/")[0][13:]))
                continue
            lab = "remat at %s's peak (%s, %.1f%% FLOPs)" % (label, st.remat_report["chosen"],
                                                            100 * float(st.remat_report["overhead"] or 0))
            if st.remat_report.get("rng_replays"):
                lab = lab[:-1] + ", %d draws replayed)" % st.remat_report["rng_replays"]
            methods.append((lab, st, "AOT default partition"))
            peaks[lab] = peak_of(st, params, inputs)
            pairs.append((lab, peer))
        times = {m[0]: [] for m in methods}
        for _ in range(a.steps):
            for label, st, _ in methods:
                times[label].append(timed_step(st, params, inputs))
        base_of = {label: base for label, _, base in methods}

        def extras(label):
            """Per round: the step's CPU time over its baseline's in the same round, less 1."""
            return [c / cb - 1 for (_, c), (_, cb) in zip(times[label], times[base_of[label]])]

        def summary(r, unit):
            r = sorted(r)
            q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
            return "%+.1f%s [%+.1f, %+.1f]" % (100 * statistics.median(r), unit, 100 * q[0], 100 * q[2])
        for label, _, base in methods:
            cpu = statistics.median(c for _, c in times[label])
            wall = statistics.median(w for w, _ in times[label])
            extra = summary(extras(label), "%") if base is not None else ""
            print("%-9s %-44s %12d %8.3f %8.3f %20s" % (name, label, peaks[label], cpu, wall, extra))
        for lab, peer in pairs:
            # The Done-when comparison itself: remat's extra time less the peer's, round by round, in
            # percentage points of each one's own baseline; below 0 with q3 below 0 is a win beyond noise.
            d = [x - y for x, y in zip(extras(lab), extras(peer))]
            r = sorted(d)
            q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
            verdict = ("remat costs less" if q[2] < 0 else "remat costs more" if q[0] > 0 else
                       "within noise (the quartiles straddle 0)")
            print("%-9s remat - %s at %s B vs %d B: extra time %s points: %s" %
                  (name, peer.split(" (")[0], peaks[lab], peaks[peer], summary(d, ""), verdict))
        for f in failed:
            print("%-9s %s" % (name, f))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
