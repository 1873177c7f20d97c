"""torch_measure.py - a training step's peak as PyTorch's profiler sees it (used by scripts/remat_torch.py).

    peak = measured_peak(step, model, example_inputs)     # one profiled step, state restored
    step_peak, activation_peak = measured_peaks(prof)     # from a profile of a step remat_torch ran

The profiler's "[memory]" events are every allocation and free the CPU
allocator made, with sizes but no addresses; the running sum's maximum is
the step peak beyond what existed before it. The activation peak removes
the parameter gradients the backward has returned, which remat_torch's
interpreter marks (remat_torch.MARK_RETURNED) with record_function names
carrying the storage pointer and size, matched back to the allocation that
made them. Moved out of remat_torch.py so that file stays about compiling.
"""
import bisect

import torch


def measured_peaks(prof):
    """(step peak, activation peak) of a profiled step: the peak of the allocator's running sum, and the
    peak of the same sum less the parameter gradients the backward graph has returned (marked by the
    runner when MARK_RETURNED is set), each from the allocation that made it: the latest allocation of
    its size before its mark that no free of that size undoes (allocator events carry no address). That is remat's activation peak
    (activations, recomputed activations, activation gradients, workspace) as PyTorch's allocator sees
    it, up to the backward graph's end (after it autograd only moves the gradients into .grad)."""
    evs = list(prof.profiler.kineto_results.events())
    mem = sorted(((e.start_us(), e.nbytes()) for e in evs if e.name() == "[memory]"), key=lambda x: x[0])
    marks, end = [], None
    for e in evs:
        if e.name().startswith("remat_torch:returned:"):
            _, _, ptr, nb = e.name().split(":")
            marks.append((e.start_us(), int(ptr), int(nb)))
        elif e.name() == "remat_torch:backward_end":
            end = e.start_us()
    times = [t for t, _ in mem]
    grad_at = {}                 # memory event index -> gradient bytes it allocated
    seen = set()
    for t, ptr, nb in sorted(marks):
        if ptr in seen:
            continue
        seen.add(ptr)
        k = bisect.bisect_right(times, t) - 1
        freed = 0                # frees of this size after k: the allocations they undo were temporaries
        while k >= 0:
            if mem[k][1] == -nb:
                freed += 1
            elif mem[k][1] == nb and k not in grad_at:
                if not freed:
                    break
                freed -= 1
            k -= 1
        grad_at[max(k, 0)] = grad_at.get(max(k, 0), 0) + nb
    cur = peak = grads = act = 0
    for k, (t, nb) in enumerate(mem):
        cur += nb
        grads += grad_at.get(k, 0)
        peak = max(peak, cur)
        if end is None or t <= end:
            act = max(act, cur - grads)
    return peak, act


def measured_peak(step, model, example_inputs):
    """One training step of `step` under the profiler: the peak bytes it allocates beyond what existed. The
    model's gradients, buffers (batch-norm statistics) and the RNG state are restored afterwards."""
    from torch.profiler import profile, ProfilerActivity
    grads = [(p, p.grad) for p in model.parameters()]
    bufs = [(b, b.detach().clone()) for b in model.buffers()]
    state = torch.get_rng_state()
    for p, _ in grads:
        p.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = step(*example_inputs)
        (out if out.dim() == 0 else out.sum()).backward()
        del out
    cur = peak = 0
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    for e in sorted(evs, key=lambda e: e.start_us()):
        cur += e.nbytes()
        peak = max(peak, cur)
    for p, g in grads:
        p.grad = g
    with torch.no_grad():
        for b, v in bufs:
            b.copy_(v)
    torch.set_rng_state(state)
    return peak
