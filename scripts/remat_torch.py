"""remat_torch.py - remat's rematerialization plan run in real PyTorch training, through AOTAutograd.

    import remat_torch
    step = remat_torch.compile(model, (x,), budget="4GiB")   # or budget=<bytes>
    loss = loss_fn(step(x), target); loss.backward()         # recomputes what remat's plan says
    print(step.remat_report)                                  # the remat call and the chosen plan

How it works (torch 1.13's functorch.compile.aot_module, functionalized):

1. AOTAutograd traces the module's forward and backward into one joint FX
   graph of ATen ops and calls our partition function with it.
2. joint_to_graph() (scripts/torch_joint.py) turns the joint graph's forward part into a remat graph
   (format v1) by the exporter's rules (scripts/export_torch.py): one op per
   ATen node with its exact output bytes (shape x dtype) and FLOPs, views
   (t, view, detach, ...) as `alias_of` their input, views of a weight read
   as the weight, random ops (dropout's bernoulli) not recomputable unless
   rng=True (the default of compile and graph_of): then each random op
   reads the generator state saved just before it and is recomputable,
   replaying that state (scripts/torch_rng.py, torch.utils.checkpoint's
   preserve_rng_state). An
   op's `saves` are the forward values its backward reads: the joint graph's
   backward nodes show which forward values are read at all; each is given
   to the op whose ATen formula reads it (an input of most ops, the output of
   relu/sigmoid/tanh/softmax/exp, the statistics or indices output of
   batch/layer norm and max-pool), else to the op that made it. Which op's
   formula reads a value is read off the joint graph: each backward node
   belongs to the forward op whose derivative it is (convolution_backward
   to convolution, threshold_backward to relu; torch_schedule.Owners), else
   to the op holding most of the forward values it reads. split/unbind
   outputs are views of their input; views that only the backward reads
   are their base. Batch norm's CPU backward temporary (as large as its
   input) is measured as bwd_workspace beside convolution's.
3. remat plans under the budget: `remat plan GRAPH --strategy S --budget B
   -o PLAN --json`, run as a subprocess (the binary is the `remat` argument,
   $REMAT, or build/remat of this checkout); the command and the plan's
   figures go to `remat_report` and, with verbose, to stderr.
4. The saved set is what the plan keeps, plus the parameters and inputs
   recomputation starts from; everything else the backward reads is
   recomputed there (functorch's _extract_fwd_bwd_modules copies the forward
   nodes it needs into the backward graph). The copies are then moved, each
   to just before its first user, so a recomputed value lives only while its
   backward needs it, as remat's schedule does.
   That is a keep set's schedule. A plan with a schedule of its own (dtr,
   revolve, chain-dp, exact, or auto choosing one of them) recomputes a
   value several times or frees it between uses, and may evict during the
   forward: torch_schedule.build makes forward and backward graphs that run
   that schedule, one copy per RECOMPUTE instance, each gradient node
   reading the instance remat has live at its BWD step. compile's
   schedule="always" runs keep-set plans that way too, "never" asks only
   keep-set strategies.
5. Both graphs run in a small interpreter that frees every value after its
   last use and lets the backward drop each saved tensor once read for the
   last time (the boxed calling convention), so PyTorch's live memory follows
   the schedule.

`min_cut_compile` and `store_all_compile` build the same module with
functorch's min-cut partitioner (its op list and placement as torch 1.13
has them, or the "inductor" list or functorch's aggressive mode with the
recomputation sunk to first use) and its default (save what the forward made) partitioner, through
the same interpreter: the peers the bench compares with.

compile(objective="time") measures each forward op's time on this machine
and has remat plan for the least predicted recomputation time (remat plan
--objective time) instead of the least FLOPs. Every node that recomputes
carries node.meta[RECOMPUTED], and while RECOMPUTE_CLOCK is set the
interpreter times them: the extra time of a plan measured where it is
spent (scripts/bench_remat_torch.py).
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import torch.fx as fx
from functorch.compile import aot_module, min_cut_rematerialization_partition, default_partition
from functorch.compile import config as aot_config
from functorch._src.partitioners import _extract_fwd_bwd_modules, _is_tangent
from functorch._src.named_members_polyfill import _named_buffers, _named_parameters

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_schedule  # noqa: E402
import torch_rng  # noqa: E402
from torch_measure import measured_peak, measured_peaks  # noqa: E402,F401  (re-exported)

from torch_joint import RANDOM, _meta, _pkt, split_joint, joint_to_graph  # noqa: E402,F401  (RANDOM re-exported)


def _default_remat():
    return os.environ.get("REMAT") or os.path.join(os.path.dirname(HERE), "build", "remat")


def saved_values_for(joint, keep, tid_of, graph):
    """The forward nodes the backward receives: kept values it reads, and whatever recomputing the others
    starts from (kept values, parameters, inputs). A view or base of a kept tensor's storage is saved as
    it is: remat's kept view holds its base's storage, so reading it costs no memory."""
    fwd, read, primals, _ = split_joint(joint)
    fwd_set = set(fwd)
    alias = {}
    for d in graph["ops"]:
        if "alias_of" in d:
            alias[d["id"]] = d["alias_of"]

    def root(t):
        while t in alias:
            t = alias[t]
        return t
    # remat's default policy always keeps what cannot be recomputed (dropout's random draw), listed in the
    # plan's keep set or not: recomputing it would draw another mask.
    fixed = [o["id"] for d in graph["ops"] if d.get("recomputable") is False for o in d.get("outputs", [d])]
    held = {root(k) for k in list(keep) + fixed}
    # A view of a parameter (a weight's transpose, which remat counts as the weight) is saved as it is: it
    # holds no bytes beyond the resident weight, and rebuilding it in the backward is a call for nothing.
    held |= {p["id"] for p in graph["params"]}
    saved, seen = [], set()

    def need(v):
        if v in seen:
            return
        seen.add(v)
        t = tid_of.get(v)
        if v.op == "placeholder" or (t is not None and root(t) in held):
            saved.append(v)
            return
        if v not in fwd_set:
            return
        for i in v.all_input_nodes:
            need(i)

    for v in sorted(read, key=lambda n: n.name):
        if v.op == "placeholder" or v in fwd_set:
            need(v)
    # tuple-valued nodes cannot be saved: save their getitems instead
    out = []
    for v in saved:
        tm = _meta(v)
        if v.op != "placeholder" and (tm is None or not hasattr(tm, "shape")):
            out.extend(u for u in v.users if _pkt(u) == "getitem")
        else:
            out.append(v)
    return list(dict.fromkeys(out))


def recompute_bound(joint, graph, tid, schedule):
    """For sink_recomputation on a keep set's backward graph: the node a recomputed node must precede so
    that the step's live set is the one remat replayed. remat recomputes a value before the BWD step that
    first reads it (the first BWD after its first RECOMPUTE instruction) and before that step allocates
    any gradient: moved only to its first user, a recomputed input of a linear's weight gradient would
    run after the same step's input gradient, both live at once (the 8-block chain at 0.7 of its
    activation peak measured 1.066 of the prediction). The bound is the first node of the graph whose
    gradient step (torch_schedule.gradient_steps) is that step or later."""
    steps, _ = torch_schedule.gradient_steps(joint, graph, tid, schedule)
    at, nxt = {}, None
    for i in range(len(schedule) - 1, -1, -1):   # each RECOMPUTE's next BWD, the first RECOMPUTE of each op
        kind, _, name = schedule[i].partition(" ")
        if kind == "BWD":
            nxt = i
        elif kind == "RECOMPUTE" and nxt is not None:
            at[name] = nxt

    def bound(n, order):
        s = at.get(n.name)
        if s is None:
            return None
        later = [m for m in order if steps.get(m.name, -1) >= s]
        return min(later, key=lambda m: order[m]) if later else None
    return bound


def sink_recomputation(bw, recomputed_names, bound=None):
    """Moves each recomputed node of a backward graph to just before its first user (latest first), or
    before bound(node, order) where that is earlier (a node of the graph, or None). A multi-output node
    moves with its getitems right behind it: the tuple holds every output until its last getitem has run,
    so a statistics getitem read late would keep a big output alive."""
    g = bw.graph
    nodes = [n for n in g.nodes if n.op == "call_function" and n.name in recomputed_names and _pkt(n) != "getitem"]
    for n in reversed(nodes):
        order = {m: i for i, m in enumerate(g.nodes)}
        items = [u for u in n.users if _pkt(u) == "getitem"]
        users = [u for u in n.users if _pkt(u) != "getitem"] + [w for u in items for w in u.users]
        if not users:
            continue
        first = min(users, key=lambda u: order[u])
        b = bound(n, order) if bound else None
        if b is not None and order[b] < order[first]:
            first = b
        if order[first] > order[n] + 1 + len(items):
            first.prepend(n)
            for u in sorted(items, key=lambda u: u.args[1]):
                first.prepend(u)
    g.lint()
    bw.recompile()
    return bw


MARK_RETURNED = False     # runner: mark each returned gradient for measured_peaks (profiling only)
# The extra time of a plan is the time its recomputation takes, which a whole-step ratio shows only through
# the step's noise. Every node that recomputes a forward value (a forward node copied into the backward
# graph, or a RECOMPUTE copy in the forward) carries node.meta[RECOMPUTED]; while RECOMPUTE_CLOCK is a
# list [calls, wall ns, thread CPU ns], the runner adds each such node's kernel call to it (its arguments
# are looked up outside the timed span). Thread CPU time: on one intra-op thread the ATen kernel runs on
# the calling thread, so other processes on a loaded machine do not inflate it as they do wall time.
RECOMPUTED = torch_schedule.RECOMPUTED
RECOMPUTE_CLOCK = None


def recomputed_in(fw, bw):
    """The names of the nodes a backward graph computes again: those the forward graph runs too (as
    functorch's AOT_PARTITIONER_DEBUG counts them). A forward-side node that only the backward runs (a
    view of a saved value that only a gradient formula reads) is computed once, not again."""
    names = {n.name for n in fw.graph.nodes if n.op == "call_function"}
    return {n.name for n in bw.graph.nodes if n.op == "call_function" and n.name in names}


def mark_recomputed(gm, names):
    """Marks the call_function nodes of gm named in names as recomputations (RECOMPUTED)."""
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.name in names:
            n.meta[RECOMPUTED] = True


def runner(gm, _inputs=None):
    """A boxed function running an FX graph node by node, freeing each value after its last use (and the
    caller's argument list as it is read), so memory follows the graph's order."""
    nodes = list(gm.graph.nodes)
    last = {}
    for i, n in enumerate(nodes):
        for a in n.all_input_nodes:
            last[a] = i
    free_after = {}
    for a, i in last.items():
        free_after.setdefault(i, []).append(a)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    timed = {n for n in nodes if n.meta.get(RECOMPUTED)}
    # The backward graph's results (it reads tangents): the parameter gradients
    returned = set()
    if nodes and nodes[-1].op == "output" and any(_is_tangent(n) for n in nodes):
        returned = set(nodes[-1].all_input_nodes)

    def load(a, env):
        if isinstance(a, fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(load(x, env) for x in a)
        if isinstance(a, dict):
            return {k: load(v, env) for k, v in a.items()}
        return a

    def run(args):
        env = {}
        for p, a in zip(placeholders, args):
            env[p] = a
        args.clear()
        for i, n in enumerate(nodes):
            if n.op == "placeholder":
                pass
            elif n.op == "call_function":
                pos, kw = load(n.args, env), load(n.kwargs, env)
                clock = RECOMPUTE_CLOCK if n in timed else None
                if clock is None:
                    env[n] = n.target(*pos, **kw)
                else:
                    w, c = time.perf_counter_ns(), time.thread_time_ns()
                    env[n] = n.target(*pos, **kw)
                    clock[2] += time.thread_time_ns() - c
                    clock[1] += time.perf_counter_ns() - w
                    clock[0] += 1
                del pos, kw     # the arguments' references, which would outlive their last use
                if MARK_RETURNED and n in returned and isinstance(env[n], torch.Tensor):
                    # measured_peaks: from here on this storage is a returned (parameter) gradient
                    v = env[n]
                    with torch.profiler.record_function("remat_torch:returned:%d:%d" %
                                                        (v.storage().data_ptr(), v.storage().nbytes())):
                        pass
            elif n.op == "get_attr":
                env[n] = getattr(gm, n.target)
            elif n.op == "output":
                if MARK_RETURNED and returned:
                    with torch.profiler.record_function("remat_torch:backward_end"):
                        pass
                return list(load(n.args[0], env))
            for a in free_after.get(i, ()):
                env.pop(a, None)
            if n.op == "placeholder" and n not in last:
                env.pop(n, None)
        return None

    run._boxed_call = True
    return run


def _param_info(model):
    params = dict(_named_parameters(model, remove_duplicate=False))
    buffers = dict(_named_buffers(model, remove_duplicate=False))
    frozen = [not p.requires_grad for p in params.values()] + [True] * len(buffers)
    return len(params) + len(buffers), frozen


def _real_primals(model, example_inputs):
    return (list(dict(_named_parameters(model, remove_duplicate=False)).values()) +
            list(dict(_named_buffers(model, remove_duplicate=False)).values()) + list(example_inputs))


class Compiled(torch.nn.Module):
    """The compiled module: call it like the model; `remat_report` holds the remat call and the plan."""

    def __init__(self, model, aot, report):
        super().__init__()
        self.model = model
        self.aot = aot
        self.remat_report = report

    def forward(self, *args):
        return self.aot(*args)


def _aot(model, partition):
    old = aot_config.use_functionalize
    aot_config.use_functionalize = True
    try:
        return aot_module(model, fw_compiler=runner, bw_compiler=runner, partition_fn=partition)
    finally:
        aot_config.use_functionalize = old


def _warm(compiled, example_inputs):
    """Traces and partitions now (AOTAutograd compiles on the first call), with the RNG state restored."""
    state = torch.get_rng_state()
    out = compiled(*example_inputs)
    torch.set_rng_state(state)
    del out


# Strategies whose plans are keep sets run by remat's default policy (graphs/README.md, "The default
# policy"): the keep-set path builds their graphs; the others' schedules go to torch_schedule.
KEEP_SET = ("store-all", "sqrtn", "chen-greedy", "mincut")
CANDIDATES = (("store-all",), ("auto",), ("chen-greedy",), ("chen-greedy", "--linearized"), ("sqrtn",),
              ("sqrtn", "--linearized"),
              ("mincut",), ("dtr",), ("revolve",), ("chain-dp",))


# --objective time's device: only ops without a measured duration use its roofline (views, which cost 0;
# the generator-state ops, which are never recomputed), the figures bench_step_time.py uses for this CPU.
CPU_DEVICE = {"format": "remat-device", "version": 1, "name": "cpu-this-machine",
              "peak_flops": {"f32": 5e10, "f64": 2.5e10}, "memory_bandwidth": 1e10,
              "link_bandwidth": 1e9, "link_latency": 1e-5}


def cost(rep):
    """What choose_plan minimises: the replayed plan's predicted recomputation time when it was planned
    with a device (--objective time), else its recomputed FLOPs; ties go to fewer FLOPs, then to fewer
    recomputations (remat prices a view at 0, but each recomputed view is one more dispatched call)."""
    t = rep.get("time")
    flops = rep["flops"]["recompute"]
    return (t["recompute_s"] if t else flops, flops, sum((rep.get("recompute_counts") or {}).values()))


def choose_plan(remat, gpath, workdir, budget, budget_option, strategies, report, schedules=True, extra=()):
    """Asks remat for a plan under the budget from each candidate strategy (one subprocess each, the
    commands recorded in report["commands"]); keeps the feasible plan that costs least (cost: the extra
    FLOPs, or with extra = --device D --objective time the predicted recomputation time; schedules=False:
    keep-set plans only)."""
    best = None
    report["commands"] = []
    for i, cand in enumerate(strategies):
        ppath = os.path.join(workdir, "plan-%d.json" % i)
        cmd = [remat, "plan", gpath, "--strategy", cand[0]] + list(cand[1:]) + [budget_option, str(budget), "-o",
                                                                               ppath, "--json"] + list(extra)
        r = subprocess.run(cmd, capture_output=True, text=True)
        line = {"command": " ".join(cmd), "exit": r.returncode}
        report["commands"].append(line)
        if r.returncode != 0:
            line["message"] = r.stderr.strip()
            continue
        with open(ppath) as f:
            plan = json.load(f)
        rep = json.loads(r.stdout)["replay"]
        chosen = (plan.get("params") or {}).get("chosen", plan.get("strategy"))
        line.update(chosen=chosen, peak_bytes=rep["peak_bytes"], recompute_flops=rep["flops"]["recompute"])
        if not schedules and not is_keep_set(chosen):
            line["skipped"] = "its own schedule"
            continue
        if rep.get("time"):
            line["recompute_s"] = rep["time"]["recompute_s"]
        # on a tie a keep set (functorch's split, no schedule copies): auto's own store-all is a schedule
        key = cost(rep) + (not is_keep_set(chosen),)
        if best is None or key < best[5]:
            best = (plan, rep, ppath, line["command"], cand, key)
    if best is None:
        why = "; ".join("%s -> exit %d %s" % (c["command"], c["exit"], c.get("message") or c.get("skipped", ""))
                        for c in report["commands"])
        raise RuntimeError("remat_torch: no %splan meets %s %s: %s" %
                           ("" if schedules else "keep-set ", budget_option, budget, why))
    report["command"], report["plan"], report["candidate"] = best[3], best[2], best[4]
    return best[0], best[1]


def is_keep_set(chosen):
    """Whether a plan's strategy hands a keep set to remat's default policy (auto's local search does)."""
    name = str(chosen).split("/")[0]     # chen-greedy/linearized, sqrtn/paper
    return name in KEEP_SET or name.startswith("local")


UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "KB": 10 ** 3,
         "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12}


def parse_bytes(b):
    """An int, or a size as remat reads it ("4GiB" = 4 x 2^30, "1.5GB" = 1.5 x 10^9), in bytes."""
    if isinstance(b, int):
        return b
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|B)?\s*", str(b))
    if not m or (m.group(2) or "") not in UNITS:
        raise ValueError("remat_torch: budget '%s' is not a byte size (123, 4KiB, 1.5GiB, 2GB)" % b)
    return int(float(m.group(1)) * UNITS[m.group(2) or ""])


def compile(model, example_inputs, budget, remat=None, strategies=CANDIDATES, verbose=False, workdir=None,
            budget_option="--budget", calibrate=0, schedule="auto", rng=True, objective="flops"):
    """A module whose training step recomputes what remat's plan under `budget` says.

    budget: bytes (int) or a size remat reads ("4GiB", "1.5GB"): the whole step's peak (remat's --budget:
    params, gradients, activations, workspace). budget_option="--activation-budget" caps activations only.
    calibrate=N: measure one step (measured_peak); while params and inputs plus the measured peak exceed
    the budget, plan again (at most N times) under the budget less the excess. remat_report["calibration"]
    lists each round's planned budget and measured peak.
    rng=True: random ops are recomputable, replaying the generator state saved at their draw (torch_rng);
    False: they are kept, as functorch's partitioners keep them.
    objective="flops": the plan with the least recomputed FLOPs; "time": each op's duration is measured
    on this machine (joint_to_graph's timings) and remat plans with `--objective time` on it (CPU_DEVICE),
    keeping the plan with the least predicted recomputation time. On a CPU without a fusing compiler a
    small op's time is mostly dispatch, which FLOPs do not see: a plan of many cheap ops (a view, a
    dropout mask drawn again) can be fewer FLOPs and more time.
    """
    if objective not in ("flops", "time"):
        raise ValueError("remat_torch: objective '%s' is not flops or time" % objective)
    if not calibrate:
        return _compile(model, example_inputs, budget, remat, strategies, verbose, workdir, budget_option, schedule,
                        rng, objective)
    target = parse_bytes(budget)
    planned = target
    rounds = []
    step = None
    for _ in range(calibrate + 1):
        step = _compile(model, example_inputs, planned, remat, strategies, verbose, workdir, budget_option,
                        schedule, rng, objective)
        peak = measured_peak(step, model, example_inputs)
        total = step.remat_report["resident_bytes"] + peak
        rounds.append({"planned_budget": planned, "measured_peak": peak, "measured_total": total})
        if total <= target:
            break
        planned -= total - target
    step.remat_report["calibration"] = rounds
    return step


def _compile(model, example_inputs, budget, remat, strategies, verbose, workdir, budget_option, schedule, rng,
             objective):
    remat = remat or _default_remat()
    n_params, frozen = _param_info(model)
    report = {"objective": objective}
    workdir = workdir or tempfile.mkdtemp(prefix="remat-torch-")
    extra = ()
    if objective == "time":
        dev = os.path.join(workdir, "device.json")
        with open(dev, "w") as f:
            json.dump(CPU_DEVICE, f)
        extra = ("--device", dev, "--objective", "time")

    def partition(joint, joint_inputs):
        graph, node_of = joint_to_graph(joint, n_params, frozen, graph_name=type(model).__name__,
                                        real=_real_primals(model, example_inputs),
                                        timings=5 if objective == "time" else 0)
        # Two graphs when the model draws random numbers: its draws kept, and its draws recomputable
        # under saved generator states (torch_rng), which cost their bytes even where a plan never
        # recomputes the draw. remat plans both; the plan that costs less wins (cost), the kept draws
        # on a tie (so a budget that needs no recomputation gets store-all, with no states).
        variants = [("draws kept", joint, graph, node_of)]
        if rng and any(torch_rng.is_random(n) for n in joint.graph.nodes):
            j2 = copy.deepcopy(joint)
            by_name = {n.name: t for n, t in node_of.items()}
            t2 = {n: by_name[n.name] for n in j2.graph.nodes if n.name in by_name}
            variants.append(("draws replayed", j2, torch_rng.add_states(j2, copy.deepcopy(graph), t2), t2))
        best, commands, errors = None, [], []

        def try_variant(k, label, j, g, t, cands):
            nonlocal best
            gpath = os.path.join(workdir, ("graph.json", "graph-rng.json", "graph-rng-used.json")[k])
            with open(gpath, "w") as f:
                json.dump(g, f)
            sub, pdir = {}, os.path.join(workdir, ("", "rng", "rng-used")[k])
            os.makedirs(pdir, exist_ok=True)
            try:
                plan, rep = choose_plan(remat, gpath, pdir, budget, budget_option, cands, sub,
                                        schedules=schedule != "never", extra=extra)
            except RuntimeError as e:
                errors.append(e)
                return
            finally:
                commands.extend(dict(c, graph=label) for c in sub.get("commands", []))
            # the kept draws win a tie with the replayed ones; the fewer states win a tie with all of them
            if best is None or (cost(rep) <= cost(best[5]) if k == 2 else cost(rep) < cost(best[5])):
                best = (label, j, g, t, plan, rep, sub, gpath)
        for k, (label, j, g, t) in enumerate(variants):
            try_variant(k, label, j, g, t, strategies)
        if best is not None and best[0] == "draws replayed":
            # The states of the draws the plan never recomputes are charged in its prediction (kept to
            # their saver's backward step) but saved by no graph: plan the same strategy again on a graph
            # with states for the recomputed draws only, so the prediction is what the step keeps.
            again = set(best[5].get("recompute_counts") or {})
            drawn = [d["id"] for d in best[2]["ops"] if "rng_state" in (d.get("attrs") or {})]
            used = [x for x in drawn if x in again]
            if len(used) < len(drawn):
                j3 = copy.deepcopy(joint)
                by_name = {n.name: x for n, x in node_of.items()}
                t3 = {n: by_name[n.name] for n in j3.graph.nodes if n.name in by_name}
                g3 = torch_rng.add_states(j3, copy.deepcopy(graph), t3, only=set(used))
                try_variant(2, "draws replayed, %d of %d states" % (len(used), len(drawn)), j3, g3, t3,
                            (best[6]["candidate"],))
        report["commands"] = commands
        if best is None:
            raise errors[-1]
        label, joint, graph, node_of, plan, rep, sub, gpath = best
        report.update(command=sub["command"], plan=sub["plan"], random_ops=label)
        keep = set(plan["keep"])
        report["resident_bytes"] = sum(t["bytes"] for t in graph["inputs"] + graph["params"])
        report.update(graph=gpath, keep=sorted(keep), peak_bytes=rep["peak_bytes"],
                      recompute_s=(rep.get("time") or {}).get("recompute_s"),
                      activation_peak_bytes=rep.get("activation_peak_bytes"), flops=rep["flops"],
                      overhead=rep.get("overhead"), strategy=plan.get("strategy"),
                      chosen=(plan.get("params") or {}).get("chosen", plan.get("strategy")))
        if schedule == "always" or not is_keep_set(report["chosen"]):
            # remat's schedule itself: one copy per recomputation (torch_schedule.py)
            fw, bw, info = torch_schedule.build(joint, graph, node_of, plan["schedule"])
            report["graphs"] = "schedule"
            report["recomputed_nodes"] = info["recompute_copies"]
            report["saved_values"] = info["saved_values"]
            report["schedule_info"] = info
            recomputed = range(info["recompute_copies"])
        else:
            saved = saved_values_for(joint, keep, node_of, graph)
            fw, bw = _extract_fwd_bwd_modules(joint, saved)
            torch_rng.mark_replays(bw)
            fwd_names = {n.name for n in split_joint(joint)[0]}
            recomputed = {n.name for n in bw.graph.nodes if n.op == "call_function" and n.name in fwd_names}
            report["graphs"] = "keep set"
            report["saved_values"] = len(saved)
            sink_recomputation(bw, recomputed, recompute_bound(joint, graph, node_of, plan["schedule"]))
            recomputed = recomputed_in(fw, bw)
            report["recomputed_nodes"] = len(recomputed)
            mark_recomputed(bw, recomputed)
        report["rng_replays"] = torch_rng.replays(fw, bw)
        if verbose:
            print("remat_torch: %s\nremat_torch: plan %s keeps %d of %d activations, replayed peak %s B, "
                  "%d forward nodes recomputed in backward" %
                  (report["command"], report["chosen"], len(keep),
                   sum(1 for d in graph["ops"] if "alias_of" not in d), rep["peak_bytes"], len(recomputed)),
                  file=sys.stderr)
        return fw, bw

    compiled = _aot(model, partition)
    _warm(compiled, example_inputs)
    return Compiled(model, compiled, report)


def graph_of(model, example_inputs, rng=True):
    """The remat graph of the model's joint graph (no plan): for store-all figures and budgets (rng: as
    compile's)."""
    n_params, frozen = _param_info(model)
    box = {}

    def partition(joint, joint_inputs):
        g, tid = joint_to_graph(joint, n_params, frozen, graph_name=type(model).__name__,
                                real=_real_primals(model, example_inputs))
        box["graph"] = torch_rng.add_states(joint, g, tid) if rng else g
        return default_partition(joint, joint_inputs)

    _warm(_aot(model, partition), example_inputs)
    return box["graph"]


AGGRESSIVE_SWITCH = "AGGRESSIVE_RECOMPUTATION = False"


def aggressive_min_cut_partition():
    """functorch's own min_cut_rematerialization_partition with its aggressive mode on: this is the
    installed functorch's code, not a copy of it. The function's source is read at run time
    (inspect.getsourcelines), its one local assignment `AGGRESSIVE_RECOMPUTATION = False` (torch 1.13,
    functorch/_src/partitioners.py; torch 2 makes it torch._functorch.config.aggressive_recomputation) is
    turned to True, and the result is compiled in the partitioners module's own namespace, with the
    installed file's name and line numbers, so it calls the same helpers. With the switch on, the
    partitioner bans from recomputation only random ops and its compute-intensive ops (mm, convolution,
    bmm, addmm, upsample_bilinear2d) and may recompute everything else (batch norm, relu, add, cat,
    pooling, views). Raises RuntimeError naming the file when the assignment is not there exactly once
    (another functorch). The module's own function is left as it is."""
    import ast
    import builtins
    import inspect
    from functorch._src import partitioners
    f = partitioners.min_cut_rematerialization_partition
    lines, first = inspect.getsourcelines(f)
    src = "".join(lines)
    where = inspect.getsourcefile(f) or partitioners.__file__
    if src.count(AGGRESSIVE_SWITCH) != 1:
        raise RuntimeError("remat_torch: %s: min_cut_rematerialization_partition has %d lines `%s`, not 1: "
                           "this functorch's aggressive mode cannot be switched on" %
                           (where, src.count(AGGRESSIVE_SWITCH), AGGRESSIVE_SWITCH))
    tree = ast.parse(src.replace(AGGRESSIVE_SWITCH, "AGGRESSIVE_RECOMPUTATION = True"))
    ast.increment_lineno(tree, first - 1)
    defined = {}
    exec(builtins.compile(tree, where, "exec"), vars(partitioners), defined)    # this module's compile is ours
    return defined[f.__name__]


def min_cut_compile(model, example_inputs, ops="nvfuser", sink=False):
    """functorch's min-cut rematerialization partitioner, through the same interpreter. remat_report counts
    the forward nodes its backward graph recomputes ("recomputed_nodes") and their FLOPs by the remat
    graph's counts ("recompute_flops", "overhead": over forward + backward FLOPs, as remat reports), and
    how many of them are random ops drawn again without their generator state ("random_recomputed").

    ops: the partitioner's `compiler` argument, which picks the ops it may recompute: "nvfuser" (torch
    1.13's default: pointwise ops and reductions, no views, so a pointwise op whose output the backward
    reads through a view, as GELU's through the next linear's reshape, is saved) or "inductor" (views
    too, within 4 nodes of the backward; torch 2's default) or "aggressive" (functorch's own aggressive
    mode, aggressive_min_cut_partition: every op but random and compute-intensive ones, so batch norm,
    pooling, add and cat too; the "inductor" list still sets its fusion weights). sink=True moves each
    recomputed node to just before its first user, as compile does for remat's keep sets: functorch
    leaves them where the joint graph had them, at the start of the backward, where they rebuild every
    value at once, and only a fusing compiler (not this interpreter) would move them. The recomputed
    nodes carry RECOMPUTED."""
    if ops not in ("nvfuser", "inductor", "aggressive"):
        raise ValueError("remat_torch: min_cut_compile's ops '%s' is not nvfuser, inductor or aggressive" % ops)
    cut = aggressive_min_cut_partition() if ops == "aggressive" else min_cut_rematerialization_partition
    n_params, frozen = _param_info(model)
    report = {"partitioner": "min_cut_rematerialization_partition", "ops": ops,
              "placement": "first use" if sink else "functorch's"}

    def partition(joint, joint_inputs):
        graph = joint_to_graph(joint, n_params, frozen, real=_real_primals(model, example_inputs))[0]
        fwd_names = {n.name for n in split_joint(joint)[0]}
        fw, bw = cut(joint, joint_inputs, compiler="inductor" if ops == "aggressive" else ops)
        flops = {d["id"]: (d.get("flops", 0), d.get("bwd_flops", 2 * d.get("flops", 0))) for d in graph["ops"]}
        moved = [n.name for n in bw.graph.nodes if n.op == "call_function" and n.name in fwd_names]
        again = recomputed_in(fw, bw)
        report.update(recomputed_nodes=len(again), recompute_flops=sum(flops.get(x, (0, 0))[0] for x in again))
        report["overhead"] = report["recompute_flops"] / max(1, sum(f + b for f, b in flops.values()))
        # functorch 1.13 bans native_dropout, rand_like and randn_like from recomputation, but on CPU
        # dropout is traced as bernoulli_, which the aggressive mode then draws again: a new mask
        report["random_recomputed"] = sum(1 for n in bw.graph.nodes if n.name in again and
                                          (_pkt(n).rstrip("_") in RANDOM or _pkt(n) in RANDOM))
        if sink:
            sink_recomputation(bw, set(moved))
        mark_recomputed(bw, again)
        return fw, bw
    c = _aot(model, partition)
    _warm(c, example_inputs)
    return Compiled(model, c, report)


def store_all_compile(model, example_inputs):
    """functorch's default partitioner (saves what the forward computed), through the same interpreter."""
    c = _aot(model, default_partition)
    _warm(c, example_inputs)
    return Compiled(model, c, {"partitioner": "default_partition"})
