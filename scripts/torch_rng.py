"""torch_rng.py - random ops made recomputable: the generator state saved at the draw, replayed to recompute it.

    graph = torch_rng.add_states(joint, graph, tid)   # before partitioning (remat_torch._compile)
    torch_rng.mark_replays(bw)                        # every draw copied into a backward graph replays

A dropout mask is a random draw: recomputed from the live generator it would
be another mask, and the gradients would no longer be eager PyTorch's. So
remat_torch's graphs used to mark random ops `recomputable: false`, and
every plan kept every mask (the GPT's 13), which is how checkpointing every
block beat remat there. torch.utils.checkpoint instead stashes the generator
state when the checkpointed forward runs and, before recomputing, forks the
generator, sets that state and runs the forward again (preserve_rng_state:
torch/utils/checkpoint.py, CheckpointFunction.forward saves
torch.get_rng_state() as ctx.fwd_cpu_state; backward runs under
torch.random.fork_rng and torch.set_rng_state(ctx.fwd_cpu_state)).

This module does the same per random node of the AOTAutograd joint graph:

* add_states inserts `rng_state()` (torch.get_rng_state()) just before each
  random node, and makes the node `draw(state, name, *args)`, which runs the
  ATen op on the live generator (the state is read only so that it is saved
  wherever the draw may be recomputed). In the remat graph the state is an
  op `get_rng_state` of its own, not recomputable, whose output (the bytes
  of torch.get_rng_state(): 5056 B for the CPU generator) is an input of the
  random op, which becomes recomputable; the earliest op (forward order)
  whose `saves` hold a value computed from the draw saves the state too, so
  remat keeps it until the last backward step that could recompute the
  draw (the graph's outputs, held to the end by the caller, do not count),
  and charges its bytes like any kept tensor (graphs/README.md,
  "Random ops").
* mark_replays (and torch_schedule's copies of a RECOMPUTE) turn a copy of a
  draw into `replay(state, name, *args)`: it saves the live generator state,
  sets the saved one, draws, and sets the live one back, so the recomputed
  mask has the forward's bits and the generator continues as eager's does.

The remat graph charges every state from its draw to its saver's backward
step, whether or not the plan recomputes the draw; the compiled step keeps a
state only where a recomputation reads it (functorch's split and
torch_schedule save what the backward reads). So remat_torch._compile plans
the chosen strategy once more on a graph with states for the draws its plan
recomputes only (add_states' `only`), and keeps that plan when it costs no
more: its prediction then charges no state the step does not keep (before,
up to 13 x 5056 = 65728 B on the GPT, 0.4% of its store-all activation
peak). A state-free random op stays `recomputable: false`, as without
states.
"""
import torch
import torch.fx as fx
from torch.fx.passes.shape_prop import TensorMetadata

aten = torch.ops.aten
RANDOM = {"bernoulli", "native_dropout", "rand_like", "randn_like", "rand", "randn", "randint", "normal",
          "uniform", "randperm", "multinomial", "bernoulli_"}


def rng_state():
    """The CPU generator's state now (torch.get_rng_state(): a uint8 tensor of 5056 bytes in torch 1.13)."""
    return torch.get_rng_state()


def _op(name):
    packet, _, overload = name.partition(".")
    p = getattr(aten, packet)
    return getattr(p, overload) if overload else p


def draw(_state, name, *args, **kwargs):
    """A random ATen op drawn from the live generator (the forward's draw)."""
    return _op(name)(*args, **kwargs)


def replay(state, name, *args, **kwargs):
    """The same draw again: from the generator state saved at the forward's draw, the live state restored
    after it (torch.random.fork_rng + torch.set_rng_state, as torch.utils.checkpoint recomputes)."""
    live = torch.get_rng_state()
    torch.set_rng_state(state)
    try:
        return _op(name)(*args, **kwargs)
    finally:
        torch.set_rng_state(live)


def is_random(node):
    t = node.target
    name = t.overloadpacket.__name__ if hasattr(t, "overloadpacket") else getattr(t, "__name__", "")
    return node.op == "call_function" and (name in RANDOM or name.rstrip("_") in RANDOM)


def _name(target):
    """aten.bernoulli_.float -> "bernoulli_.float" (what _op resolves)."""
    ov = target._overloadname if hasattr(target, "_overloadname") else ""
    return target.overloadpacket.__name__ + ("." + ov if ov and ov != "default" else "")


def add_states(joint, graph, tid, only=None):
    """Makes each random op of remat graph `graph` (joint_to_graph's dict; tid: joint node -> tensor id)
    recomputable under a saved generator state, in the graph and in the joint graph. Returns the graph.
    only: the ids of the random ops to do this for (the others stay drawn once and kept)."""
    nbytes = torch.get_rng_state().numel()          # uint8: one byte per element
    by_id = {d["id"]: d for d in graph["ops"]}
    index = {d["id"]: i for i, d in enumerate(graph["ops"])}
    producer = {o["id"]: d for d in graph["ops"] for o in d.get("outputs", [d])}

    def op_of(n):
        # a multi-output draw (native_dropout) is named by its getitems' tensors
        t = tid.get(n)
        if t is None:
            t = next((tid[u] for u in n.users if tid.get(u) in producer), None)
        return producer.get(t)
    nodes = [(n, op_of(n)) for n in joint.graph.nodes if is_random(n)]
    new_ops = {}
    for n, d in nodes:
        if d is None or (only is not None and d["id"] not in only):
            continue
        g = joint.graph
        with g.inserting_before(n):
            s = g.call_function(rng_state, ())
        s.meta["tensor_meta"] = TensorMetadata((nbytes,), torch.uint8, False, (1,), torch.contiguous_format,
                                               False, {})
        n.args = (s, _name(n.target)) + tuple(n.args)
        n.target = draw
        sid = s.name
        tid[s] = sid
        new_ops[d["id"]] = {"id": sid, "op": "get_rng_state", "inputs": [], "bytes": nbytes, "dtype": "u8",
                            "shape": [nbytes], "flops": 0, "recomputable": False, "saves": [],
                            "attrs": {"rng_state_of": d["id"]}}
        d.pop("recomputable", None)
        d["inputs"].append(sid)
        d.setdefault("attrs", {})["rng_state"] = sid
        # The latest backward step that may recompute the draw: that of the earliest op saving a value
        # computed from it (backward steps run in reverse forward order).
        drawn = {d["id"]} | {o["id"] for o in d.get("outputs", [])}
        for e in graph["ops"][index[d["id"]] + 1:]:
            if any(i in drawn for i in e["inputs"]):
                drawn.add(e["id"])
                drawn.update(o["id"] for o in e.get("outputs", []))
        # The graph's outputs (the loss) are held by the caller to the end, never recomputed.
        drawn -= set(graph["outputs"])
        saver = next((e for e in graph["ops"] if any(x in drawn for x in e["saves"])), None)
        if saver is not None:
            saver["saves"].append(sid)
    joint.graph.lint()
    joint.recompile()
    ops = []
    for d in graph["ops"]:
        if d["id"] in new_ops:
            ops.append(new_ops[d["id"]])
        ops.append(d)
    graph["ops"] = ops
    return graph


def mark_replays(gm):
    """Every draw in a backward GraphModule is a recomputation: it replays its saved state. Returns how
    many draws it made replays."""
    hit = 0
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is draw:
            n.target = replay
            hit += 1
    if hit:
        gm.recompile()
    return hit


def replays(*gms):
    """How many replayed draws the GraphModules hold (remat_report["rng_replays"])."""
    return sum(1 for gm in gms for n in gm.graph.nodes if n.op == "call_function" and n.target is replay)


def as_replay(node):
    """torch_schedule: a copy of a draw made for a RECOMPUTE instruction replays."""
    if isinstance(node, fx.Node) and node.op == "call_function" and node.target is draw:
        node.target = replay
    return node
