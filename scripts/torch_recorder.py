"""torch_recorder.py - the dispatch-mode recorder behind scripts/export_torch.py.

Recorder is a TorchDispatchMode that sees every ATen op below the Autograd
key and the tensors autograd saves (through saved-tensor hooks): it records
ops, output storage sizes, views, and functionalizes in-place writes (a
storage's owner has versions; a write to a view makes a view-sized tensor
and an as_strided_scatter op for the base's next version; a view read after
an overlapping write is regenerated). export_torch.py's docstring describes
the rules; the FLOP rules are flops_of's. Split from export_torch.py so each
file stays readable; export_torch re-exports these names.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided
import torch
from torch.autograd.function import BackwardCFunction
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
# Views of a weight that keep all its elements (a transpose, a reshape): read as the weight itself.
PARAM_VIEWS = {"t", "transpose", "permute", "view", "_reshape_alias", "_unsafe_view", "squeeze", "unsqueeze",
               "alias", "expand_as", "reshape"}
# Ops whose result depends on their tensor arguments' shapes and dtypes only.
SHAPE_ONLY = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like",
              "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "scalar_tensor"}
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


def region(t):
    """The elements a tensor covers in its storage: (offset, shape, strides, itemsize)."""
    return (t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.element_size())


def overlaps(a, b):
    """Whether two regions of one storage share an element (exact; conservative across dtypes)."""
    if a[3] != b[3]:
        return True
    spans = []
    for off, shape, stride, _ in (a, b):
        if any(d == 0 for d in shape):
            return False
        spans.append((off, off + sum((d - 1) * s for d, s in zip(shape, stride))))
    if spans[0][1] < spans[1][0] or spans[1][1] < spans[0][0]:
        return False
    mask = np.zeros(max(spans[0][1], spans[1][1]) + 1, dtype=bool)
    for off, shape, stride, _ in (a,):
        as_strided(mask[off:], shape, stride, writeable=True)[...] = True
    off, shape, stride, _ = b
    return bool(as_strided(mask[off:], shape, stride).any())


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
                 "logical", "root_at", "is_root")

    def __init__(self, tid, nbytes, dtype, shape, producer=None, kind="activation", alias_of=None):
        self.tid, self.bytes, self.dtype, self.shape = tid, nbytes, dtype, shape
        self.producer, self.kind, self.alias_of = producer, kind, alias_of
        self.requires_grad, self.frozen = False, False
        # The version of its storage's owner this tensor was read from (see
        # Recorder.fresh): itself for an owner, the owner's tid for a view.
        self.root_at, self.is_root = tid, alias_of is None
        self.logical = None


class Op:
    __slots__ = ("index", "oid", "name", "inputs", "outputs", "flops", "saves", "node", "module", "recomputable",
                 "pending", "args", "objs", "workspace", "bwd_workspace", "synthetic", "call")

    def __init__(self, index, oid, name):
        self.index, self.oid, self.name = index, oid, name
        self.inputs, self.outputs, self.saves = [], [], []
        self.flops, self.node, self.module = 0, None, None
        self.recomputable, self.pending, self.args = True, [], None
        self.objs = []          # the Python outputs (a custom Function sets their grad_fn late)
        self.workspace = self.bwd_workspace = 0
        self.synthetic = False  # made by the recorder (a regenerated view, a scatter, a constant)
        self.call = None        # which dispatch call of the recorded step made it (torch_durations.py matches on it)


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
        self.pack_at = []       # token -> len(self.ops) when it was packed
        self.unpacked = []
        self.rng_replay = rng_replay
        self._ptr = {}          # tid -> storage pointer, for storage owners
        self.owner = {}         # storage pointer -> tid of the owner's current version
        self.version = {}       # owner tid -> index of the write that made it (0: the first version)
        self.writes = {}        # storage pointer -> [(offset, shape, stride, itemsize)] in write order
        self.warnings = []
        self.last = None        # the last dispatched op (a scatter op may follow it in self.ops)
        self.calls = 0          # dispatch calls so far, every one counted (recorded or not)

    def warn(self, msg):
        if msg not in self.warnings:
            self.warnings.append(msg)

    # -- tensors --
    def add_leaf(self, t, tid, kind, frozen=False, requires_grad=False):
        ptr, nb = storage_of(t)
        rec = Tensor(tid, nb, DTYPE_NAMES.get(t.dtype, str(t.dtype)), list(t.shape), kind=kind)
        rec.frozen, rec.requires_grad = frozen, requires_grad
        self.tensors[tid] = rec
        self._ptr[tid] = ptr
        self.new_owner(ptr, tid)
        self.bind(t, tid)
        return rec

    def new_owner(self, ptr, tid):
        self.owner[ptr] = tid
        self.version[tid] = len(self.writes.get(ptr, ()))

    def bind(self, t, tid):
        self.by_obj[id(t)] = tid
        self.keep.append(t)
        self.by_geom.setdefault(geometry(t), []).append(tid)

    def resolve(self, t):
        """The graph tensor for a Python tensor: by identity, else by storage geometry (the latest
        tensor with that storage, offset, shape, strides and dtype), else None; then brought up to
        its storage's current version (fresh)."""
        tid = self.by_obj.get(id(t))
        if tid is None:
            cands = self.by_geom.get(geometry(t))
            tid = cands[-1] if cands else None
        return None if tid is None else self.fresh(t, tid)

    def fresh(self, t, tid):
        """Functionalization of reads after an in-place write. A storage's owner has versions (each
        in-place write makes one). A tensor recorded against an older version is still what it was
        unless a later write touched its elements: an owner then reads as the current version, and
        a view overlapping a write is made again from it (an `as_strided` view op), as
        functionalization regenerates views from their updated base."""
        rec = self.tensors[tid]
        ptr = storage_of(t)[0]
        cur = self.owner.get(ptr)
        if cur is None or rec.root_at == cur or rec.kind != "activation" and rec.is_root:
            return tid
        if rec.is_root:
            return cur
        since = self.version.get(rec.root_at, 0)
        if not any(overlaps(w, region(t)) for w in self.writes.get(ptr, [])[since:]):
            return tid
        self.settle()
        op = Op(len(self.ops), "regen%d" % self.counter, "as_strided")
        self.counter += 1
        op.module = self.module_stack[-1] if self.module_stack else ""
        op.inputs = [cur]
        new = Tensor(op.oid, None, DTYPE_NAMES.get(t.dtype, str(t.dtype)), list(t.shape), producer=op.index,
                     alias_of=cur)
        new.logical, new.root_at = t.numel() * t.element_size(), cur
        self.tensors[op.oid] = new
        op.outputs.append(op.oid)
        op.args = ("as_strided", [])
        op.synthetic = True
        self.ops.append(op)
        self.bind(t, op.oid)
        return op.oid

    def resolve_or_const(self, t):
        tid = self.resolve(t)
        if tid is None:
            ptr = storage_of(t)[0]
            # A view of a known tensor that we never saw created (made with
            # dispatch off): stand for its storage's owner, which owns the bytes.
            if ptr in self.owner and self.tensors[self.owner[ptr]].bytes:
                return self.owner[ptr]
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
            op.synthetic = True
            self.ops.append(op)
            self.bind(t, tid)
            self._ptr[tid] = ptr
            self.new_owner(ptr, tid)
        return tid

    # -- autograd --
    def settle(self):
        """Reads the grad_fn autograd attached to the last dispatched op's outputs."""
        op = self.last
        if op is not None and op.pending:
            # Autograd has now wrapped the outputs (inside the dispatch
            # they never require grad).
            for tid, t in zip(op.outputs, op.pending):
                self.tensors[tid].requires_grad = t.requires_grad
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
        self.pack_at.append(self.last.index if self.last is not None else -1)
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
        if name in SHAPE_ONLY:
            # empty_like(x) reads x's shape, not its values: no data edge,
            # so no gradient flows through it (dropout's mask is made so).
            in_tensors = []
        in_tids = [self.resolve_or_const(a) for a in in_tensors]
        call = self.calls
        self.calls += 1
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
        if (name in PARAM_VIEWS and in_tids and self.tensors[in_tids[0]].kind == "param" and len(outs) == 1 and
                storage_of(outs[0])[0] == self._ptr.get(in_tids[0]) and outs[0].numel() == in_tensors[0].numel()):
            # A transpose or reshape of a weight (Linear's t()): PyTorch
            # writes its gradient in the weight's own layout (mm's backward
            # computes the transposed product), so the weight's gradient is
            # the only buffer. Reading the weight itself gives remat that.
            self.bind(outs[0], in_tids[0])
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
        after = []
        for j, o in enumerate(outs):
            tid = op.oid if j == 0 else "%s:%d" % (op.oid, j)
            ptr, nb = storage_of(o)
            dt = DTYPE_NAMES.get(o.dtype, str(o.dtype))
            if j < len(writes) and writes[j]:
                self.tensors[tid] = self.written(op, tid, o, after)
            elif nb and ptr in in_ptrs:
                alias = in_ptrs[ptr]
                rec = Tensor(tid, None, dt, list(o.shape), producer=idx, alias_of=alias)
                rec.logical = o.numel() * o.element_size()
                rec.root_at = self.tensors[alias].root_at
                self.tensors[tid] = rec
            else:
                self.tensors[tid] = Tensor(tid, nb, dt, list(o.shape), producer=idx)
                self._ptr[tid] = ptr
                self.new_owner(ptr, tid)
            op.outputs.append(tid)
            self.bind(o, tid)
        op.flops = flops_of(name, list(args), outs)
        op.call = call
        op.args = (name, list(args))
        op.pending = outs
        op.objs = outs
        self.ops.append(op)
        self.last = op
        for extra in after:
            extra.index = len(self.ops)
            self.tensors[extra.outputs[0]].producer = extra.index
            self.ops.append(extra)
        return out

    def written(self, op, tid, o, after):
        """The output of an in-place op (functionalized: a new tensor). Writing a whole storage makes
        its owner's next version. Writing a view (a chunk, a slice, a flattened view) makes a tensor of
        the view's own size, and an `as_strided_scatter` op (appended to `after`) makes the owner's
        next version from the old one and the written part, so readers of the base or of an
        overlapping view read what PyTorch's buffer holds."""
        ptr, nb = storage_of(o)
        dt = DTYPE_NAMES.get(o.dtype, str(o.dtype))
        cur = self.owner.get(ptr)
        base = self.tensors.get(cur) if cur is not None else None
        if base is None or base.kind != "activation":
            # A buffer updated in place (num_batches_tracked += 1): a new
            # tensor; readers of the buffer still read the buffer.
            rec = Tensor(tid, nb, dt, list(o.shape), producer=op.index)
            self._ptr[tid] = ptr
            return rec
        size = o.numel() * o.element_size()
        whole = o.storage_offset() == 0 and size == nb and o.is_contiguous()
        self.writes.setdefault(ptr, []).append(region(o))
        if whole:
            rec = Tensor(tid, nb, dt, list(o.shape), producer=op.index)
            self._ptr[tid] = ptr
            self.new_owner(ptr, tid)
            return rec
        rec = Tensor(tid, size, dt, list(o.shape), producer=op.index)
        rec.is_root = False
        sc = Op(-1, "scatter%d" % self.counter, "as_strided_scatter")
        self.counter += 1
        sc.module = op.module
        sc.inputs = [cur, tid]
        sc.flops = o.numel()
        sc.args = ("as_strided_scatter", [])
        sc.synthetic = True
        new = Tensor(sc.oid, nb, DTYPE_NAMES.get(o.dtype, str(o.dtype)), list(base.shape))
        new.requires_grad = o.requires_grad
        self.tensors[sc.oid] = new
        self._ptr[sc.oid] = ptr
        sc.outputs.append(sc.oid)
        self.new_owner(ptr, sc.oid)
        rec.root_at = sc.oid
        after.append(sc)
        return rec

    def collect_saves(self):
        """Reads each op's grad_fn `_saved_*` attributes (a Python autograd.Function's saved_tensors)
        through the unpack hook; then gives each packed tensor that no attribute showed (an in-place
        op on a view: autograd wraps its node in CopySlices, which shows nothing) to the op it was
        packed for."""
        self.settle()
        claimed_nodes = set()
        for op in self.ops:
            if op.node is None:
                # A custom Function's outputs get their grad_fn once its
                # forward returns, after the op that made them ran.
                for o in op.objs:
                    gf = o.grad_fn
                    if isinstance(gf, BackwardCFunction) and id(gf) not in claimed_nodes:
                        op.node = gf
                        break
            if op.node is not None:
                if id(op.node) in claimed_nodes:
                    op.node = None
                    continue
                claimed_nodes.add(id(op.node))
        claimed = set()
        for op in self.ops:
            if op.node is None:
                continue
            saved = []
            attrs = [a for a in dir(op.node) if a.startswith("_saved_")]
            if isinstance(op.node, BackwardCFunction):
                attrs.append("saved_tensors")
            for attr in attrs:
                self.unpacked = []
                try:
                    getattr(op.node, attr)
                except Exception:  # an attribute autograd cannot return (freed); none here
                    continue
                for tok in self.unpacked:
                    claimed.add(tok)
                    tid = self.packed[tok]
                    if tid not in saved:
                        saved.append(tid)
            op.saves = saved
        for tok, tid in enumerate(self.packed):
            if tok in claimed:
                continue
            w = self.pack_at[tok]
            prev = self.ops[w] if w >= 0 else None
            nxt = next((o for o in self.ops[w + 1:] if not o.synthetic), None)
            if prev is not None and tid in prev.outputs and self.tensors[tid].requires_grad:
                owner = prev       # an output it saves (sigmoid_ saves its result)
            elif nxt is not None and tid in nxt.inputs:
                owner = nxt        # an input it saves, packed before it ran (mul_'s other operand)
            elif prev is not None and tid in prev.inputs:
                owner = prev
            else:
                self.warn("export_torch: warning: autograd saved %s (%s bytes) for a node that no recorded op "
                          "shows; it is not in any op's saves" % (tid, self.tensors[tid].bytes))
                continue
            if owner.node is None:
                owner.node = True  # has a backward that reads what autograd saved
            if tid not in owner.saves:
                owner.saves.append(tid)
