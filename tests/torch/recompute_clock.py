#!/usr/bin/python3
"""recompute_clock.py - what bench_remat_torch.py's comparison with functorch's min-cut rests on, checked.

    /usr/bin/python3 tests/torch/recompute_clock.py REMAT

On the small GPT of remat_torch_check.py (4 pre-LN blocks, d_model 64,
batch 8 x 64 tokens, one thread), no timing thresholds (the machine is
shared), only counts, bytes and bits:

1. functorch's min-cut as torch 1.13 runs it (op list "nvfuser") measures
   the default partitioner's peak to the byte: views are not recomputable
   in that list, so the GELU output, which the next linear's backward reads
   through a view, is saved. With the "inductor" list and each recomputed
   node moved to its first use (min_cut_compile(ops="inductor", sink=True))
   the peak falls by exactly the four GELU outputs, 4 x (8 x 64 x 256 x 4 B)
   = 2097152 B, figured from the model's shape; left where functorch puts
   them (the start of the backward) the same recomputations rebuild every
   GELU output at once and the peak does not fall at all.
2. The recompute clock (remat_torch.RECOMPUTE_CLOCK) times exactly the
   nodes that recompute: per step as many calls as the backward graph has
   forward nodes (counted here from the graphs, by name, independently of
   the marks), none for the default partitioner or remat's store-all; a
   clock that is not set times nothing.
3. remat at the sunk min-cut's measured peak (objective="time", op
   durations measured on this CPU) measures at most that peak, its graph
   carries a duration for every op it may recompute, and its gradients,
   like the sunk min-cut's, are bit-identical to eager PyTorch's.

4. functorch's aggressive mode (min_cut_compile(ops="aggressive"), the
   installed partitioner with AGGRESSIVE_RECOMPUTATION switched on) on the
   small U-Net, sunk: gradients bit-identical to eager, the measured peak
   below the default partitioner's, every recomputing node timed (the count
   read off the graphs, as in 2, and the report's), batch norm among them
   and no op the mode bans (convolution, mm, ...); remat at that peak
   measures at most it, gradients bit-identical. Placed where functorch
   puts them, the same recomputations do not lower the peak below the
   sunk one's. On the GPT the mode draws each of its 13 dropout masks
   again (bernoulli_, which functorch 1.13 does not count as random): the
   report counts one per nn.Dropout module and the gradients are not
   eager's. A functorch without the switch's line is refused by name.

Prints one line per check; exits 1 on a failed one.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

import torch  # noqa: E402

import remat_torch  # noqa: E402
import remat_torch_check as rc  # noqa: E402

BAD = []


def check(name, ok, detail):
    print("%s %s: %s" % ("ok" if ok else "FAIL", name, detail))
    sys.stdout.flush()
    if not ok:
        BAD.append(name)


def clocked(step, params, inputs):
    """One step with the clock set: (calls, wall ns, thread CPU ns) of the recomputing nodes."""
    for p in params:
        p.grad = None
    torch.manual_seed(123)
    remat_torch.RECOMPUTE_CLOCK = clock = [0, 0, 0]
    try:
        step(*inputs).backward()
    finally:
        remat_torch.RECOMPUTE_CLOCK = None
    return clock


def recomputing_nodes(fw, bw):
    """Backward call_function nodes named as forward nodes: functorch copies what the backward recomputes
    under the forward node's name."""
    names = {n.name for n in fw.graph.nodes if n.op == "call_function"}
    return sum(1 for n in bw.graph.nodes if n.op == "call_function" and n.name in names)


def compiled_graphs(make):
    """(compiled step, [fw GraphModule, bw GraphModule]) of a compile function, catching the graphs."""
    seen = []
    orig = remat_torch.runner

    def spy(gm, inputs=None):
        seen.append(gm)
        return orig(gm, inputs)
    remat_torch.runner = spy
    try:
        step = make()
    finally:
        remat_torch.runner = orig
    return step, seen


# What functorch 1.13's aggressive mode never recomputes (partitioners.py: random_ops, compute_intensive_ops)
BANNED = {"native_dropout", "rand_like", "randn_like", "mm", "convolution", "convolution_backward", "bmm", "addmm",
          "upsample_bilinear2d"}


def aggressive(remat, gpt, gpt_params, gpt_inputs):
    """Section 4 of the docstring."""
    from torch_joint import _pkt
    model, inputs = rc.build("unet")
    params = list(model.parameters())
    _, eager = rc.profiled_step(model, params, inputs)
    graph = remat_torch.graph_of(model, inputs)
    resident = sum(t["bytes"] for t in graph["inputs"] + graph["params"])

    def peak(step):
        rc.profiled_step(step, params, inputs)
        p, grads = rc.profiled_step(step, params, inputs)
        return p, all(torch.equal(u, v) for u, v in zip(eager, grads))
    p_sa, _ = peak(remat_torch.store_all_compile(model, inputs))
    ag, ag_g = compiled_graphs(lambda: remat_torch.min_cut_compile(model, inputs, ops="aggressive", sink=True))
    p_ag, same = peak(ag)
    check("aggressive min-cut (sunk) on the U-Net", p_ag < p_sa and same,
          "measured %d B < the default partitioner's %d B, gradients %s" %
          (p_ag, p_sa, "bit-identical to eager" if same else "DIFFERENT"))
    fw, bw = ag_g[0], ag_g[1]
    names = {n.name for n in fw.graph.nodes if n.op == "call_function"}
    ops = sorted({_pkt(n) for n in bw.graph.nodes if n.op == "call_function" and n.name in names})
    want = recomputing_nodes(fw, bw)
    got = clocked(ag, params, inputs)
    check("clock aggressive min-cut", want > 0 and got[0] == want == ag.remat_report["recomputed_nodes"],
          "%d timed calls per step, %d recomputing nodes in its backward graph, %d reported" %
          (got[0], want, ag.remat_report["recomputed_nodes"]))
    check("aggressive min-cut recomputes", "native_batch_norm" in ops and not BANNED & set(ops),
          "%s: batch norm, none of the ops the mode bans" % ", ".join(ops))
    p_at, _ = peak(remat_torch.min_cut_compile(model, inputs, ops="aggressive"))
    check("aggressive min-cut (functorch's placement)", p_at > p_ag,
          "%d B > the sunk placement's %d B: the recomputations run at the start of the backward" % (p_at, p_ag))
    st = remat_torch.compile(model, inputs, budget=resident + p_ag, remat=remat, objective="time", calibrate=2)
    p_st, same_st = peak(st)
    check("remat (time) at the aggressive min-cut's peak", p_st <= p_ag and same_st,
          "%s, measured %d B <= %d B, gradients %s" % (st.remat_report["chosen"], p_st, p_ag,
                                                       "bit-identical" if same_st else "DIFFERENT"))

    _, eager = rc.profiled_step(gpt, gpt_params, gpt_inputs)
    g = remat_torch.min_cut_compile(gpt, gpt_inputs, ops="aggressive", sink=True)
    rc.profiled_step(g, gpt_params, gpt_inputs)
    _, grads = rc.profiled_step(g, gpt_params, gpt_inputs)
    drops = sum(1 for m in gpt.modules() if isinstance(m, torch.nn.Dropout))
    differ = not all(torch.equal(u, v) for u, v in zip(eager, grads))
    check("aggressive min-cut redraws the GPT's dropout", g.remat_report["random_recomputed"] == drops and differ,
          "%d random ops drawn again, %d nn.Dropout modules; gradients %s eager's" %
          (g.remat_report["random_recomputed"], drops, "not" if differ else "EQUAL TO"))

    switch = remat_torch.AGGRESSIVE_SWITCH
    remat_torch.AGGRESSIVE_SWITCH = "AGGRESSIVE_RECOMPUTATION = Maybe"
    try:
        remat_torch.aggressive_min_cut_partition()
        msg = "no error"
    except RuntimeError as e:
        msg = str(e)
    finally:
        remat_torch.AGGRESSIVE_SWITCH = switch
    check("aggressive min-cut without the switch's line", "partitioners.py" in msg and
          "0 lines `AGGRESSIVE_RECOMPUTATION = Maybe`" in msg and "cannot be switched on" in msg, msg)
    try:
        remat_torch.min_cut_compile(model, inputs, ops="eager")
        msg = "no error"
    except ValueError as e:
        msg = str(e)
    check("min-cut ops refused", "ops 'eager' is not nvfuser, inductor or aggressive" in msg, msg)


def main():
    remat = sys.argv[1]
    torch.set_num_threads(1)
    model, inputs = rc.build("gpt")
    params = list(model.parameters())
    _, eager = rc.profiled_step(model, params, inputs)
    graph = remat_torch.graph_of(model, inputs)
    resident = sum(t["bytes"] for t in graph["inputs"] + graph["params"])
    gpt = model.model
    gelu_bytes = len(gpt.blocks) * inputs[0].numel() * gpt.blocks[0].fc1.out_features * 4

    def peak(step):
        rc.profiled_step(step, params, inputs)
        p, grads = rc.profiled_step(step, params, inputs)
        return p, all(torch.equal(u, v) for u, v in zip(eager, grads))
    sa = remat_torch.store_all_compile(model, inputs)
    p_sa, _ = peak(sa)
    mc, mc_g = compiled_graphs(lambda: remat_torch.min_cut_compile(model, inputs))
    mcu, mcu_g = compiled_graphs(lambda: remat_torch.min_cut_compile(model, inputs, ops="inductor"))
    mcs, mcs_g = compiled_graphs(lambda: remat_torch.min_cut_compile(model, inputs, ops="inductor", sink=True))
    p_mc, _ = peak(mc)
    p_mcu, _ = peak(mcu)
    p_mcs, same_mcs = peak(mcs)
    check("min-cut (nvfuser ops) peak", p_mc == p_sa, "%d B, the default partitioner's %d B" % (p_mc, p_sa))
    check("min-cut (inductor ops, functorch's placement) peak", p_mcu == p_sa,
          "%d B, the default partitioner's %d B: the recomputed GELUs are rebuilt at once" % (p_mcu, p_sa))
    check("min-cut (inductor ops, sunk) peak", p_sa - p_mcs == gelu_bytes,
          "%d B = %d B less %d B, the four GELU outputs (4 x 8 x 64 x 256 x 4 B)" % (p_mcs, p_sa, p_sa - p_mcs))
    check("min-cut (inductor ops, sunk) gradients", same_mcs, "bit-identical to eager" if same_mcs else "DIFFERENT")

    for label, step, gms in (("min-cut (nvfuser ops)", mc, mc_g), ("min-cut (inductor ops, sunk)", mcs, mcs_g)):
        want = recomputing_nodes(gms[0], gms[1])
        got = clocked(step, params, inputs)
        check("clock %s" % label, want > 0 and got[0] == want and got[2] > 0,
              "%d timed calls per step, %d recomputing nodes in its backward graph" % (got[0], want))
    got = clocked(sa, params, inputs)
    check("clock default partition", got == [0, 0, 0], "%d timed calls" % got[0])
    for p in params:
        p.grad = None
    mc(*inputs).backward()
    check("clock unset", remat_torch.RECOMPUTE_CLOCK is None, "a step without the clock times nothing")

    st_sa = remat_torch.compile(model, inputs, budget=resident + p_sa, remat=remat, objective="time")
    got = clocked(st_sa, params, inputs)
    check("remat at the default partitioner's peak", st_sa.remat_report["chosen"] == "store-all" and
          got[0] == 0, "%s, %d timed calls" % (st_sa.remat_report["chosen"], got[0]))

    st, st_g = compiled_graphs(lambda: remat_torch.compile(model, inputs, budget=resident + p_mcs, remat=remat,
                                                           objective="time", calibrate=2))
    rep = st.remat_report
    p_st, same_st = peak(st)
    check("remat (time) at the sunk min-cut's peak", p_st <= p_mcs and same_st,
          "%s, measured %d B <= %d B, gradients %s" % (rep["chosen"], p_st, p_mcs,
                                                       "bit-identical" if same_st else "DIFFERENT"))
    with open(rep["graph"]) as f:
        g = json.load(f)
    timed = [d for d in g["ops"] if d.get("recomputable", True) and "alias_of" not in d]
    missing = [d["id"] for d in timed if not isinstance((d.get("attrs") or {}).get("duration_ns"), int)]
    check("remat (time) durations", not missing and "durations" in g["meta"],
          "%d recomputable ops, %d without attrs.duration_ns" % (len(timed), len(missing)))
    # calibrate may compile more than once: the step runs the last forward and backward graphs
    marked = sum(1 for gm in st_g[-2:] for n in gm.graph.nodes if n.meta.get(remat_torch.RECOMPUTED))
    got = clocked(st, params, inputs)
    check("clock remat (time)", marked > 0 and got[0] == marked,
          "%d timed calls per step, %d nodes marked as recomputations in its graphs" % (got[0], marked))
    aggressive(remat, model, params, inputs)
    print("recompute_clock: %d failed" % len(BAD))
    return 1 if BAD else 0


if __name__ == "__main__":
    sys.exit(main())
