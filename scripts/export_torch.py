#!/usr/bin/python3
"""export_torch.py - a PyTorch model's training step as a remat graph (format v1).

    /usr/bin/python3 scripts/export_torch.py torchvision:resnet50 --batch 8 -o resnet50-b8.json
    /usr/bin/python3 scripts/export_torch.py scripts/models.py:gpt --batch 4 -o gpt.json
    /usr/bin/python3 scripts/export_torch.py mypkg.mymodule:make_model --input-shape 3,64,64 -o my.json

MODEL is `torchvision:NAME` (classification or segmentation, built with
random weights, weights=None and weights_backbone=None: nothing is
downloaded), `package.module:factory` or `path/to/file.py:factory`; the
factory is called with the `--arg key=value` pairs and returns a
torch.nn.Module. The example input has shape (batch, *input_shape); a factory's
module may name its own default with an attribute
`remat_input = {"shape": (128,), "dtype": "int64", "high": 1024}` and its loss
with `remat_loss = "ce" | "mse" | "sum"`. Model, input, output (tuple, dict
"out", .logits) and loss are built by scripts/torch_setup.py, which the
checks share; the recorder is scripts/torch_recorder.py.

How it works (torch 1.13, CPU, training mode):

* Ops are recorded at the autograd boundary with a TorchDispatchMode
  (torch.utils._python_dispatch). A dispatch mode sees every ATen op below the
  Autograd key: composite ops (linear, matmul, dropout, F.layer_norm) arrive
  already decomposed into the ops that own an autograd formula (t + addmm,
  bmm + views, native_layer_norm), so each recorded op corresponds to one
  grad_fn node. Output bytes are the real storage sizes (shape x dtype).
* After each op, the grad_fn that autograd attached to its outputs is read
  (at the start of the next dispatch, when autograd has set it). That node's
  `_saved_*` attributes are what its backward really reads: they are read
  through torch.autograd.graph.saved_tensors_hooks, whose pack hook sees every
  tensor autograd saves and resolves it to a graph tensor at that moment
  (first by object identity, then by storage pointer and view geometry), and
  whose unpack hook tells which packed tensors an attribute holds. `saves` is
  therefore what autograd saved, never a guess; a view that is saved resolves
  to the view, whose storage remat counts once, through its base. A Python
  autograd.Function's node shows its saves as `saved_tensors` (reentrant
  torch.utils.checkpoint is one). A tensor packed that no attribute shows
  (an in-place op on a view: autograd wraps its node in CopySlices) goes to
  the op it was packed for: the op before the pack if it is an output of it
  that needs a gradient (sigmoid_ saves its result), else the next op if it
  is one of its inputs (mul_ saves the dropout mask before it runs); any
  other is reported with a warning.
* Views: an output that shares an input's storage (t, view, transpose, split,
  expand, _unsafe_view, ...) gets `alias_of` that input. `detach`, which
  autograd itself calls when it saves an op's output, is transparent: its
  result is the same graph tensor as its input. A transpose or reshape of a
  weight is the weight itself: PyTorch writes the gradient in the weight's
  layout, one buffer. Shape-only ops (empty_like, zeros_like, ...) read no
  data, so no gradient flows through them (dropout's mask).
* Functionalization: an in-place op (relu_, add_, bernoulli_, ...) becomes an
  op that reads the old version and produces a new tensor: over a whole
  storage, the storage owner's next version, of its bytes; over a view (an
  LSTM gate chunk, `h[:, :16] = ...`, a flattened view), a tensor of the
  view's own size plus an `as_strided_scatter` op that makes the owner's next
  version from the old one and the written part. A tensor read later is
  brought to its storage's current version: an owner reads as the newest, a
  view that a later write overlaps (an exact element test) is regenerated
  from it (an `as_strided` view op). remat's replay holds both versions
  during the writing step, where PyTorch reuses the buffer.
* Weights read by several ops (an RNN's at every step) give one gradient
  contribution per reader; PyTorch's engine sums the later ones into the
  first out of place, so every reader but the last holds the contribution
  and the sum: its bwd_workspace (the larger of the contribution, while its
  output gradients live, and twice it, after they are freed).
* Convolution workspace (forward and backward temporaries: im2col columns,
  dilated-convolution buffers) is measured, not guessed: each distinct
  convolution runs once more under torch.profiler (scripts/torch_workspace.py),
  at --threads threads, recorded in meta.
* Reentrant torch.utils.checkpoint: the ops its block runs (under no_grad)
  become one "checkpoint" op. Its saves are what CheckpointFunction saves
  (the block's inputs); its workspace and bwd_workspace are measured (the
  block's forward, and the backward step that reruns it and backpropagates
  through it: scripts/torch_workspace.py); the CPU RNG state it keeps for
  the rerun is a second output that lives until the backward has returned
  (it is an attribute of the graph's node, not a saved tensor).
* cat's backward (cat_tensors_backward in torch's FunctionsManual.cpp)
  hands each input a narrow() view of the one output gradient, which so
  lives until the last of them is freed: cat ops get `grad_views`
  (graphs/README.md, "Gradient views").
* Random ops (bernoulli_, native_dropout, rand*) are marked recomputable:
  torch.utils.checkpoint saves and restores the RNG state, so a replay
  recomputes the same mask (`--no-rng-replay` marks them not recomputable).
* Ops that do not reach the loss (buffer updates such as num_batches_tracked,
  dead temporaries) are dropped, unless a kept op's backward reads what they
  make. A tensor that appears without a dispatched op (a Python scalar that
  autograd wraps and saves, as `x * 0.5` does) becomes the output of a
  "constant" op with no inputs: it is allocated during the step. Buffers
  (batch-norm running statistics) are listed as frozen params: persistent
  state without a gradient. Params and inputs that no kept op reads are
  left out.
* FLOPs: 2 per multiply-add for convolutions and matrix products (bias adds
  one per output), 8 per element for batch/layer/group norm and GELU, 5 per
  element for softmax and log-softmax, the window size per output element for
  pooling, one per input element for reductions, and one per output element
  for other pointwise and copying ops; views cost nothing. bwd_flops is the
  remat default (2x) except for convolutions and matrix products, where it is
  one forward's worth per operand that needs a gradient.

The graph's "meta" records the model, batch, input shape and dtype, loss,
seed, torch version and the command line; each op's attrs.module names the
module that ran it (scripts/checkpoint_blocks_plan.py uses it). The same
command gives the same file (timings go to stderr).

Limits: detach() is transparent, so remat assumes a gradient flows through
it; an op whose outputs need no gradient although its inputs do (a
comparison, argmax) still gets a backward step in remat's model; the loss's
input gradient is materialized in remat's model, where PyTorch's sum/mean
backward returns an expanded (0-byte) view; non-reentrant
checkpoint (use_reentrant=False) packs through its own hooks, which this
recorder does not see.
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_setup import (FLOAT_DTYPES, cast_model, load_model, loss_of, make_inputs, make_target,  # noqa: F401
                         model_dtype, parse_kv, pick_output, rebuild)
from torch_workspace import ConvWorkspace

# Ops whose backward returns views of their output's gradient (torch 1.13,
# tools/autograd/derivatives.yaml: cat -> cat_tensors_backward, narrow).
GRAD_VIEW_OPS = {"cat"}

from torch_recorder import (ABBR, DTYPE_NAMES, MATMUL, PARAM_VIEWS, RANDOM_OPS, SHAPE_ONLY,  # noqa: F401
                            VIEW_FREE, Op, Recorder, Tensor, flops_of, geometry, matmul_operands, numel,
                            overlaps, region, storage_of)


def module_hooks(model, rec):
    names = {m: n for n, m in model.named_modules()}

    def pre(mod, inp):
        rec.settle()
        rec.module_stack.append(names.get(mod, rec.module_stack[-1] if rec.module_stack else ""))

    def post(mod, inp, out):
        rec.settle()
        if rec.module_stack:
            rec.module_stack.pop()

    h1 = torch.nn.modules.module.register_module_forward_pre_hook(pre)
    h2 = torch.nn.modules.module.register_module_forward_hook(post)
    return h1, h2


def settings(args, model):
    """Input shape, dtype, integer range and loss: flags first, then the model's own defaults."""
    mi = getattr(model, "remat_input", {}) or {}
    shape = args.input_shape or mi.get("shape")
    if shape is None:
        if args.model.startswith("torchvision:"):
            shape = (3, args.size, args.size)
        else:
            raise SystemExit("export_torch: give --input-shape (without the batch), e.g. 3,64,64")
    if isinstance(shape, str):
        shape = tuple(int(s) for s in shape.split(",") if s)
    dtype = args.input_dtype or mi.get("dtype", "float32")
    if args.dtype and dtype in FLOAT_DTYPES:
        dtype = args.dtype  # a cast model takes its input in its own precision
    high = args.input_high or mi.get("high", 2)
    loss = args.loss or getattr(model, "remat_loss", None) or ("ce" if args.model.startswith("torchvision:") else "sum")
    return tuple(shape), dtype, high, loss


def export(args):
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    model = load_model(args.model, parse_kv(args.arg))
    shape, dtype, high, loss_kind = settings(args, model)
    mdtype = model_dtype(dtype, args.dtype)
    cast_model(model, mdtype)
    model.train()
    x = make_inputs(model, args.batch, shape, dtype, high, args.seed)
    rec = Recorder(rng_replay=not args.no_rng_replay)
    leaf_names = {}
    for n, p in model.named_parameters():
        leaf_names[id(p)] = n
        rec.add_leaf(p, n, "param", frozen=not p.requires_grad)
    for n, b in model.named_buffers():
        if id(b) in leaf_names:
            continue
        rec.add_leaf(b, n, "param", frozen=True)
    rec.add_leaf(x, "input", "input")
    t_build = time.perf_counter() - t0

    hooks = module_hooks(model, rec)
    t1 = time.perf_counter()
    import torch.utils.checkpoint as ckpt
    plain_checkpoint = ckpt.checkpoint

    plain_apply = ckpt.CheckpointFunction.apply
    own_apply = vars(ckpt.CheckpointFunction).get("apply")  # normally inherited from Function
    checkpoints, depth = [], [0]

    def watched_checkpoint(*a, **kw):
        # Non-reentrant checkpoint packs through hooks of its own: what it
        # saves never reaches ours. Say so rather than export too few saves.
        if not kw.get("use_reentrant", True):
            rec.warn("export_torch: warning: torch.utils.checkpoint(use_reentrant=False) saves through its own "
                     "hooks; what it saves is not in the graph (use_reentrant=True is recorded exactly)")
        return plain_checkpoint(*a, **kw)

    def watched_apply(fn, preserve, *args):
        # Reentrant checkpoint (however it was imported): the ops its block
        # runs under no_grad become one op (collapse_checkpoints), measured
        # once the trace is done.
        rec.settle()
        start = len(rec.ops)
        depth[0] += 1
        try:
            out = plain_apply(fn, preserve, *args)
        finally:
            depth[0] -= 1
        rec.settle()
        # A checkpoint inside another is part of the outer block.
        if isinstance(out, torch.Tensor) and len(rec.ops) > start and depth[0] == 0:
            checkpoints.append((start, len(rec.ops), fn, args, preserve, out))
        return out
    ckpt.checkpoint = watched_checkpoint
    ckpt.CheckpointFunction.apply = staticmethod(watched_apply)
    try:
        with torch.autograd.graph.saved_tensors_hooks(rec.pack, rec.unpack):
            with rec:
                try:
                    out = pick_output(model(x))
                except (RuntimeError, NotImplementedError) as e:
                    if mdtype or dtype not in ("float32", "f32", "int64", "long"):
                        raise SystemExit("export_torch: %s does not run with %s on this CPU build of torch: %s" %
                                         (args.model, mdtype or dtype, str(e).splitlines()[0]))
                    raise
            target = make_target(loss_kind, out.detach(), args.seed)
            if target is not None:
                rec.add_leaf(target, "target", "input")
            with rec:
                loss = loss_of(loss_kind, out, target)
        rec.settle()
        rec.collect_saves()
    finally:
        ckpt.checkpoint = plain_checkpoint
        if own_apply is None:
            del ckpt.CheckpointFunction.apply
        else:
            ckpt.CheckpointFunction.apply = own_apply
        for h in hooks:
            h.remove()
    collapse_checkpoints(rec, checkpoints, [p for p in model.parameters() if p.requires_grad])
    t_trace = time.perf_counter() - t1
    loss_tid = rec.resolve(loss)
    graph = build_graph(rec, loss_tid, args, shape, dtype, high, loss_kind, mdtype)
    t_ws = time.perf_counter()
    if not args.no_workspace:
        measure_workspace(rec, graph)
    t_ws = time.perf_counter() - t_ws
    if args.measure_durations:
        measure_durations(rec, graph, model, x, loss_kind, args.seed, args.measure_durations)
    for w in rec.warnings:
        print(w, file=sys.stderr)
    # Timings go to stderr, not into the graph: the same command must give
    # the same file.
    print("export_torch: %s: %d ops (%d recorded), %d inputs, %d params; model built in %.2f s, traced in %.2f s, "
          "workspace measured in %.2f s" %
          (graph["name"], len(graph["ops"]), len(rec.ops), len(graph["inputs"]), len(graph["params"]), t_build,
           t_trace, t_ws), file=sys.stderr)
    return graph


def collapse_checkpoints(rec, checkpoints, params):
    """Each reentrant torch.utils.checkpoint call becomes one "checkpoint" op in place of the ops it ran.

    CheckpointFunction.forward runs its block under no_grad and saves only the block's inputs; its
    backward reruns the block with grad and backpropagates through it. So the block's activations exist
    only transiently, in the forward and again during that one backward step: the op's workspace and
    bwd_workspace, measured (torch_workspace.checkpoint_workspace). Its inputs are what the block reads
    from outside, its saves what the Function saved, its flops the block's, its bwd_flops the rerun's
    forward plus remat's default backward (3x). With preserve_rng_state (the default), the RNG state it
    keeps is a second output, held to the end of the backward."""
    rec.held_to_end = []
    if not checkpoints:
        return
    from torch_workspace import checkpoint_workspace
    spans = {c[0]: c for c in checkpoints}
    ops, i = [], 0
    while i < len(rec.ops):
        c = spans.get(i)
        if c is None:
            op = rec.ops[i]
            op.index = len(ops)
            ops.append(op)
            i += 1
            continue
        start, end, fn, args, preserve, out = c
        inner = rec.ops[start:end]
        made = {t for op in inner for t in op.outputs}
        out_tid = rec.resolve(out)
        if out_tid not in made:
            rec.warn("export_torch: warning: a torch.utils.checkpoint block returns a tensor it did not make; "
                     "its ops are kept as they ran")
            for op in inner:
                op.index = len(ops)
                ops.append(op)
            i = end
            continue
        k = Op(len(ops), "checkpoint%d" % rec.counter, "checkpoint")
        rec.counter += 1
        k.module = inner[0].module
        k.inputs = list(dict.fromkeys(t for op in inner for t in op.inputs if t not in made))
        k.outputs = [out_tid]
        k.saves = list(dict.fromkeys(t for op in inner for t in op.saves if t not in made))
        k.flops = sum(op.flops for op in inner)
        k.node = next((op.node for op in inner if out_tid in op.outputs), None) or True
        k.recomputable = all(op.recomputable for op in inner)
        k.args = ("checkpoint", ())
        k.call = None
        k.synthetic = True
        k.workspace, k.bwd_workspace = checkpoint_workspace(fn, list(args), params, preserve)
        rec.tensors[out_tid].producer = k.index
        if preserve:
            # CheckpointFunction.forward keeps the CPU RNG state (ctx.fwd_cpu_state, a ByteTensor) for the
            # rerun, on its node: not a saved tensor (the hooks never see it, and the backward does not
            # release it), so it lives as long as the graph does, until loss.backward() has returned. A
            # second output of the op, which build_graph has the last backward step read.
            rng = "%s.rng_state" % k.oid
            n = torch.get_rng_state().numel()
            rec.tensors[rng] = Tensor(rng, n, "uint8", [n], producer=k.index)
            k.outputs.append(rng)
            rec.held_to_end.append(rng)
        ops.append(k)
        i = end
    rec.ops = ops


def measure_durations(rec, graph, model, x, loss_kind, seed, repeats):
    """attrs.duration_ns and attrs.bwd_duration_ns of every op made by a dispatch call (graphs/README.md,
    "Measured durations"; how: scripts/torch_durations.py). Ops the recorder made itself (a regenerated view,
    a scatter) get none: the time model prices them by its roofline."""
    from torch_durations import measure
    fwd, bwd = measure(model, x, loss_kind, seed, (pick_output, loss_of, make_target), repeats)
    if len(fwd) != rec.calls:
        rec.warn("export_torch: warning: the timed steps made %d dispatch calls, the recorded one %d: durations "
                 "left out (the model's calls vary between runs)" % (len(fwd), rec.calls))
        return
    by_id = {op.oid: op for op in rec.ops}
    for d in graph["ops"]:
        op = by_id.get(d["id"])
        if op is None or op.call is None or op.synthetic:
            continue
        attrs = d.setdefault("attrs", {})
        attrs["duration_ns"] = fwd[op.call]
        if op.call in bwd:
            attrs["bwd_duration_ns"] = bwd[op.call]
    graph["meta"]["durations"] = ("measured on this machine's CPU at %d thread(s): the median of %d timed steps "
                                  "after a warm-up (scripts/torch_durations.py)" % (torch.get_num_threads(), repeats))


def measure_workspace(rec, graph):
    """Adds each kept convolution's measured forward and backward workspace (scripts/torch_workspace.py)."""
    cw = ConvWorkspace()
    by_id = {op.oid: op for op in rec.ops}
    for d in graph["ops"]:
        op = by_id.get(d["id"])
        if op is None or op.name != "convolution":
            continue
        args = op.args[1]
        fwd, bwd = cw.measure(args, bool(args[0].requires_grad))
        if fwd:
            d["workspace"] = fwd
        if bwd and op.node is not None:
            d["bwd_workspace"] = d.get("bwd_workspace", 0) + bwd


def build_graph(rec, loss_tid, args, shape, dtype, high, loss_kind, mdtype=None):
    ops = rec.ops
    # Keep the ops that reach the loss through their inputs, and the makers
    # of what those ops save.
    producer = {}
    for op in ops:
        for t in op.outputs:
            producer[t] = op.index
    live = set()
    need = [loss_tid]
    seen = set()
    while need:
        t = need.pop()
        if t in seen:
            continue
        seen.add(t)
        p = producer.get(t)
        if p is not None and p not in live:
            live.add(p)
            need.extend(ops[p].inputs)
            # What its backward reads must exist too (a wrapped scalar that
            # autograd saved is read by no forward op).
            need.extend(ops[p].saves)
    # Alias chains must stay inside the graph: a view's base is among its
    # producer's inputs, so it is kept with it.
    kept = [op for op in ops if op.index in live]
    # What the graph holds until the backward has returned (a checkpoint's RNG state): read by the
    # backward step that runs last, that of the first op that reads a trainable param or an input
    # that requires grad.
    held = [t for t in getattr(rec, "held_to_end", []) if rec.tensors[t].producer in live]
    last = next((op for op in kept if op.node is not None and any(
        (rec.tensors[t].kind == "param" and not rec.tensors[t].frozen) or
        (rec.tensors[t].kind == "input" and rec.tensors[t].requires_grad) for t in op.inputs)), None)
    if held and last is not None:
        last.saves = last.saves + [t for t in held if t not in last.saves]
    # A weight read by several ops (an RNN's weights at every time step, a
    # tied embedding) gets one gradient contribution per reader. PyTorch's
    # engine keeps the first (in backward order: the last reader's) as the
    # gradient, and sums each later one into it out of place (InputBuffer:
    # old + new, then both freed). remat's gradient is that one buffer;
    # every other reader's backward step holds two weight-sized
    # temporaries, its contribution and the sum (measured: the profiler
    # shows aten::add of the weight's size under TBackward0).
    readers = {}
    for op in kept:
        if op.node is None:
            continue
        for t in dict.fromkeys(op.inputs):
            r = rec.tensors[t]
            if r.kind == "param" and not r.frozen:
                readers.setdefault(t, []).append(op)
    contrib = {}
    for t, lst in readers.items():
        for op in lst[:-1]:
            contrib[op.index] = contrib.get(op.index, 0) + rec.tensors[t].bytes
    # The contributions live while the op's backward runs (with the
    # gradients of its outputs); the sums come once it has returned and its
    # output gradients are gone: the step's workspace is the larger of the two.
    accum = {}
    for i, c in contrib.items():
        outgrad = sum(logical_bytes(rec, rec.tensors[t]) for t in ops[i].outputs if rec.tensors[t].requires_grad)
        accum[i] = max(c, 2 * c - outgrad)
    kept_tids = set()
    for op in kept:
        kept_tids.update(op.outputs)
    used_leaves = set()
    for op in kept:
        for t in op.inputs:
            if t not in producer:
                used_leaves.add(t)
        for t in op.saves:
            if t not in producer:
                used_leaves.add(t)

    def leaf(rec_t):
        d = {"id": rec_t.tid, "bytes": rec_t.bytes}
        if rec_t.kind == "param" and rec_t.frozen:
            d["frozen"] = True
        if rec_t.kind == "input" and rec_t.requires_grad:
            d["requires_grad"] = True
        d["dtype"] = rec_t.dtype
        d["shape"] = rec_t.shape
        return d

    inputs = [leaf(t) for t in rec.tensors.values() if t.kind == "input" and t.tid in used_leaves]
    params = [leaf(t) for t in rec.tensors.values() if t.kind == "param" and t.tid in used_leaves]
    out_ops = []
    for op in kept:
        d = {"id": op.oid, "op": op.name, "inputs": op.inputs}
        outs = [rec.tensors[t] for t in op.outputs]
        if len(outs) == 1 and outs[0].tid == op.oid:
            o = outs[0]
            if o.alias_of:
                d["alias_of"] = o.alias_of
                if o.logical != rec_bytes_of_root(rec, o):
                    d["bytes"] = o.logical
            else:
                d["bytes"] = o.bytes
            d["dtype"], d["shape"] = o.dtype, o.shape
        else:
            lst = []
            for o in outs:
                e = {"id": o.tid}
                if o.alias_of:
                    e["alias_of"] = o.alias_of
                    if o.logical != rec_bytes_of_root(rec, o):
                        e["bytes"] = o.logical
                else:
                    e["bytes"] = o.bytes
                e["dtype"], e["shape"] = o.dtype, o.shape
                lst.append(e)
            d["outputs"] = lst
        if not (len(outs) == 1 and outs[0].alias_of and op.flops == 0):
            d["flops"] = op.flops
        bw = bwd_flops(rec, op)
        if bw is not None:
            d["bwd_flops"] = bw
        if accum.get(op.index):
            d["bwd_workspace"] = accum[op.index]
        if op.workspace:     # measured by the recorder's caller (a checkpoint block)
            d["workspace"] = op.workspace
        if op.bwd_workspace:
            d["bwd_workspace"] = d.get("bwd_workspace", 0) + op.bwd_workspace
        # An op without a grad_fn saved nothing (and gets no backward step
        # when nothing it reads needs a gradient).
        d["saves"] = op.saves if op.node is not None else []
        if not op.recomputable:
            d["recomputable"] = False
        if op.name in GRAD_VIEW_OPS and op.node is not None and len(outs) == 1 and not outs[0].alias_of:
            d["grad_views"] = True
        if op.module:
            d["attrs"] = {"module": op.module}
        out_ops.append(d)
    name = args.name or args.model.split(":")[-1]
    meta = {
        "exporter": "scripts/export_torch.py",
        "model": args.model,
        "batch": args.batch,
        "input_shape": [args.batch] + list(shape),
        "input_dtype": dtype,
        "input_high": high if dtype in ("int64", "long") else None,
        "loss": {"ce": "cross_entropy", "mse": "mse", "sum": "sum"}[loss_kind],
        "seed": args.seed,
        "torch": torch.__version__,
        "command": "scripts/export_torch.py " + " ".join(sys.argv[1:]),
        "mode": "train",
        "buffers": "frozen params",
        "ops_recorded": len(ops),
        "ops_kept": len(kept),
    }
    try:
        import torchvision
        meta["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    if mdtype:
        meta["model_dtype"] = mdtype
    if not args.no_workspace:
        meta["workspace"] = "convolutions measured with torch.profiler at %d thread(s)" % torch.get_num_threads()
        meta["threads"] = torch.get_num_threads()
    if args.arg:
        meta["factory_args"] = parse_kv(args.arg)
    return {"format": "remat-graph", "version": 1, "name": name, "meta": meta, "inputs": inputs,
            "params": params, "ops": out_ops, "outputs": [loss_tid]}


def logical_bytes(rec, t):
    if t.alias_of is None:
        return t.bytes or 0
    return t.logical if t.logical is not None else rec_bytes_of_root(rec, t)


def rec_bytes_of_root(rec, t):
    """The logical size a view has by default: its base's (remat's rule)."""
    base = rec.tensors[t.alias_of]
    if base.alias_of:
        return base.logical
    return base.bytes


def bwd_flops(rec, op):
    if op.node is None:
        return None
    if op.name == "checkpoint":
        return 3 * op.flops  # the block's forward again, then its backward (remat's default, 2x)
    name, args = op.args
    pos = matmul_operands(name)
    if pos is None:
        return None
    tens_args = args
    n = 0
    for p in pos:
        if p < len(tens_args) and isinstance(tens_args[p], torch.Tensor) and tens_args[p].requires_grad:
            n += 1
    if name == "convolution" or name in MATMUL:
        bias = 0
        if name == "convolution" and len(args) > 2 and isinstance(args[2], torch.Tensor) and args[2].requires_grad:
            bias = numel(rec.tensors[op.outputs[0]].shape)
        core = op.flops - (numel(rec.tensors[op.outputs[0]].shape) if name in ("addmm", "baddbmm", "addmv") or
                           (name == "convolution" and len(args) > 2 and isinstance(args[2], torch.Tensor)) else 0)
        return n * core + bias
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description="Export a PyTorch model's training step as a remat graph (format v1).")
    ap.add_argument("model", help="torchvision:NAME | package.module:factory | path/file.py:factory")
    ap.add_argument("--batch", "-b", type=int, default=8)
    ap.add_argument("--input-shape", help="the input's shape without the batch, e.g. 3,224,224")
    ap.add_argument("--size", type=int, default=224, help="torchvision: image height = width (default 224)")
    ap.add_argument("--input-dtype", help="float32 (default), bfloat16, float16, float64 or int64; bfloat16 or "
                    "float16 casts the model too")
    ap.add_argument("--dtype", help="cast the model's floating parameters and buffers (and a float input) to "
                    "float32, bfloat16, float16 or float64: a low-precision training graph")
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads (default 1): convolution workspace grows with them, so measure with "
                    "the count training uses; recorded in meta")
    ap.add_argument("--no-workspace", action="store_true",
                    help="do not measure convolution workspace (faster; workspace 0)")
    ap.add_argument("--input-high", type=int, help="int64 inputs: values in [0, HIGH)")
    ap.add_argument("--loss", choices=["ce", "mse", "sum"], help="default: ce for torchvision, else the model's")
    ap.add_argument("--arg", action="append", metavar="KEY=VALUE", help="a keyword argument for the factory")
    ap.add_argument("--name", help="the graph's name (default: the factory's name)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-rng-replay", action="store_true", help="mark random ops not recomputable")
    ap.add_argument("--measure-durations", type=int, nargs="?", const=5, default=0, metavar="STEPS",
                    help="record each op's measured forward and backward time (attrs.duration_ns, "
                    "attrs.bwd_duration_ns): the median over STEPS timed steps (default 5) after a warm-up; "
                    "the file then differs from run to run")
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    graph = export(args)
    text = dump(graph)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.output)
    return 0


def dump(graph):
    """JSON with one op, leaf or meta per line: small, and diffs stay readable."""
    parts = ['{"format": "remat-graph", "version": 1, "name": %s,' % json.dumps(graph["name"]),
             ' "meta": %s,' % json.dumps(graph["meta"], separators=(",", ":"))]
    for key in ("inputs", "params", "ops"):
        items = graph[key]
        parts.append(' "%s": [' % key)
        for i, it in enumerate(items):
            parts.append("  " + json.dumps(it, separators=(",", ":")) + ("," if i + 1 < len(items) else ""))
        parts.append(" ],")
    parts.append(' "outputs": %s}' % json.dumps(graph["outputs"]))
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(main())
