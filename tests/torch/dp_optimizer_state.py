#!/usr/bin/python3
"""dp_optimizer_state.py - each data-parallel rank's optimizer state, measured
in a real torch.distributed run, against remat's per-rank replay.

    /usr/bin/python3 tests/torch/dp_optimizer_state.py REMAT GRAPH

GRAPH is torchvision's resnet18 exported by scripts/export_torch.py (f32).
Two processes on 127.0.0.1 (gloo backend, bounded by a timeout) each build
the same model with random weights, take one Adam step on a batch of 2 and
report the bytes of their optimizer state:

* DDP (torch.nn.parallel.DistributedDataParallel): every rank keeps Adam's
  two moments for every trainable element; remat's figure is
  `replay GRAPH --dp 2 --zero 0 --optimizer adam --json`'s
  at_optimizer.optimizer_state. They must be equal exactly.
* ZeroRedundancyOptimizer (torch/distributed/optim/zero_redundancy_optimizer.py)
  assigns whole parameters to ranks greedily by size, so a rank's share is
  not remat's flat ceil(Psi / N) partition (ZeRO stage 1): the ranks' bytes
  must add up to remat's unsharded figure exactly, and each rank's difference
  from the flat partition is printed (remat does not model that assignment).

Adam's per-parameter `step` counters (a 4-byte tensor each in torch 1.13)
are reported separately: remat's ledger does not count them.
Exits 0 when the checks hold, 1 otherwise; prints a skip line and exits 0
without torch.
"""
import json
import os
import socket
import subprocess
import sys

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torchvision
except Exception as e:  # pragma: no cover - environment without torch
    print("dp_optimizer_state: skipped (%s)" % e)
    sys.exit(0)


def state_bytes(opt):
    moments = steps = 0
    for st in opt.state.values():
        for k, v in st.items():
            if torch.is_tensor(v):
                if k == "step":
                    steps += v.numel() * v.element_size()
                else:
                    moments += v.numel() * v.element_size()
    return moments, steps


def worker(rank, world, port, q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(2, 3, 64, 64)
    y = torch.tensor([1, 2])
    out = {}
    model = torch.nn.parallel.DistributedDataParallel(torchvision.models.resnet18(weights=None))
    opt = torch.optim.Adam(model.parameters())
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    out["ddp"] = state_bytes(opt)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    model2 = torchvision.models.resnet18(weights=None)
    zro = ZeroRedundancyOptimizer(model2.parameters(), optimizer_class=torch.optim.Adam)
    torch.nn.functional.cross_entropy(model2(x), y).backward()
    zro.step()
    out["zero_r"] = state_bytes(zro.optim)
    q.put((rank, out))
    dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def remat_state(remat, graph, zero, dp):
    r = subprocess.run([remat, "replay", graph, "--dp", str(dp), "--zero", str(zero), "--optimizer", "adam",
                        "--json"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit("dp_optimizer_state: remat failed: " + r.stderr)
    return json.loads(r.stdout)["at_optimizer"]["optimizer_state"]


def main():
    remat, graph = sys.argv[1], sys.argv[2]
    world = 2
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, world, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    res = {}
    try:
        for _ in range(world):
            rank, out = q.get(timeout=240)
            res[rank] = out
    except Exception as e:
        for p in procs:
            p.kill()
        sys.exit("dp_optimizer_state: the gloo run did not finish: %s" % e)
    for p in procs:
        p.join(timeout=30)
    ddp_pred = remat_state(remat, graph, 0, world)
    flat_pred = remat_state(remat, graph, 1, world)
    ok = True
    for r in range(world):
        m, s = res[r]["ddp"]
        good = m == ddp_pred
        ok &= good
        print("DDP rank %d: Adam moments %d B, remat %d B (%s); step counters %d B (not in remat)"
              % (r, m, ddp_pred, "equal" if good else "DIFFER", s))
    total = sum(res[r]["zero_r"][0] for r in range(world))
    good = total == ddp_pred
    ok &= good
    for r in range(world):
        m, s = res[r]["zero_r"]
        print("ZeroRedundancyOptimizer rank %d: Adam moments %d B; remat's flat ZeRO-1 partition %d B (%+d B)"
              % (r, m, flat_pred, m - flat_pred))
    print("ZeroRedundancyOptimizer ranks together: %d B, remat unsharded %d B (%s)"
          % (total, ddp_pred, "equal" if good else "DIFFER"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
