"""torch_schedule.py - remat's schedule (FWD, RECOMPUTE, BWD, FREE) as AOTAutograd forward and backward graphs.

    fw, bw, info = torch_schedule.build(joint, graph, tid, plan["schedule"])

scripts/remat_torch.py's keep-set path hands functorch one forward/backward
split in which every recomputed value has a single copy, alive from its first
to its last backward use. remat's own schedules (dtr, revolve, chain-dp,
exact, auto when it picks one of them) do more: they free a value between
uses and recompute it again, several times if need be, and may evict and
rebuild during the forward. This module builds graphs that do the same.

The schedule is read as tensor *instances*: every FWD or RECOMPUTE of an op
at instruction c makes a new instance of its outputs, alive until the FREE
that names them. Every FX node that reads a forward value reads one
instance, the one remat's schedule has live at the reading instruction:

* the forward graph runs the schedule's FWD instructions in order; an op
  reads its inputs' instances live at its FWD (a RECOMPUTE during the
  forward, as DTR's evictions make, becomes a fresh copy of the node); its
  outputs are the forward's results and every activation remat holds
  resident when the first BWD starts (the saved set), plus the parameters
  and inputs;
* the backward graph keeps AOTAutograd's gradient nodes in their order; each
  is assigned the remat BWD step it belongs to (the op whose inputs, outputs
  and saves best match the forward values it reads, the latest step its
  gradient inputs allow breaking ties) and reads, for each forward value,
  the instance live at that step (else the next one remat makes, else the
  last one). An instance that is not a saved value is a copy of the forward
  node, made just before its first reader, reading its own inputs' instances
  at its RECOMPUTE instruction, so a value recomputed three times has three
  copies, each freed after its last reader by remat_torch's interpreter.

Which instance a gradient node reads is a matter of memory only: every copy
computes the same bits from the same inputs (recomputable ops are
deterministic on CPU; a random op's copy made for a RECOMPUTE replays the
generator state saved at its FWD, scripts/torch_rng.py), so the gradients
equal eager PyTorch's whatever the assignment.
"""
import collections
import os
import sys

import torch.fx as fx
from functorch._src.partitioners import (_extract_fwd_bwd_outputs, _extract_graph_with_inputs_outputs, _is_primal,
                                         _is_tangent)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_rng  # noqa: E402


# node.meta key of a copy that recomputes a value (a RECOMPUTE instance; remat_torch's runner times them)
RECOMPUTED = "remat_recomputed"


def intervals(schedule, graph):
    """tensor id -> [[create instruction, free instruction or None]], op id -> its BWD instruction, the
    first BWD's instruction."""
    outs = {d["id"]: [o["id"] for o in d.get("outputs", [d])] for d in graph["ops"]}
    iv, bwd, first = {}, {}, None
    for i, ins in enumerate(schedule):
        kind, _, name = ins.partition(" ")
        if kind in ("FWD", "RECOMPUTE"):
            for t in outs.get(name, [name]):
                iv.setdefault(t, []).append([i, None])
        elif kind == "FREE":
            if name in iv and iv[name][-1][1] is None:
                iv[name][-1][1] = i
        elif kind == "BWD":
            bwd[name] = i
            if first is None:
                first = i
    return iv, bwd, len(schedule) if first is None else first


def instance(iv, t, s, limit=None):
    """The create instruction of tensor t's instance read at instruction s: the one live at s, else the
    next one made after s, else the last one (limit: only instances made before it)."""
    lst = [x for x in iv.get(t, ()) if limit is None or x[0] < limit]
    if not lst:
        return None
    live = [c for c, f in lst if c <= s and (f is None or f > s)]
    if live:
        return max(live)
    later = [c for c, _ in lst if c > s]
    return min(later) if later else max(c for c, _ in lst)


def _pkt(node):
    t = node.target
    return t.overloadpacket.__name__ if hasattr(t, "overloadpacket") else getattr(t, "__name__", str(t))


def _formula_of(bname, fop):
    """Whether ATen backward op bname is the derivative formula of forward op fop (derivatives.yaml's
    naming: convolution -> convolution_backward, _softmax -> _softmax_backward_data, embedding ->
    embedding_dense_backward; relu's is threshold_backward)."""
    if bname == "threshold_backward":
        return fop in ("relu", "threshold")
    b, f = bname.lstrip("_"), fop.lstrip("_")
    return "backward" in b and (b.startswith(f + "_backward") or b.startswith(f + "_dense_backward"))


class Owners:
    """Which forward op's backward step a backward node of the joint graph belongs to: the op whose inputs
    and outputs hold most of the forward values the node reads, an op whose derivative formula the node is
    counting ten. Ops: remat graph ops (dicts); tid: fx node -> remat tensor id."""

    def __init__(self, ops, tid):
        self.tid = tid
        self.by_tensor = collections.defaultdict(list)
        self.kind = {d["id"]: d["op"] for d in ops}
        self.alias = {d["id"]: d["alias_of"] for d in ops if "alias_of" in d}
        for d in ops:
            if "alias_of" in d:
                continue
            for t in set(d["inputs"]) | {o["id"] for o in d.get("outputs", [d])}:
                self.by_tensor[t].append(d["id"])

    def __call__(self, bnode, forward_args):
        """The op ids tied for the best score (empty when the node reads no forward value any op holds)."""
        score = collections.Counter()
        name = _pkt(bnode)
        for a in forward_args:
            t, ts = self.tid.get(a), []
            while t is not None and t not in ts:   # a view counts as its base too
                ts.append(t)
                t = self.alias.get(t)
            for x in {x for t in ts for x in self.by_tensor.get(t, ())}:
                score[x] += 1
        for x in score:
            if _formula_of(name, self.kind[x]):
                score[x] += 10
        if not score:
            return []
        best = max(score.values())
        return [x for x, v in score.items() if v == best]


class _Builder:
    """Copies joint-graph forward nodes into a new graph, one copy per (node, instance)."""

    def __init__(self, graph, tid, iv, base, limit=None, fwd_at=()):
        self.g, self.tid, self.iv, self.limit = graph, tid, iv, limit
        self.fwd_at = set(fwd_at)   # instructions that are FWD (a copy made for any other recomputes)
        self.base = base        # joint node -> node of the new graph standing for it (placeholders)
        self.memo = {}
        self.copies = 0

    def value(self, n, s):
        """The new graph's node for joint node n read at instruction s."""
        if n in self.base:
            hit = self._base(n, s)
            if hit is not None:
                return hit
        t = self.tid.get(n)
        if t is None and _getitem(n):
            t = n.name
        if t is None:
            # A multi-output op: its instance is that of its outputs (one RECOMPUTE makes them all).
            t = next((u.name for u in n.users if _getitem(u) and u.name in self.iv), None)
        c = instance(self.iv, t, s, self.limit) if t is not None and s is not None else None
        return self.at(n, c if c is not None else s, c)

    def _base(self, n, s):
        """A placeholder stands for n while the instance read is the forward's own (made before the
        first BWD) or remat's schedule says nothing of n."""
        if self.limit is not None:       # the forward: placeholders are the primals only
            return self.base[n]
        t = self.tid.get(n)
        if n.op == "placeholder" or t is None or s is None:
            return self.base[n]
        c = instance(self.iv, t, s)
        if c is None or c < self.first_bwd:
            return self.base[n]
        return None

    def at(self, n, ctx, c):
        key = (n, c)
        if key in self.memo:
            return self.memo[key]
        if n.op == "placeholder":
            raise RuntimeError("torch_schedule: %s is read but not saved" % n.name)

        def arg(a):
            return self.value(a, ctx)
        node = self.g.node_copy(n, arg)
        if c not in self.fwd_at:
            torch_rng.as_replay(node)    # a random op's recomputation replays its saved generator state
        # A copy for a RECOMPUTE instance recomputes; one for no instruction at all (a weight's
        # transpose: remat schedules no op for it) computes what the forward needs, once.
        again = c is not None and c not in self.fwd_at
        if again:
            node.meta[RECOMPUTED] = True
        self.memo[key] = node
        self.copies += 1
        if self.tid.get(n) is None and not _getitem(n):
            # A multi-output op: its getitems follow it at once, so that the tuple (which holds every
            # output) dies with them, not when a late reader asks for, say, max-pool's indices.
            for u in sorted((u for u in n.users if _getitem(u)), key=lambda u: u.args[1]):
                if (u, c) not in self.memo:
                    self.memo[(u, c)] = self.g.node_copy(u, lambda a: node)
                    if again:
                        self.memo[(u, c)].meta[RECOMPUTED] = True
        return node


def _getitem(n):
    return n.op == "call_function" and getattr(n.target, "__name__", "") == "getitem"


def gradient_steps(joint, graph, tid, schedule):
    """({gradient node name: the instruction of the remat BWD step it belongs to}, counts of how each was
    assigned) for AOTAutograd's gradient nodes of a joint graph (those that depend on a tangent), in the
    joint's order: the op whose inputs, outputs and saves best match the forward values the node reads
    (Owners), the earliest such step at or after the latest step of its gradient inputs; a node that reads no
    forward value an op holds goes to that latest step (the first BWD when it has none)."""
    _, bwd, first_bwd = intervals(schedule, graph)
    dep = {n for n in joint.graph.nodes if _is_tangent(n)}
    owner = Owners(graph["ops"], tid)
    step, assigned = {}, collections.Counter()
    for n in joint.graph.nodes:
        if n.op != "call_function" or not any(a in dep for a in n.all_input_nodes):
            continue
        dep.add(n)
        fargs = [a for a in n.all_input_nodes if a not in dep]
        floor = max([step[a.name] for a in n.all_input_nodes if a.name in step] or [first_bwd])
        cands = sorted(bwd[x] for x in owner(n, fargs) if x in bwd)
        if cands:
            ge = [c for c in cands if c >= floor]
            s = ge[0] if ge else cands[-1]
            assigned["matched"] += 1
        else:
            s = floor
            assigned["by gradient flow"] += 1
        step[n.name] = s
    return step, assigned


def build(joint, graph, tid, schedule):
    """(forward GraphModule, backward GraphModule, info) that run remat's schedule. tid: joint fx node ->
    remat tensor id (remat_torch.joint_to_graph)."""
    iv, bwd, first_bwd = intervals(schedule, graph)
    jnodes = list(joint.graph.nodes)
    by_name = {n.name: n for n in jnodes}
    primals = [n for n in jnodes if _is_primal(n)]
    tangents = [n for n in jnodes if _is_tangent(n)]
    fwd_outputs, bwd_outputs = _extract_fwd_bwd_outputs(joint)

    # The saved set: every activation instance resident when the first BWD starts, and every primal.
    resident = {t for t, lst in iv.items() for c, f in lst if c < first_bwd and (f is None or f > first_bwd)}
    saved = []
    for n in jnodes:
        if n.op != "call_function" or n in saved:
            continue
        tm = n.meta.get("tensor_meta")
        if tm is None or not hasattr(tm, "shape"):
            continue
        if tid.get(n) == n.name and n.name in resident:
            saved.append(n)
    # A view of a parameter or of a resident activation (a weight's transpose, which the remat graph
    # counts as the weight; a transpose that only the backward reads, counted as its base) is saved as the
    # forward made it: it holds no bytes beyond its base, which is resident anyway, and a copy in the
    # backward is one more dispatched call per read (views were most of the calls timed as the GPT's
    # recomputation). A reader of a later instance of the base reads a copy made from that instance.
    params = {p["id"] for p in graph["params"]}
    saved += [n for n in jnodes if n.op == "call_function" and tid.get(n) not in (None, n.name) and
              (tid[n] in params or tid[n] in resident) and hasattr(n.meta.get("tensor_meta"), "shape")]
    saved = primals + saved

    # Forward: the schedule's FWD instructions in order, then the outputs at the first BWD.
    fg = fx.Graph()
    fbase = {}
    for p in primals:
        ph = fg.placeholder(p.name)
        ph.meta = p.meta
        fbase[p] = ph
    fb = _Builder(fg, tid, iv, fbase, limit=first_bwd,
                  fwd_at=[i for i, ins in enumerate(schedule[:first_bwd]) if ins.startswith("FWD ")])
    fb.first_bwd = first_bwd
    for i, ins in enumerate(schedule[:first_bwd]):
        kind, _, name = ins.partition(" ")
        if kind in ("FWD", "RECOMPUTE") and name in by_name:
            fb.at(by_name[name], i, i)     # the instance this instruction makes
    outs = [fb.value(n, first_bwd - 1) if isinstance(n, fx.Node) else n for n in fwd_outputs + saved]
    fg.output(outs)
    fg.eliminate_dead_code()
    fg.lint()

    # Backward: AOTAutograd's gradient nodes in order, each reading the instances live at its step.
    one = _extract_graph_with_inputs_outputs(joint.graph, saved + tangents, bwd_outputs)
    dep = set(tangents)
    for n in jnodes:
        if n.op == "call_function" and any(a in dep for a in n.all_input_nodes):
            dep.add(n)
    fwd_names = {n.name for n in jnodes if n.op == "call_function" and n not in dep}
    bg = fx.Graph()
    bbase = {}
    for n in saved + tangents:
        ph = bg.placeholder(n.name)
        ph.meta = n.meta
        bbase[n] = ph
    bb = _Builder(bg, tid, iv, bbase)
    bb.first_bwd = first_bwd
    step_of, assigned = gradient_steps(joint, graph, tid, schedule)
    env, steps = {}, {}
    # RECOMPUTE instructions of the backward, made where remat's schedule makes them (before the first
    # gradient node of a later step), so that the live set follows the replay remat predicted.
    pending = collections.deque((i, by_name[ins.partition(" ")[2]]) for i, ins in enumerate(schedule)
                                if i > first_bwd and ins.startswith("RECOMPUTE ") and
                                ins.partition(" ")[2] in by_name)
    saved_names = {n.name for n in saved}
    for n in one.nodes:
        if n.op == "placeholder":
            if n.name not in saved_names:
                env[n] = bbase[by_name[n.name]]   # a tangent; a saved value is read per instance
            continue
        if n.op == "output":
            bg.output(fx.node.map_arg(n.args[0], lambda a: env[a]))
            continue
        if n.name in fwd_names:
            continue    # a forward copy: made on demand, per instance
        s = step_of[n.name]
        while pending and pending[0][0] <= s:
            c, m = pending.popleft()
            bb.at(m, c, c)

        def arg(a, s=s):
            if a in env:
                return env[a]
            return bb.value(by_name[a.name], s)
        env[n] = bg.node_copy(n, arg)
        steps[env[n].name] = s
    bg.eliminate_dead_code()
    bg.lint()
    unread = [n.name for n in bg.nodes if n.op == "placeholder" and not n.users and n.name in saved_names]
    fw = fx.GraphModule(joint, fg)
    bw = fx.GraphModule(joint, bg)
    info = {"saved_values": len(saved), "forward_copies": fb.copies, "recompute_copies": bb.copies,
            "gradient_nodes": dict(assigned), "steps": steps, "saved_unread": unread}
    return fw, bw, info

