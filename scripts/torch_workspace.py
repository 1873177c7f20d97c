"""torch_workspace.py - convolution workspace measured with PyTorch's own allocator events.

A convolution's forward and backward kernels allocate temporaries that live
only while the kernel runs (im2col column buffers, a contiguous copy of the
incoming gradient, per-thread partial sums): remat's `workspace` and
`bwd_workspace`. They depend on the backend PyTorch picks for the shapes
(mkldnn, slow_conv2d, depthwise), so they are measured, not guessed: each
distinct convolution (shapes, strides, dtype, parameters) is run once more,
forward then backward, outside any dispatch mode, under
torch.profiler(profile_memory=True), and its workspace is the high-water mark
of the allocator's running sum less what the call returns (the output, or
the input/weight/bias gradients), which remat counts as new outputs. The
figure is the same one the step's profiler would see for that kernel.
"""
import torch
from torch.profiler import profile, ProfilerActivity


def _peak_minus_result(fn):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        res = fn()
    cur = peak = 0
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    for e in sorted(evs, key=lambda e: e.start_us()):
        cur += e.nbytes()
        peak = max(peak, cur)
    kept = 0
    seen = set()
    for r in (res if isinstance(res, (tuple, list)) else (res,)):
        if isinstance(r, torch.Tensor):
            s = r._storage() if hasattr(r, "_storage") else r.storage()._untyped()
            if s.data_ptr() not in seen:
                seen.add(s.data_ptr())
                kept += s.nbytes()
    return max(0, peak - kept)


def _key(args):
    k = []
    for a in args:
        if isinstance(a, torch.Tensor):
            k.append(("T", tuple(a.shape), tuple(a.stride()), a.dtype, a.requires_grad))
        elif isinstance(a, (list, tuple)):
            k.append(tuple(a))
        else:
            k.append(a)
    return tuple(k)


class ConvWorkspace:
    """Measures (workspace, bwd_workspace) of aten.convolution calls, one measurement per distinct call."""

    def __init__(self):
        self.cache = {}

    def measure(self, args, needs_input_grad):
        """args: aten.convolution's (input, weight, bias, stride, padding, dilation, transposed,
        output_padding, groups), tensors still alive."""
        key = (_key(args), needs_input_grad)
        if key in self.cache:
            return self.cache[key]
        x, w, b = args[0], args[1], args[2]
        rest = list(args[3:9])
        with torch.no_grad():
            xs = x.detach().clone()
            ws = w.detach().clone()
            bs = b.detach().clone() if isinstance(b, torch.Tensor) else None
            fwd = _peak_minus_result(lambda: torch.ops.aten.convolution(xs, ws, bs, *rest))
            out = torch.ops.aten.convolution(xs, ws, bs, *rest)
            g = torch.randn_like(out)
            mask = [bool(needs_input_grad), bool(w.requires_grad), isinstance(b, torch.Tensor) and b.requires_grad]
            bias_sizes = list(b.shape) if isinstance(b, torch.Tensor) else None
            bwd = _peak_minus_result(lambda: torch.ops.aten.convolution_backward(
                g, xs, ws, bias_sizes, *rest, mask))
        self.cache[key] = (fwd, bwd)
        return fwd, bwd


class NormWorkspace:
    """Measures (0, bwd_workspace) of aten.native_batch_norm calls in training mode: on CPU the backward
    kernel holds a temporary as large as the input beside the input gradient it returns (torch 1.13's
    batch_norm_backward_cpu), which the step's peak shows and a model without it misses by one
    activation at every batch norm's backward step."""

    def __init__(self):
        self.cache = {}

    def measure(self, args, needs_input_grad):
        """args: aten.native_batch_norm's (input, weight, bias, running_mean, running_var, training,
        momentum, eps), tensors still alive."""
        key = (_key(args), needs_input_grad)
        if key in self.cache:
            return self.cache[key]
        x, w, b, rm, rv, training, momentum, eps = args[:8]
        with torch.no_grad():
            xs = x.detach().clone()
            rms = rm.detach().clone() if isinstance(rm, torch.Tensor) else None
            rvs = rv.detach().clone() if isinstance(rv, torch.Tensor) else None
            out, mean, invstd = torch.ops.aten.native_batch_norm(xs, w, b, rms, rvs, training, momentum, eps)
            g = torch.randn_like(out)
            mask = [bool(needs_input_grad), isinstance(w, torch.Tensor) and w.requires_grad,
                    isinstance(b, torch.Tensor) and b.requires_grad]
            bwd = _peak_minus_result(lambda: torch.ops.aten.native_batch_norm_backward(
                g, xs, w, rms, rvs, mean, invstd, training, eps, mask))
        self.cache[key] = (0, bwd)
        return self.cache[key]


def _peak_until(prof, marker=None):
    """The allocator's running-sum peak over a profile, up to the first record_function named marker."""
    evs = list(prof.profiler.kineto_results.events())
    end = None
    if marker is not None:
        end = min((e.start_us() for e in evs if e.name() == marker), default=None)
    cur = peak = 0
    for e in sorted((e for e in evs if e.name() == "[memory]"), key=lambda e: e.start_us()):
        if end is not None and e.start_us() > end:
            break
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


def _storage_bytes(ts):
    seen = {}
    for t in ts:
        if isinstance(t, torch.Tensor):
            s = t._storage() if hasattr(t, "_storage") else t.storage()._untyped()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def checkpoint_workspace(fn, args, params, preserve_rng_state=True):
    """(workspace, bwd_workspace) of one reentrant torch.utils.checkpoint(fn, *args) call, measured.

    Forward: fn runs under no_grad (as CheckpointFunction.forward runs it); the workspace is the peak less
    the output. Backward: CheckpointFunction.backward reruns fn with grad and backpropagates through it;
    the peak until its input gradients reach their leaves (a hook marks it, before AccumulateGrad would
    copy a non-contiguous one), less what remat allocates itself at that step: the input gradients and
    the gradients of the params fn reads (params: every trainable param the model has, so fn's own get
    theirs; the others stay None). The RNG state and the params' .grad are restored afterwards."""
    import torch.utils.checkpoint as ckpt
    state = torch.get_rng_state()
    saved_grads = [p.grad for p in params]
    try:
        with torch.no_grad():
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                out = fn(*args)
            fwd = max(0, _peak_until(prof) - _storage_bytes([out]))
            del out
        det = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
        wanted = [a for a in det if isinstance(a, torch.Tensor) and a.requires_grad]
        for p in params:
            p.grad = None
        out = ckpt.checkpoint(fn, *det, use_reentrant=True, preserve_rng_state=preserve_rng_state)
        g = torch.ones_like(out)
        arrived = []

        def mark(grad):
            arrived.append(grad)
            if len(arrived) == 1:
                with torch.profiler.record_function("remat:checkpoint_inputs_done"):
                    pass
        hooks = [a.register_hook(mark) for a in wanted]
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            out.backward(g)
        for h in hooks:
            h.remove()
        peak = _peak_until(prof, "remat:checkpoint_inputs_done" if wanted else None)
        new = _storage_bytes(arrived) + _storage_bytes([p.grad for p in params if p.grad is not None])
        bwd = max(0, peak - new)
    finally:
        for p, gr in zip(params, saved_grads):
            p.grad = gr
        torch.set_rng_state(state)
    return fwd, bwd
