"""torch_joint.py - an AOTAutograd joint graph (torch 1.13's functorch) read as a remat graph.

joint_to_graph() is step 2 of remat_torch.py's docstring: the joint graph's
forward part becomes a remat graph (format v1) by the exporter's rules
(scripts/export_torch.py), each op's `saves` read off which forward values
the backward nodes read, with the storages (views, split outputs) and the
measured convolution and batch-norm workspaces. split_joint() names the
joint graph's forward, backward-read, primal and tangent nodes. The
planning and the running of the plan stay in remat_torch.py, which
re-exports these names.
"""
import os
import statistics
import sys
import time

import torch
import torch.fx as fx
from functorch._src.partitioners import _is_primal, _is_tangent

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_torch as ex  # noqa: E402
from torch_workspace import ConvWorkspace, NormWorkspace  # noqa: E402
import torch_schedule  # noqa: E402
import torch_rng  # noqa: E402


aten = torch.ops.aten
WS = ConvWorkspace()
NORM_WS = NormWorkspace()
VIEWS = ex.VIEW_FREE | {"detach", "alias", "expand", "view", "t", "transpose", "permute", "_reshape_alias",
                        "_unsafe_view", "squeeze", "unsqueeze", "slice", "select", "as_strided"}
SAVES_OUTPUT = {"relu", "sigmoid", "tanh", "_softmax", "_log_softmax", "exp", "threshold", "elu", "hardsigmoid"}
RANDOM = torch_rng.RANDOM


def _meta(node):
    return node.meta.get("tensor_meta")


def _bytes(tm):
    return int(ex.numel(tm.shape)) * torch.empty((), dtype=tm.dtype).element_size()


def _pkt(node):
    t = node.target
    return t.overloadpacket.__name__ if hasattr(t, "overloadpacket") else getattr(t, "__name__", str(t))


def _fake(a):
    if isinstance(a, fx.Node) and _meta(a) is not None and hasattr(_meta(a), "shape"):
        tm = _meta(a)
        return torch.empty(tuple(tm.shape), dtype=tm.dtype, device="meta")
    if isinstance(a, (list, tuple)):
        return type(a)(_fake(x) for x in a)
    return a


def split_joint(joint):
    """(forward nodes, backward-read forward nodes, primals, tangents) of a joint graph."""
    tangent_dep = set()
    fwd = []
    for n in joint.graph.nodes:
        if _is_tangent(n):
            tangent_dep.add(n)
        elif n.op == "call_function":
            if any(i in tangent_dep for i in n.all_input_nodes):
                tangent_dep.add(n)
            else:
                fwd.append(n)
    read = set()
    for n in joint.graph.nodes:
        if n in tangent_dep and n.op == "call_function":
            for i in n.all_input_nodes:
                if i not in tangent_dep:
                    read.add(i)
        if n.op == "output":
            for i in n.all_input_nodes:
                if i not in tangent_dep and i.op != "placeholder":
                    read.add(i)  # a forward output
    return fwd, read, [n for n in joint.graph.nodes if _is_primal(n)], [n for n in joint.graph.nodes if _is_tangent(n)]


def storages(joint, fwd, primals, real, timings=0):
    """Runs the forward nodes once on the real parameters and inputs (RNG state restored): each tensor
    node's (storage pointer, storage bytes). Bytes are the storage's, as the exporter counts them: a
    0-dim mse_loss result keeps the whole per-element buffer (its storage), which the shape does not show.
    timings=K: K runs more, each node's call timed (thread CPU ns: on one intra-op thread its kernel runs
    on this thread, so the machine's other load counts less than in wall time); info[("ns", n)] is the
    median over the K runs (the first, which pays fresh pages, is not one of them). The parameters,
    buffers and inputs are restored after them (batch norm's running statistics)."""
    info = {}
    if real is None:
        return info
    last = {}
    for i, n in enumerate(fwd):
        for a in n.all_input_nodes:
            last[a] = i
    state = torch.get_rng_state()
    ns = {}
    with torch.no_grad():
        saved = [t.detach().clone() for t in real] if timings else []
        for k in range(1 + timings):
            env = dict(zip(primals, real))
            if k == 0:
                for p, t in env.items():
                    info[p] = ex.storage_of(t)

            def load(a):
                if isinstance(a, fx.Node):
                    return env[a]
                if isinstance(a, (list, tuple)):
                    return type(a)(load(x) for x in a)
                return a
            for i, n in enumerate(fwd):
                pos, kw = load(n.args), {key: load(x) for key, x in n.kwargs.items()}
                c = time.thread_time_ns()
                v = n.target(*pos, **kw)
                if k:
                    ns.setdefault(n, []).append(time.thread_time_ns() - c)
                del pos, kw
                env[n] = v
                if k == 0 and isinstance(v, torch.Tensor):
                    info[n] = ex.storage_of(v)
                if k == 0 and _pkt(n) == "convolution":
                    a = load(n.args)
                    # the input's gradient is computed unless the input is a data input (a placeholder)
                    info[("ws", n)] = WS.measure(list(a), n.args[0].op != "placeholder")
                elif k == 0 and _pkt(n) == "native_batch_norm" and len(n.args) > 5 and n.args[5] is True:
                    info[("ws", n)] = NORM_WS.measure(list(load(n.args)), n.args[0].op != "placeholder")
                for a in n.all_input_nodes:
                    if last.get(a) == i and a.op != "placeholder":
                        env.pop(a, None)
            env.clear()
            torch.set_rng_state(state)
        for t, s in zip(real, saved):
            t.copy_(s)
    for n, xs in ns.items():
        info[("ns", n)] = int(statistics.median(xs))
    return info


def joint_to_graph(joint, n_params, frozen, graph_name="aot", real=None, timings=0):
    """The remat graph of a joint graph's forward part; returns (graph dict, fx node -> tensor id).
    real: the parameters, buffers and inputs in AOTAutograd's order (for storage sizes). timings=K: each
    op's attrs.duration_ns is its node's measured time on this machine (storages: median of K runs),
    what `remat plan --objective time` prices a recomputation at."""
    fwd, read, primals, _ = split_joint(joint)
    sizes = storages(joint, fwd, primals, real, timings)
    fwd_out = [a for a in joint.graph.output_node().args[0]] if hasattr(joint.graph, "output_node") else None
    if fwd_out is None:
        out_node = [n for n in joint.graph.nodes if n.op == "output"][0]
        fwd_out = list(out_node.args[0])
    num_fwd = joint._out_spec.children_specs[0].num_leaves
    fwd_outputs = [n for n in fwd_out[:num_fwd] if isinstance(n, fx.Node)]
    tid = {}        # fx node -> remat tensor id
    params, inputs = [], []
    for i, p in enumerate(primals):
        tm = _meta(p)
        e = {"id": p.name, "bytes": _bytes(tm), "dtype": ex.DTYPE_NAMES.get(tm.dtype, str(tm.dtype)),
             "shape": list(tm.shape)}
        if i < n_params:
            if frozen[i]:
                e["frozen"] = True
            params.append(e)
        else:
            inputs.append(e)
        tid[p] = p.name
    kinds = {p.name: "param" if i < n_params else "input" for i, p in enumerate(primals)}
    ops = []
    by_id = {}
    # Views that only the backward reads (a transpose of a saved q for its bmm's backward): the joint
    # graph computes them from forward values, so they look like forward ops, and as forward ops remat
    # would run them at the end of the forward, holding their base's storage until then. They are the
    # base itself, read by the backward (the backward graph makes the view where it reads it).
    fwd_set = set(fwd)
    bwd_view = set()
    for n in reversed(fwd):
        if (_pkt(n) in VIEWS and n.users and
                all(u not in fwd_set or u in bwd_view for u in n.users if u.op != "output") and
                all(u.op != "output" for u in n.users)):
            bwd_view.add(n)
    for n in fwd:
        name = _pkt(n)
        if name == "getitem":
            continue
        if n in bwd_view and n.all_input_nodes and n.all_input_nodes[0] in tid:
            tid[n] = tid[n.all_input_nodes[0]]
            continue
        ins = []
        for a in n.all_input_nodes:
            if a in tid:
                ins.append(tid[a])
        tm = _meta(n)
        multi = tm is None or not hasattr(tm, "shape")
        if name in ("detach", "alias", "lift_fresh") and ins:
            tid[n] = ins[0]  # autograd's detach of a value it saves: the value itself (as export_torch)
            continue
        if (name in VIEWS and ins and not multi and kinds.get(ins[0]) == "param" and
                ex.numel(tm.shape) == ex.numel(_meta(n.all_input_nodes[0]).shape)):
            tid[n] = ins[0]  # a weight's transpose/reshape: the weight itself (see export_torch)
            continue
        d = {"id": n.name, "op": name, "inputs": list(dict.fromkeys(ins))}
        if multi:
            outs = sorted((u for u in n.users if _pkt(u) == "getitem"), key=lambda u: u.args[1])
            src = [a for a in n.all_input_nodes if a in sizes and a in tid]
            base = [next((a for a in src if u in sizes and sizes[a][0] == sizes[u][0]), None) for u in outs]
            if outs and all(b is not None for b in base):
                # split/unbind/chunk: every output is a view of the input's storage, one view op each
                # (as one op with outputs they would each count the whole storage as new bytes)
                for u, b in zip(outs, base):
                    utm = _meta(u)
                    v = {"id": u.name, "op": name, "inputs": [tid[b]], "alias_of": tid[b], "bytes": _bytes(utm),
                         "dtype": ex.DTYPE_NAMES.get(utm.dtype, "f32"), "shape": list(utm.shape), "_node": n}
                    if ("ns", n) in sizes:
                        v["attrs"] = {"duration_ns": sizes[("ns", n)]}
                    tid[u] = u.name
                    ops.append(v)
                    by_id[v["id"]] = v
                continue
            lst = []
            for u in outs:
                utm = _meta(u)
                lst.append({"id": u.name, "bytes": sizes[u][1] if u in sizes else _bytes(utm), "dtype": ex.DTYPE_NAMES.get(utm.dtype, "f32"),
                            "shape": list(utm.shape)})
                tid[u] = u.name
            if not lst:
                continue
            d["outputs"] = lst
            fake_outs = [_fake(u) for u in outs]
        else:
            tid[n] = n.name
            src = [a for a in n.all_input_nodes if a in sizes and a in tid]
            aliased = None
            if n in sizes:
                aliased = next((a for a in src if sizes[a][0] == sizes[n][0] and sizes[n][1]), None)
            if aliased is not None and tid[aliased] != ins[0]:
                ins.insert(0, tid[aliased])
            if (aliased is not None or (n not in sizes and name in VIEWS)) and ins:
                d["alias_of"] = ins[0]
                d["inputs"] = [ins[0]]
                base = n.all_input_nodes[0]
                if _bytes(tm) != _bytes(_meta(base)):
                    d["bytes"] = _bytes(tm)
            else:
                d["bytes"] = sizes[n][1] if n in sizes else _bytes(tm)
            d["dtype"] = ex.DTYPE_NAMES.get(tm.dtype, str(tm.dtype))
            d["shape"] = list(tm.shape)
            fake_outs = [_fake(n)]
        try:
            d["flops"] = int(ex.flops_of(name, list(_fake(list(n.args))), fake_outs))
        except Exception:
            d["flops"] = int(sum(o.numel() for o in fake_outs))
        if "alias_of" in d and d["flops"] == 0:
            del d["flops"]
        if ("ws", n) in sizes:
            fws, bws = sizes[("ws", n)]
            if fws:
                d["workspace"] = fws
            if bws:
                d["bwd_workspace"] = bws
        if ("ns", n) in sizes:
            d["attrs"] = {"duration_ns": sizes[("ns", n)]}
        if name.rstrip("_") in RANDOM or name in RANDOM:
            d["recomputable"] = False
        d["_node"] = n
        ops.append(d)
        by_id[d["id"]] = d
    # saves: each forward value the backward reads, given to the op whose formula reads it.
    producer = {}
    for d in ops:
        for o in d.get("outputs", [d]):
            producer[o["id"]] = d
    readers = {}
    for d in ops:
        for i in d["inputs"]:
            readers.setdefault(i, []).append(d)
    read_ids = {tid[v] for v in read if v in tid}
    for d in ops:
        d["saves"] = []
    alias = {d["id"]: d["alias_of"] for d in ops if "alias_of" in d}

    def root_of(t):
        while t in alias:
            t = alias[t]
        return t
    index = {d["id"]: i for i, d in enumerate(ops)}
    family = {}    # storage root -> the non-view ops reading it or any view of it
    for d in ops:
        if "alias_of" in d:
            continue
        for i in dict.fromkeys(d["inputs"]):
            family.setdefault(root_of(i), []).append(d)
    # Which op's backward reads each value: the op each backward node of the joint graph belongs to
    # (torch_schedule.Owners: its derivative formula, else the op holding most of what it reads).
    owner = torch_schedule.Owners(ops, tid)
    fwd_set = set(fwd)
    read_by = {}
    for n in joint.graph.nodes:
        if n.op != "call_function" or n in fwd_set:
            continue
        fargs = [a for a in n.all_input_nodes if a in fwd_set or _is_primal(a)]
        xs = owner(n, fargs) if fargs else []
        for a in fargs:
            for x in xs:
                read_by.setdefault(tid.get(a), set()).add(x)
    for v in sorted(read_ids):
        if kinds.get(v) is not None or v not in producer:
            continue  # params and inputs are resident anyway
        p = producer[v]
        outs = [o["id"] for o in p.get("outputs", [])]
        owners = []
        if "alias_of" in p:
            # A view the backward reads (a transpose of a saved q, made after the forward): it lives until
            # the latest backward step of an op that reads its storage (the earliest such op in forward
            # order), not just until its own view op's (early) backward step.
            fam = family.get(root_of(v), [])
            owners = [min(fam, key=lambda d: index[d["id"]])] if fam else [p]
        elif read_by.get(v):
            owners = [by_id[x] for x in sorted(read_by[v], key=lambda x: index[x])]
        elif p["op"] in SAVES_OUTPUT or (outs and outs.index(v) > 0 if v in outs else False):
            owners = [p]
        else:
            owners = [r for r in readers.get(v, []) if "alias_of" not in r and r["op"] not in SAVES_OUTPUT]
            if not owners:
                owners = [p]
        for o in owners:
            o["saves"].append(v)
    for d in ops:
        del d["_node"]
    # The caller holds the outputs (the loss) while backward runs (loss.backward()): saved by the op whose
    # backward step comes last, they stay resident to the end, as in PyTorch.
    first = next((d for d in ops if any(kinds.get(i) == "param" for i in d["inputs"])), None)
    outputs = [tid[n] for n in fwd_outputs if n in tid]
    if first is not None:
        for o in outputs:
            if o not in first["saves"] and kinds.get(o) is None:
                first["saves"].append(o)
    # Nor may a plan free the loss and rebuild it for that last step: the caller's reference keeps its
    # storage (a 0-dim mse_loss result holds the whole per-element buffer) from the forward to the end.
    for o in outputs:
        if o in producer and kinds.get(o) is None:
            producer[o]["recomputable"] = False
    graph = {"format": "remat-graph", "version": 1, "name": graph_name,
             "meta": {"exporter": "scripts/remat_torch.py", "source": "AOTAutograd joint graph (torch %s)" %
                      torch.__version__},
             "inputs": inputs, "params": params, "ops": ops, "outputs": outputs}
    if timings:
        graph["meta"]["durations"] = ("attrs.duration_ns: each forward node's thread CPU time on this machine "
                                      "(torch %s, %d thread(s)), median of %d runs" %
                                      (torch.__version__, torch.get_num_threads(), timings))
    return graph, tid
