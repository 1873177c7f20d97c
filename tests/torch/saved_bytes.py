#!/usr/bin/python3
"""saved_bytes.py - remat's store-all saved-activation bytes against PyTorch's own.

    /usr/bin/python3 tests/torch/saved_bytes.py REMAT GRAPH [GRAPH...]

For each exported graph (its "meta" names the model, batch, input shape,
dtype, loss and seed), this rebuilds the same model and runs the same forward
and loss under torch.autograd.graph.saved_tensors_hooks, with no dispatch
mode and nothing of the exporter: the pack hook records the storage (data
pointer and byte size) of every tensor autograd saves. The PyTorch figure is
the bytes of the distinct storages saved, less those of parameters, buffers
and the inputs (which remat counts as params and inputs, not activations),
plus the CPU RNG states that reentrant torch.utils.checkpoint nodes hold for
their rerun (ctx.fwd_cpu_state, found by walking the graph from the loss).

The remat figure comes from `remat lifetimes --json`: the bytes of the
distinct storages (a view counts through its root) of the activations that
some backward step reads (last_bwd_use is not null).

Prints one line per graph and exits 1 if any differs at all (the figures
are exact byte counts, and so must the exporter's be).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

import torch  # noqa: E402
import export_torch as ex  # noqa: E402


def remat_saved_bytes(remat, graph_path):
    out = subprocess.run([remat, "lifetimes", "--json", graph_path], check=True, capture_output=True, text=True)
    life = json.loads(out.stdout)
    by_id = {t["id"]: t for t in life["tensors"]}
    roots = set()
    for t in life["tensors"]:
        if t["kind"] != "activation" or t["last_bwd_use"] is None:
            continue
        root = t.get("view_of") or t["id"]
        if by_id[root]["kind"] == "activation":
            roots.add(root)
    return sum(by_id[r]["bytes"] for r in roots), len(roots)


def torch_saved_bytes(meta):
    """Rebuilds meta's model and input; returns the saved activation bytes autograd holds."""
    model, x, loss_kind = ex.rebuild(meta)
    persistent = set()
    for t in list(model.parameters()) + list(model.buffers()) + [x]:
        persistent.add(ex.storage_of(t)[0])
    saved = {}

    def pack(t):
        ptr, nb = ex.storage_of(t)
        saved[ptr] = nb
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = ex.pick_output(model(x))
        target = ex.make_target(loss_kind, out.detach(), meta["seed"])
        if target is not None:
            persistent.add(ex.storage_of(target)[0])
        loss = ex.loss_of(loss_kind, out, target)
        del out
    # Reentrant torch.utils.checkpoint keeps the CPU RNG state for its rerun
    # on its node (ctx.fwd_cpu_state): not a saved tensor, but held for the
    # backward all the same (the exporter makes it a saved output).
    seen, held, todo = set(), [], [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        held.append(node)  # node wrappers are made on access: an id is unique only while it lives
        state = getattr(node, "fwd_cpu_state", None)
        if isinstance(state, torch.Tensor):
            ptr, nb = ex.storage_of(state)
            saved[ptr] = nb
        todo.extend(f for f, _ in node.next_functions)
    del loss
    acts = {p: nb for p, nb in saved.items() if p not in persistent and nb}
    return sum(acts.values()), len(acts)


def main():
    remat, graphs = sys.argv[1], sys.argv[2:]
    torch.set_num_threads(1)
    bad = 0
    for g in graphs:
        with open(g) as f:
            meta = json.load(f)["meta"]
        r, rn = remat_saved_bytes(remat, g)
        t, tn = torch_saved_bytes(meta)
        rel = abs(r - t) / t if t else float(r != 0)
        ok = r == t
        bad += not ok
        print("%s %s: remat %d B in %d storages, torch hooks %d B in %d storages, diff %.4f%%" %
              ("ok" if ok else "MISMATCH", os.path.basename(g), r, rn, t, tn, 100 * rel))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
