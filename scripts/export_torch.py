#!/usr/bin/python3
"""export_torch.py - a PyTorch model's training step as a remat graph (format v1).

    /usr/bin/python3 scripts/export_torch.py torchvision:resnet50 --batch 8 -o resnet50-b8.json
    /usr/bin/python3 scripts/export_torch.py scripts/models.py:gpt --batch 4 -o gpt.json
    /usr/bin/python3 scripts/export_torch.py mypkg.mymodule:make_model --input-shape 3,64,64 -o my.json

MODEL is `torchvision:NAME` (built with random weights, weights=None: nothing
is downloaded), `package.module:factory` or `path/to/file.py:factory`; the
factory is called with the `--arg key=value` pairs and returns a
torch.nn.Module. The example input has shape (batch, *input_shape); a factory's
module may name its own default with an attribute
`remat_input = {"shape": (128,), "dtype": "int64", "high": 1024}` and its loss
with `remat_loss = "ce" | "mse" | "sum"`.

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
  to the view, whose storage remat counts once, through its base.
* Views: an output that shares an input's storage (t, view, transpose, split,
  expand, _unsafe_view, ...) gets `alias_of` that input. `detach`, which
  autograd itself calls when it saves an op's output, is transparent: its
  result is the same graph tensor as its input.
* Functionalization: an in-place op (relu_, add_, bernoulli_, ...) becomes an
  op that reads the old version and produces a new tensor of its own bytes;
  later readers read the new version. remat's replay therefore holds both
  versions during that one step, where PyTorch reuses the buffer.
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

Limits: an in-place op on a view (x[:, 0] += 1) is recorded as a new tensor
without updating the view's base; detach() is transparent, so remat assumes
a gradient flows through it; the loss's input gradient is materialized in
remat's model, where PyTorch's sum/mean backward returns an expanded (0-byte)
view.
"""

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

DTYPE_NAMES = {
    torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
    torch.uint8: "uint8", torch.bool: "bool",
}

# Short op-id stems; anything else uses the ATen name.
ABBR = {
    "convolution": "conv", "native_batch_norm": "bn", "native_layer_norm": "ln", "native_group_norm": "gn",
    "max_pool2d_with_indices": "maxpool", "adaptive_avg_pool2d": "avgpool", "_reshape_alias": "reshape",
    "_unsafe_view": "uview", "transpose": "tr", "_softmax": "softmax", "_log_softmax": "logsoftmax",
    "nll_loss_forward": "nll", "embedding": "emb", "bernoulli_": "bernoulli", "hardtanh_": "relu6",
    "hardtanh": "relu6", "masked_fill": "mfill", "upsample_nearest2d": "upsample", "constant_pad_nd": "pad",
    "mse_loss": "mse", "empty_like": "empty", "threshold_backward": "thr",
}

VIEW_FREE = {"view", "_reshape_alias", "_unsafe_view", "t", "transpose", "permute", "expand", "split",
             "split_with_sizes", "unbind", "select", "slice", "squeeze", "unsqueeze", "as_strided", "alias",
             "lift_fresh", "unfold", "diagonal", "narrow", "chunk", "view_as_real", "view_as_complex"}
RANDOM_OPS = {"bernoulli", "bernoulli_", "native_dropout", "rand", "randn", "rand_like", "randn_like",
              "randint", "randint_like", "normal", "normal_", "uniform_", "exponential_", "multinomial",
              "randperm"}
NORMS = {"native_batch_norm", "native_layer_norm", "native_group_norm", "_native_batch_norm_legit",
         "gelu", "silu", "mish"}
SOFTMAX = {"_softmax", "_log_softmax", "softmax", "log_softmax"}
REDUCE = {"sum", "mean", "amax", "amin", "max", "min", "var", "std", "norm", "nll_loss_forward", "nll_loss2d_forward",
          "adaptive_avg_pool2d", "adaptive_avg_pool1d", "adaptive_max_pool2d", "mse_loss", "logsumexp", "prod"}
POOL = {"max_pool2d_with_indices", "avg_pool2d", "max_pool3d_with_indices", "avg_pool3d", "avg_pool1d"}
MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot"}


def numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def storage_of(t):
    s = t._storage() if hasattr(t, "_storage") else t.storage()._untyped()
    return s.data_ptr(), s.nbytes()


def geometry(t):
    return (storage_of(t)[0], t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def flops_of(name, args, outs):
    """Forward FLOPs of one ATen op (see the module docstring for the rules)."""
    tens = [a for a in args if isinstance(a, torch.Tensor)]
    out = outs[0] if outs else None
    on = out.numel() if out is not None else 0
    if name in VIEW_FREE or name in ("detach", "empty", "empty_like", "zeros", "ones", "full", "arange",
                                     "empty_strided", "new_empty", "new_zeros", "scalar_tensor"):
        return 0
    if name == "convolution":
        x, w = args[0], args[1]
        transposed = bool(args[6]) if len(args) > 6 else False
        k = numel(w.shape[2:])
        macs = x.numel() * w.shape[1] * k if transposed else on * w.shape[1] * k
        bias = on if len(args) > 2 and isinstance(args[2], torch.Tensor) else 0
        return 2 * macs + bias
    if name in MATMUL:
        if name == "addmm":
            m, kk = args[1].shape
            n = args[2].shape[1]
            return 2 * m * kk * n + m * n
        if name == "mm":
            m, kk = args[0].shape
            return 2 * m * kk * args[1].shape[1]
        if name == "bmm":
            b, m, kk = args[0].shape
            return 2 * b * m * kk * args[1].shape[2]
        if name == "baddbmm":
            b, m, kk = args[1].shape
            return 2 * b * m * kk * args[2].shape[2] + on
        if name in ("mv", "addmv"):
            mat = args[0] if name == "mv" else args[1]
            return 2 * mat.numel() + (on if name == "addmv" else 0)
        if name == "dot":
            return 2 * args[0].numel()
        return 2 * on
    if name in NORMS:
        return 8 * on
    if name in SOFTMAX:
        return 5 * on
    if name in POOL:
        k = args[1] if len(args) > 1 else [1]
        k = list(k) if isinstance(k, (list, tuple)) else [k]
        dims = 2 if "2d" in name else 3 if "3d" in name else 1
        if len(k) == 1:
            k = k * dims
        return on * numel(k)
    if name in REDUCE:
        return tens[0].numel() if tens else on
    return on


def matmul_operands(name):
    """Argument positions of the operands whose gradients cost a matrix product."""
    if name == "convolution":
        return (0, 1)
    if name in ("addmm", "baddbmm", "addbmm", "addmv"):
        return (1, 2)
    if name in ("mm", "bmm", "mv", "dot"):
        return (0, 1)
    return None


class Tensor:
    __slots__ = ("tid", "bytes", "alias_of", "dtype", "shape", "producer", "kind", "requires_grad", "frozen",
                 "logical")

    def __init__(self, tid, nbytes, dtype, shape, producer=None, kind="activation", alias_of=None):
        self.tid, self.bytes, self.dtype, self.shape = tid, nbytes, dtype, shape
        self.producer, self.kind, self.alias_of = producer, kind, alias_of
        self.requires_grad, self.frozen = False, False


class Op:
    __slots__ = ("index", "oid", "name", "inputs", "outputs", "flops", "saves", "node", "module", "recomputable",
                 "pending", "args")

    def __init__(self, index, oid, name):
        self.index, self.oid, self.name = index, oid, name
        self.inputs, self.outputs, self.saves = [], [], []
        self.flops, self.node, self.module = 0, None, None
        self.recomputable, self.pending, self.args = True, [], None


class Recorder(TorchDispatchMode):
    """Records ATen ops and the tensors autograd saves; see the module docstring."""

    def __init__(self, rng_replay=True):
        super().__init__()
        self.tensors = {}       # tid -> Tensor
        self.by_obj = {}        # id(python tensor) -> tid (the current version)
        self.keep = []          # strong references: ids stay unique while we record
        self.by_geom = {}       # geometry -> [tid, ...] in creation order
        self.ops = []
        self.counter = 0
        self.n_const = 0
        self.module_stack = []
        self.packed = []        # token -> tid
        self.packed_objs = []
        self.unpacked = []
        self.rng_replay = rng_replay
        self._ptr = {}          # tid -> storage pointer, for storage owners

    # -- tensors --
    def add_leaf(self, t, tid, kind, frozen=False, requires_grad=False):
        ptr, nb = storage_of(t)
        rec = Tensor(tid, nb, DTYPE_NAMES.get(t.dtype, str(t.dtype)), list(t.shape), kind=kind)
        rec.frozen, rec.requires_grad = frozen, requires_grad
        self.tensors[tid] = rec
        self._ptr[tid] = ptr
        self.bind(t, tid)
        return rec

    def bind(self, t, tid):
        self.by_obj[id(t)] = tid
        self.keep.append(t)
        self.by_geom.setdefault(geometry(t), []).append(tid)

    def resolve(self, t):
        """The graph tensor for a Python tensor: by identity, else by storage geometry (the latest
        tensor with that storage, offset, shape, strides and dtype), else None."""
        tid = self.by_obj.get(id(t))
        if tid is not None:
            return tid
        cands = self.by_geom.get(geometry(t))
        return cands[-1] if cands else None

    def resolve_or_const(self, t):
        tid = self.resolve(t)
        if tid is None:
            ptr = storage_of(t)[0]
            # A view of a known tensor that we never saw created (made with
            # dispatch off): stand for its base, which owns the bytes.
            for tid2, rec in self.tensors.items():
                if rec.alias_of is None and rec.bytes and self._ptr.get(tid2) == ptr:
                    return tid2
            # A tensor born inside the forward without a dispatched op: a
            # wrapped Python scalar (`x * 0.5` saves it), torch.tensor(...).
            # It is allocated during the step, so it is an activation made
            # by an op without inputs.
            self.settle()
            tid = "const%d" % self.n_const
            self.n_const += 1
            op = Op(len(self.ops), tid, "constant")
            op.module = self.module_stack[-1] if self.module_stack else ""
            rec = Tensor(tid, storage_of(t)[1], DTYPE_NAMES.get(t.dtype, str(t.dtype)), list(t.shape),
                         producer=op.index)
            self.tensors[tid] = rec
            op.outputs.append(tid)
            op.args = ("constant", [])
            self.ops.append(op)
            self.bind(t, tid)
            self._ptr[tid] = ptr
        return tid

    # -- autograd --
    def settle(self):
        """Reads the grad_fn autograd attached to the last op's outputs."""
        for op in self.ops[-1:]:
            if not op.pending:
                continue
            for t in op.pending:
                gf = t.grad_fn
                if gf is not None:
                    op.node = gf
                    break
            op.pending = []

    def pack(self, t):
        self.settle()
        tid = self.resolve(t)
        if tid is None:
            tid = self.resolve_or_const(t)
        self.packed.append(tid)
        self.packed_objs.append(t)
        return len(self.packed) - 1

    def unpack(self, token):
        self.unpacked.append(token)
        return self.packed_objs[token]

    # -- dispatch --
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.settle()
        name = func.overloadpacket.__name__
        flat_in, _ = tree_flatten((args, kwargs))
        in_tensors = [a for a in flat_in if isinstance(a, torch.Tensor)]
        in_tids = [self.resolve_or_const(a) for a in in_tensors]
        out = func(*args, **kwargs)
        flat_out, _ = tree_flatten(out)
        outs = [o for o in flat_out if isinstance(o, torch.Tensor)]
        if not outs:
            return out
        if name == "detach":
            # Autograd detaches an output to save it; treat it as the same tensor.
            for o in outs:
                self.bind(o, in_tids[0])
            return out
        writes = [r.alias_info is not None and r.alias_info.is_write for r in func._schema.returns]
        idx = len(self.ops)
        stem = ABBR.get(name, name.strip("_") or "op")
        op = Op(idx, "%s%d" % (stem, self.counter), name)
        self.counter += 1
        op.module = self.module_stack[-1] if self.module_stack else ""
        op.inputs = in_tids
        op.recomputable = self.rng_replay or name not in RANDOM_OPS
        in_ptrs = {}
        for a, tid in zip(in_tensors, in_tids):
            ptr, nb = storage_of(a)
            if nb:
                in_ptrs.setdefault(ptr, tid)
        for j, o in enumerate(outs):
            tid = op.oid if j == 0 else "%s:%d" % (op.oid, j)
            ptr, nb = storage_of(o)
            is_write = j < len(writes) and writes[j]
            alias = None
            if not is_write and nb and ptr in in_ptrs:
                alias = in_ptrs[ptr]
            rec = Tensor(tid, 0 if alias else nb, DTYPE_NAMES.get(o.dtype, str(o.dtype)), list(o.shape),
                         producer=idx, alias_of=alias)
            if alias:
                rec.bytes = None
                self.tensors[tid] = rec
                rec.logical = o.numel() * o.element_size()
            else:
                self.tensors[tid] = rec
                self._ptr[tid] = ptr
            op.outputs.append(tid)
            self.bind(o, tid)
        op.flops = flops_of(name, list(args), outs)
        op.args = (name, list(args))
        op.pending = outs
        self.ops.append(op)
        return out

    def collect_saves(self):
        """Reads each op's grad_fn `_saved_*` attributes through the unpack hook."""
        self.settle()
        for op in self.ops:
            if op.node is None:
                continue
            saved = []
            for attr in dir(op.node):
                if not attr.startswith("_saved_"):
                    continue
                self.unpacked = []
                try:
                    getattr(op.node, attr)
                except Exception:  # an attribute autograd cannot return (freed); none here
                    continue
                for tok in self.unpacked:
                    tid = self.packed[tok]
                    if tid not in saved:
                        saved.append(tid)
            op.saves = saved


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


def load_model(spec, kwargs):
    """torchvision:NAME, package.module:factory or path/file.py:factory -> nn.Module."""
    if ":" not in spec:
        raise SystemExit("export_torch: MODEL must be torchvision:NAME, package.module:factory or file.py:factory")
    mod_name, fn = spec.rsplit(":", 1)
    if mod_name == "torchvision":
        import torchvision
        factory = getattr(torchvision.models, fn, None)
        if factory is None:
            raise SystemExit("export_torch: torchvision has no model '%s'" % fn)
        return factory(weights=None, **kwargs)
    if mod_name.endswith(".py"):
        s = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(mod_name))[0], mod_name)
        module = importlib.util.module_from_spec(s)
        sys.modules[s.name] = module
        s.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(mod_name)
    factory = getattr(module, fn, None)
    if factory is None:
        raise SystemExit("export_torch: %s has no attribute '%s'" % (mod_name, fn))
    return factory(**kwargs)


def parse_kv(items):
    out = {}
    for it in items or []:
        k, _, v = it.partition("=")
        for conv in (int, float):
            try:
                v = conv(v)
                break
            except ValueError:
                pass
        else:
            v = {"true": True, "false": False}.get(v.lower(), v)
        out[k] = v
    return out


def make_inputs(model, batch, shape, dtype, high, seed):
    g = torch.Generator().manual_seed(seed + 1)
    full = (batch,) + tuple(shape)
    if dtype in ("int64", "long"):
        return torch.randint(0, high, full, generator=g)
    dt = {"float32": torch.float32, "f32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float64": torch.float64}[dtype]
    return torch.randn(full, generator=g).to(dt)


def loss_of(kind, out, target):
    if kind == "ce":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    if kind == "mse":
        return F.mse_loss(out, target)
    return out.sum()


def make_target(kind, out, seed):
    g = torch.Generator().manual_seed(seed + 2)
    if kind == "ce":
        return torch.randint(0, out.shape[-1], tuple(out.shape[:-1]), generator=g)
    if kind == "mse":
        return torch.randn(tuple(out.shape), generator=g).to(out.dtype)
    return None


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
    high = args.input_high or mi.get("high", 2)
    loss = args.loss or getattr(model, "remat_loss", None) or ("ce" if args.model.startswith("torchvision:") else "sum")
    return tuple(shape), dtype, high, loss


def export(args):
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    model = load_model(args.model, parse_kv(args.arg))
    model.train()
    shape, dtype, high, loss_kind = settings(args, model)
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
    try:
        with torch.autograd.graph.saved_tensors_hooks(rec.pack, rec.unpack):
            with rec:
                out = model(x)
                if isinstance(out, (tuple, list)):
                    out = out[0]
                if hasattr(out, "logits"):
                    out = out.logits
            target = make_target(loss_kind, out.detach(), args.seed)
            if target is not None:
                rec.add_leaf(target, "target", "input")
            with rec:
                loss = loss_of(loss_kind, out, target)
        rec.settle()
        rec.collect_saves()
    finally:
        for h in hooks:
            h.remove()
    t_trace = time.perf_counter() - t1
    loss_tid = rec.resolve(loss)
    graph = build_graph(rec, loss_tid, args, shape, dtype, high, loss_kind)
    # Timings go to stderr, not into the graph: the same command must give
    # the same file.
    print("export_torch: %s: %d ops (%d recorded), %d inputs, %d params; model built in %.2f s, traced in %.2f s" %
          (graph["name"], len(graph["ops"]), len(rec.ops), len(graph["inputs"]), len(graph["params"]), t_build,
           t_trace), file=sys.stderr)
    return graph


def build_graph(rec, loss_tid, args, shape, dtype, high, loss_kind):
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
        # An op without a grad_fn saved nothing (and gets no backward step
        # when nothing it reads needs a gradient).
        d["saves"] = op.saves if op.node is not None else []
        if not op.recomputable:
            d["recomputable"] = False
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
    if args.arg:
        meta["factory_args"] = parse_kv(args.arg)
    return {"format": "remat-graph", "version": 1, "name": name, "meta": meta, "inputs": inputs,
            "params": params, "ops": out_ops, "outputs": [loss_tid]}


def rec_bytes_of_root(rec, t):
    """The logical size a view has by default: its base's (remat's rule)."""
    base = rec.tensors[t.alias_of]
    if base.alias_of:
        return base.logical
    return base.bytes


def bwd_flops(rec, op):
    if op.node is None:
        return None
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
    ap.add_argument("--input-dtype", help="float32 (default), bfloat16 or int64")
    ap.add_argument("--input-high", type=int, help="int64 inputs: values in [0, HIGH)")
    ap.add_argument("--loss", choices=["ce", "mse", "sum"], help="default: ce for torchvision, else the model's")
    ap.add_argument("--arg", action="append", metavar="KEY=VALUE", help="a keyword argument for the factory")
    ap.add_argument("--name", help="the graph's name (default: the factory's name)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-rng-replay", action="store_true", help="mark random ops not recomputable")
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
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
