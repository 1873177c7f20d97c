#!/usr/bin/python3
"""checkpoint_blocks_plan.py - the plan that torch.utils.checkpoint around every block makes, as a remat plan file.

    /usr/bin/python3 scripts/checkpoint_blocks_plan.py REMAT GRAPH -o PLAN [--block-depth 2] [--block-prefix layer]
    build/remat replay GRAPH PLAN --json        # its peak P and extra FLOPs E

GRAPH is a graph exported by scripts/export_torch.py: each op's attrs.module
names the module that ran it. A block is a module path cut to --block-depth
components under a top-level module whose name starts with --block-prefix
(torchvision's ResNets: layer1.0, layer1.1, ..., the bottleneck blocks).

Wrapping every block in torch.utils.checkpoint keeps each block's input (the
previous block's output) and everything outside the blocks, and recomputes
the rest of a block when its backward starts. As a remat schedule:

* keep: every activation made outside a block, and each block's output
  (the tensor that ops outside the block read);
* forward: remat's store-all schedule, except that an activation made inside
  a block (and not its output) is freed right after its last forward reader;
* backward: before the first backward step of a block, RECOMPUTE, in forward
  order, the block's ops whose outputs its backward steps read (and the ops
  those need), and FREE each recomputed tensor after its last reader.

The store-all schedule comes from `remat plan GRAPH --strategy store-all`,
so its conventions (where FREE goes, the optimizer step) are remat's own.
`remat replay` judges the result like any plan.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def block_of(module, depth, prefix):
    parts = (module or "").split(".")
    if len(parts) >= depth and parts[0].startswith(prefix):
        return ".".join(parts[:depth])
    return None


def build(graph, store_all, depth, prefix):
    ops = graph["ops"]
    outs, producer, inputs, saves, block = {}, {}, {}, {}, {}
    alias = {}
    for op in ops:
        oid = op["id"]
        if "outputs" in op:
            outs[oid] = [o["id"] for o in op["outputs"]]
            for o in op["outputs"]:
                if "alias_of" in o:
                    alias[o["id"]] = o["alias_of"]
        else:
            outs[oid] = [oid]
            if "alias_of" in op:
                alias[oid] = op["alias_of"]
        for t in outs[oid]:
            producer[t] = oid
        inputs[oid] = op["inputs"]
        saves[oid] = op.get("saves", op["inputs"])
        block[oid] = block_of((op.get("attrs") or {}).get("module"), depth, prefix)

    # Block outputs: what ops outside the block (or the graph's outputs) read.
    read_outside = set(graph["outputs"])
    for op in ops:
        for t in op["inputs"]:
            p = producer.get(t)
            if p is not None and block[p] is not None and block[p] != block[op["id"]]:
                read_outside.add(t)
    recompute = {t for op in ops if block[op["id"]] for t in outs[op["id"]] if t not in read_outside}
    for t in recompute:
        if t in alias:
            raise SystemExit("checkpoint_blocks_plan: view %s inside a block is not handled" % t)
    keep = [t for op in ops for t in outs[op["id"]] if t not in recompute and t not in alias]

    sched = store_all["schedule"]
    first_bwd = next(i for i, s in enumerate(sched) if s.startswith("BWD "))
    has_bwd = {s[4:] for s in sched if s.startswith("BWD ")}

    # Forward: drop every FREE of a recomputed tensor, then free it right
    # after its last forward reader (or its producer when nothing reads it).
    last_fwd = {}
    for op in ops:
        for t in outs[op["id"]]:
            if t in recompute:
                last_fwd.setdefault(t, op["id"])
        for t in op["inputs"]:
            if t in recompute:
                last_fwd[t] = op["id"]
    free_after = {}
    for t, o in last_fwd.items():
        free_after.setdefault(o, []).append(t)
    new = []
    for s in sched[:first_bwd]:
        if s.startswith("FREE ") and s[5:] in recompute:
            continue
        new.append(s)
        if s.startswith("FWD "):
            new.extend("FREE " + t for t in sorted(free_after.get(s[4:], [])))

    # Backward: recompute a block's needed ops before its first BWD.
    order = {op["id"]: k for k, op in enumerate(ops)}
    done = set()
    for s in sched[first_bwd:]:
        if s.startswith("FREE ") and s[5:] in recompute:
            continue
        if s.startswith("BWD "):
            b = block[s[4:]]
            if b is not None and b not in done:
                done.add(b)
                need = {t for o in ops if block[o["id"]] == b and o["id"] in has_bwd for t in saves[o["id"]]
                        if t in recompute}
                stack = list(need)
                while stack:
                    t = stack.pop()
                    for u in inputs[producer[t]]:
                        if u in recompute and u not in need:
                            need.add(u)
                            stack.append(u)
                rec_ops = sorted({producer[t] for t in need}, key=order.get)
                new.extend("RECOMPUTE " + o for o in rec_ops)
        new.append(s)

    # FREE each recomputed tensor after its last reader following its RECOMPUTE.
    born = {}
    for i, s in enumerate(new):
        if s.startswith("RECOMPUTE "):
            for t in outs[s[10:]]:
                born[t] = i
    last = dict(born)
    for i, s in enumerate(new):
        if s.startswith("RECOMPUTE "):
            reads = inputs[s[10:]]
        elif s.startswith("BWD "):
            reads = saves[s[4:]]
        else:
            continue
        for t in reads:
            if t in born and i > born[t]:
                last[t] = max(last[t], i)
    inserts = {}
    for t, i in last.items():
        inserts.setdefault(i, []).append(t)
    final = []
    for i, s in enumerate(new):
        final.append(s)
        final.extend("FREE " + t for t in sorted(inserts.get(i, [])))
    return keep, final, sorted(done)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("remat")
    ap.add_argument("graph")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--block-depth", type=int, default=2)
    ap.add_argument("--block-prefix", default="layer")
    a = ap.parse_args(argv)
    with open(a.graph) as f:
        graph = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        sa_path = os.path.join(tmp, "store-all.json")
        subprocess.run([a.remat, "plan", a.graph, "--strategy", "store-all", "-o", sa_path], check=True,
                       stdout=subprocess.DEVNULL)
        with open(sa_path) as f:
            store_all = json.load(f)
    keep, schedule, blocks = build(graph, store_all, a.block_depth, a.block_prefix)
    plan = {"format": "remat-plan", "version": 1, "graph": store_all["graph"], "strategy": "checkpoint-blocks",
            "params": {"blocks": len(blocks), "block_depth": a.block_depth, "block_prefix": a.block_prefix},
            "budget": None, "keep": keep, "schedule": schedule}
    with open(a.output, "w") as f:
        json.dump(plan, f, indent=1)
        f.write("\n")
    print("checkpoint_blocks_plan: %d blocks (%s ... %s), %d kept activations, %d instructions" %
          (len(blocks), blocks[0] if blocks else "-", blocks[-1] if blocks else "-", len(keep), len(schedule)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
