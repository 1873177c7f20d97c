#!/usr/bin/python3
"""pp_1f1b.py - each pipeline stage's peak in a real 1F1B run with
torch.distributed, against remat's per-device prediction.

    /usr/bin/python3 tests/torch/pp_1f1b.py REMAT [--stages 2 4] [--tolerance 0.05]

The model is a stack of bias-free Linear + ReLU layers (B x D activations,
f32) ending in Linear(D, 1) and a sum, split into P stages of equal layers,
one process per stage on 127.0.0.1 (gloo). Each process runs PipeDream-Flush
(Narayanan et al. 2021 section 2.2.1; Megatron-LM's
forward_backward_pipelining_without_interleaving): min(P - s - 1, M) warm-up
forwards, then one forward and one backward in turn, then the remaining
backwards, with activations sent forward and gradients backward (isend,
each waited on after the next receive). A
microbatch's data is made just before its forward on the first stage; the
received activation and gradient land in fresh buffers. The step runs under
torch.profiler(profile_memory=True); a stage's peak is the maximum running
sum of the allocator's memory events (what the step allocated beyond the
parameters, which exist before it).

remat's figure: the same model written here as a remat-graph (each matmul
saves its inputs, ReLU its output, the sum nothing, as autograd does), then
`remat plan --pp P --microbatches M --pp-stages ... --strategy store-all
--json`: each device's peak_bytes less its stage's parameter bytes.

Prints both and their ratio per stage; exits 1 if a ratio is further than the
tolerance from 1. Bounded: one step, a timeout on every process. Prints a
skip line and exits 0 without torch.

For scripts/bench_pp_time.py (`make bench BENCH=pp-time`) the same worker
also times whole steps (time_steps: the profiler off, one warm-up step, then
each step between barriers, its time the slowest rank's), and `mlp` is the
whole model as one module, for scripts/export_torch.py --measure-durations.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.profiler import profile, ProfilerActivity
except Exception as e:  # pragma: no cover - environment without torch
    print("pp_1f1b: skipped (%s)" % e)
    sys.exit(0)

B, D, LAYERS, M = 1024, 128, 8, 8


def profiler_peak(prof):
    cur = peak = 0
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    for e in sorted(evs, key=lambda e: e.start_us()):
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


def stage_module(s, P):
    per = LAYERS // P
    torch.manual_seed(s)
    mods = []
    for _ in range(per):
        mods += [torch.nn.Linear(D, D, bias=False), torch.nn.ReLU()]
    if s == P - 1:
        mods.append(torch.nn.Linear(D, 1, bias=False))
    return torch.nn.Sequential(*mods)


def mlp():
    """The whole model of every stage together (its weights differ from the stages' seeds; its shapes and ops do
    not): export_torch.py's factory, input (B, D) with --batch B."""
    mods = []
    for _ in range(LAYERS):
        mods += [torch.nn.Linear(D, D, bias=False), torch.nn.ReLU()]
    mods.append(torch.nn.Linear(D, 1, bias=False))
    m = torch.nn.Sequential(*mods)
    m.remat_input = {"shape": (D,)}
    m.remat_loss = "sum"
    return m


def worker(s, P, port, q, time_steps=0):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=s, world_size=P, timeout=__import__("datetime").timedelta(seconds=120))
    model = stage_module(s, P)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    last = s == P - 1
    warm = min(P - s - 1, M)
    held = {}
    # Sends are isends; each is waited on after this process's next receive
    # has completed, as Megatron-LM pairs a send with the next receive
    # (send_forward_recv_backward): waiting at once would deadlock 1F1B,
    # where two neighbours send to each other at the same moment.
    pending = []

    def flush():
        for req in pending:
            req.wait()
        pending.clear()

    def forward(i):
        if s == 0:
            x = torch.randn(B, D)
        else:
            x = torch.empty(B, D)
            dist.recv(x, s - 1, tag=i)
            flush()
            x.requires_grad_(True)
        y = model(x)
        if last:
            y = y.sum()
        else:
            pending.append(dist.isend(y.detach(), s + 1, tag=i))
        held[i] = (x, y)

    def backward(i):
        x, y = held.pop(i)
        if last:
            y.backward()
        else:
            g = torch.empty(B, D)
            dist.recv(g, s + 1, tag=M + i)
            flush()
            torch.autograd.backward(y, g)
            del g
        del y
        if s > 0:
            pending.append(dist.isend(x.grad, s - 1, tag=M + i))
        del x

    def step():
        nf = nb = 0
        for _ in range(warm):
            forward(nf)
            nf += 1
        for _ in range(M - warm):
            forward(nf)
            nf += 1
            backward(nb)
            nb += 1
        while nb < M:
            backward(nb)
            nb += 1
        flush()

    if time_steps:
        # Forward and backward of every microbatch, no optimizer (the
        # prediction covers the same); gradients accumulate over the steps,
        # which costs nothing extra.
        # Each step's wall time is the slowest rank's; its CPU share is the
        # ranks' CPU time (process-wide, gloo's threads included) over P x
        # the wall time: below 1 when P processes share fewer cores.
        times = []
        for i in range(time_steps + 1):
            dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            w = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            c = torch.tensor([time.process_time() - c0], dtype=torch.float64)
            dist.all_reduce(w, op=dist.ReduceOp.MAX)
            dist.all_reduce(c, op=dist.ReduceOp.SUM)
            if i:  # the first step warms up
                times.append((w.item(), c.item() / (P * w.item())))
        q.put((s, times, params))
        dist.destroy_process_group()
        return
    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    dist.barrier()
    q.put((s, profiler_peak(prof), params))
    dist.destroy_process_group()


def graph_json():
    f = 4
    inputs = [{"id": "x", "bytes": B * D * f}]
    params = [{"id": "w%d" % i, "bytes": D * D * f} for i in range(LAYERS)] + [{"id": "wout", "bytes": D * f}]
    ops, prev = [], "x"
    for i in range(LAYERS):
        ops.append({"id": "h%d" % i, "op": "matmul", "inputs": [prev, "w%d" % i], "bytes": B * D * f,
                    "flops": 2 * B * D * D})
        ops.append({"id": "a%d" % i, "op": "relu", "inputs": ["h%d" % i], "bytes": B * D * f, "flops": B * D,
                    "saves": ["a%d" % i]})
        prev = "a%d" % i
    ops.append({"id": "out", "op": "matmul", "inputs": [prev, "wout"], "bytes": B * f, "flops": 2 * B * D})
    ops.append({"id": "loss", "op": "sum", "inputs": ["out"], "bytes": f, "flops": B, "saves": []})
    return {"format": "remat-graph", "version": 1, "name": "mlp%d" % LAYERS, "inputs": inputs, "params": params,
            "ops": ops, "outputs": ["loss"]}


def remat_devices(remat, P):
    per = LAYERS // P
    cuts = [2 * per * s for s in range(P)] + [2 * LAYERS + 2]
    stages = ",".join("%d:%d" % (cuts[i], cuts[i + 1]) for i in range(P))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(graph_json(), fh)
        path = fh.name
    try:
        r = subprocess.run([remat, "plan", path, "--pp", str(P), "--microbatches", str(M), "--pp-stages", stages,
                            "--strategy", "store-all", "--json"], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        sys.exit("pp_1f1b: remat failed: " + r.stderr)
    doc = json.loads(r.stdout)
    return [(d["peak_bytes"], d["in_flight"]) for d in doc["devices"]]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run(P, time_steps=0):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(s, P, port, q, time_steps)) for s in range(P)]
    for p in procs:
        p.start()
    res = {}
    try:
        for _ in range(P):
            s, peak, params = q.get(timeout=240)
            res[s] = (peak, params)
    except Exception as e:
        for p in procs:
            p.kill()
        sys.exit("pp_1f1b: the gloo run did not finish: %s" % e)
    for p in procs:
        p.join(timeout=30)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--stages", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--tolerance", type=float, default=0.05)
    a = ap.parse_args()
    ok = True
    for P in a.stages:
        measured = run(P)
        pred = remat_devices(a.remat, P)
        for s in range(P):
            peak, params = measured[s]
            want = pred[s][0] - params
            ratio = want / peak if peak else float("inf")
            good = abs(ratio - 1) <= a.tolerance
            ok &= good
            print("P=%d M=%d stage %d: %d in flight; remat %d B, torch profiler %d B, ratio %.4f (%s)"
                  % (P, M, s, pred[s][1], want, peak, ratio, "ok" if good else "OFF"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
