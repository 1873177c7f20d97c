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
