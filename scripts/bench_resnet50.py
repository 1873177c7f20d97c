#!/usr/bin/python3
"""bench_resnet50.py - export and plan timings for ResNet-50, and block checkpointing against remat's auto.

    /usr/bin/python3 scripts/bench_resnet50.py build/remat [--graph graphs/resnet50-b2.json] [--batch 2]

Prints (figures, never pass/fail on time):
* the export time of torchvision's resnet50 (when /usr/bin/python3 has torch;
  the bundled graph is used otherwise) and the time of each remat command;
* the plan "checkpoint every bottleneck block" (what wrapping each block in
  torch.utils.checkpoint does; scripts/checkpoint_blocks_plan.py) replayed by
  remat: its peak P and extra FLOPs E;
* remat's `auto` at `--budget P`: its peak and extra FLOPs, and E / E_auto;
* with torch (and without --no-export or --no-tables): the exporter's
  fidelity table (scripts/torch_fidelity.py) and remat's plan in real
  training against min-cut and checkpointing (scripts/bench_remat_torch.py),
  figures only.
Exits 1 if a command fails, auto does not meet P, or auto needs more than
half of E (the claim this comparison exists to check).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def timed(cmd):
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out.stdout, time.perf_counter() - t


def replay(remat, graph, plan=None):
    out, dt = timed([remat, "replay", graph] + ([plan] if plan else []) + ["--json"])
    return json.loads(out), dt


def mib(b):
    return "%.2f MiB (%d B)" % (b / 2 ** 20, b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("--graph", default=os.path.join(ROOT, "graphs", "resnet50-b2.json"))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--no-export", action="store_true",
                    help="plan the bundled graph; do not time an export (nor print the tables below)")
    ap.add_argument("--no-tables", action="store_true",
                    help="skip scripts/torch_fidelity.py and scripts/bench_remat_torch.py")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="remat-bench-")
    graph = a.graph
    try:
        import torch  # noqa: F401
        have_torch = not a.no_export
    except ImportError:
        have_torch = False
    if have_torch:
        graph = os.path.join(tmp, "resnet50.json")
        _, dt = timed([sys.executable, os.path.join(HERE, "export_torch.py"), "torchvision:resnet50", "--batch",
                       str(a.batch), "-o", graph])
        print("export   torchvision:resnet50 batch %d, 224x224: %.2f s (python, model build + trace)" % (a.batch, dt))
    else:
        print("export   skipped (--no-export, or no torch for %s); using %s" % (sys.executable, graph))

    _, t_life = timed([a.remat, "lifetimes", graph, "--json"])
    store, t_store = replay(a.remat, graph)
    plans = {}
    for strat in ("store-all", "sqrtn", "auto"):
        path = os.path.join(tmp, strat + ".json")
        out, dt = timed([a.remat, "plan", graph, "--strategy", strat, "-o", path, "--json"])
        plans[strat] = (json.loads(out)["replay"], dt)
    print("remat    lifetimes %.3f s; replay store-all %.3f s; plan store-all %.3f s, sqrtn %.3f s, auto %.3f s" %
          (t_life, t_store, plans["store-all"][1], plans["sqrtn"][1], plans["auto"][1]))

    blocks = os.path.join(tmp, "blocks.json")
    subprocess.run([sys.executable, os.path.join(HERE, "checkpoint_blocks_plan.py"), a.remat, graph, "-o", blocks],
                   check=True, stdout=subprocess.DEVNULL)
    blk, _ = replay(a.remat, graph, blocks)
    P, E = blk["peak_bytes"], blk["flops"]["recompute"]
    fwd_bwd = blk["flops"]["forward"] + blk["flops"]["backward"]
    out, t_auto = timed([a.remat, "plan", graph, "--strategy", "auto", "--budget", str(P), "--json"])
    auto = json.loads(out)["replay"]
    Ea = auto["flops"]["recompute"]
    print("store-all            peak %s, extra FLOPs 0" % mib(store["peak_bytes"]))
    print("checkpoint blocks    peak P = %s, extra FLOPs E = %d (%.2f%% of forward+backward)" %
          (mib(P), E, 100.0 * E / fwd_bwd))
    print("auto --budget P      peak %s, extra FLOPs %d (%.2f%%), planned in %.2f s" %
          (mib(auto["peak_bytes"]), Ea, 100.0 * Ea / fwd_bwd, t_auto))
    print("E / E_auto           %.2f" % (E / Ea if Ea else float("inf")))
    ok = auto["peak_bytes"] <= P and 2 * Ea < E
    if have_torch and not a.no_tables:
        # The rest of the PyTorch section: the exporter against PyTorch's own
        # figures model by model, and remat's plan in real training against
        # the min-cut partitioner and torch.utils.checkpoint. Figures only.
        sys.stdout.flush()
        for script in ("torch_fidelity.py", "bench_remat_torch.py"):
            print("\n%s" % script)
            sys.stdout.flush()
            subprocess.run([sys.executable, "-W", "ignore", os.path.join(HERE, script), a.remat])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
