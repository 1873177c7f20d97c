"""torch_setup.py - the model, example input, target and loss of one exported training step.

scripts/export_torch.py records a step built here, and the PyTorch checks
(tests/torch/*.py) rebuild the very same step from a graph's "meta" with
rebuild(), without the exporter's dispatch mode: one definition of the
model spec, the input, the target and the loss, so a check measures what
the exporter recorded and nothing else.

MODEL specs: `torchvision:NAME` (classification models from
torchvision.models, segmentation models from torchvision.models.segmentation;
built with weights=None and, where the factory takes one,
weights_backbone=None: nothing is downloaded), `package.module:factory` or
`path/file.py:factory`.

Outputs: a tuple or list gives its first element, a dict (segmentation
models return {"out": ..., "aux": ...}) its "out" entry (else its first
value), a HuggingFace-style object its .logits. Cross-entropy over an
output of rank > 2 whose dim 1 is the class dim (N, C, H, W: segmentation)
uses per-pixel targets of shape (N, H, W); over a rank-2 or a (batch, seq,
vocab) output it flattens to (rows, classes).

Precision: `dtype` casts the model's floating parameters and buffers (and a
float input) before the step: bf16 or f16 training graphs. The input's
dtype alone (--input-dtype bfloat16) casts the model too, since a float32
model cannot take a bf16 input.
"""
import importlib
import importlib.util
import inspect
import os
import sys

import torch
import torch.nn.functional as F

FLOAT_DTYPES = {"float32": torch.float32, "f32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
                "float16": torch.float16, "f16": torch.float16, "half": torch.float16, "float64": torch.float64,
                "f64": torch.float64}
CANON = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float64: "float64"}


def torchvision_factory(name):
    """The torchvision factory called NAME: classification first, then segmentation."""
    import torchvision
    for mod in (torchvision.models, getattr(torchvision.models, "segmentation", None)):
        f = getattr(mod, name, None) if mod is not None else None
        if callable(f) and not inspect.isclass(f):
            return f
    return None


def load_model(spec, kwargs):
    """torchvision:NAME, package.module:factory or path/file.py:factory -> nn.Module."""
    if ":" not in spec:
        raise SystemExit("export_torch: MODEL must be torchvision:NAME, package.module:factory or file.py:factory")
    mod_name, fn = spec.rsplit(":", 1)
    if mod_name == "torchvision":
        factory = torchvision_factory(fn)
        if factory is None:
            raise SystemExit("export_torch: torchvision has no model '%s' (searched torchvision.models and "
                             "torchvision.models.segmentation)" % fn)
        kw = dict(kwargs)
        kw.setdefault("weights", None)
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            params = {}
        if "weights_backbone" in params:
            kw.setdefault("weights_backbone", None)
        return factory(**kw)
    if mod_name.endswith(".py"):
        s = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(mod_name))[0], mod_name)
        module = importlib.util.module_from_spec(s)
        sys.modules[s.name] = module
        s.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(mod_name)
    factory = getattr(module, fn, None)
    if factory is None:
        raise SystemExit("export_torch: %s has no attribute '%s'" % (mod_name, fn))
    return factory(**kwargs)


def parse_kv(items):
    """KEY=VALUE strings -> dict; values become int, float, bool or None where they read as one."""
    out = {}
    for it in items or []:
        k, _, v = it.partition("=")
        for conv in (int, float):
            try:
                v = conv(v)
                break
            except ValueError:
                pass
        else:
            v = {"true": True, "false": False, "none": None}.get(v.lower(), v)
        out[k] = v
    return out


def model_dtype(input_dtype, dtype):
    """The dtype the model is cast to (None: left as built)."""
    if dtype:
        if dtype not in FLOAT_DTYPES:
            raise SystemExit("export_torch: --dtype must be float32, bfloat16, float16 or float64, not '%s'" % dtype)
        return CANON[FLOAT_DTYPES[dtype]]
    if input_dtype in FLOAT_DTYPES and FLOAT_DTYPES[input_dtype] in (torch.bfloat16, torch.float16):
        return CANON[FLOAT_DTYPES[input_dtype]]
    return None


def cast_model(model, dtype):
    if dtype:
        model.to(FLOAT_DTYPES[dtype])
    return model


def make_inputs(model, batch, shape, dtype, high, seed):
    g = torch.Generator().manual_seed(seed + 1)
    full = (batch,) + tuple(shape)
    if dtype in ("int64", "long"):
        return torch.randint(0, high, full, generator=g)
    if dtype not in FLOAT_DTYPES:
        raise SystemExit("export_torch: --input-dtype must be float32, bfloat16, float16, float64 or int64, "
                         "not '%s'" % dtype)
    return torch.randn(full, generator=g).to(FLOAT_DTYPES[dtype])


def pick_output(out):
    """The tensor the loss is taken of (see the module docstring)."""
    if isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(out, dict):
        out = out["out"] if "out" in out else next(iter(out.values()))
    if hasattr(out, "logits"):
        out = out.logits
    return out


def per_pixel(out):
    """(N, C, H, W...) class scores: one target per pixel."""
    return out.dim() > 3


def loss_of(kind, out, target):
    if kind == "ce":
        if per_pixel(out):
            return F.cross_entropy(out, target)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    if kind == "mse":
        return F.mse_loss(out, target)
    return out.sum()


def make_target(kind, out, seed):
    g = torch.Generator().manual_seed(seed + 2)
    if kind == "ce":
        if per_pixel(out):
            return torch.randint(0, out.shape[1], (out.shape[0],) + tuple(out.shape[2:]), generator=g)
        return torch.randint(0, out.shape[-1], tuple(out.shape[:-1]), generator=g)
    if kind == "mse":
        return torch.randn(tuple(out.shape), generator=g).to(out.dtype)
    return None


LOSS_KIND = {"cross_entropy": "ce", "mse": "mse", "sum": "sum"}


def rebuild(meta):
    """(model, input, loss kind) of an exported graph's meta: the same weights and input as the export."""
    seed = meta["seed"]
    torch.manual_seed(seed)
    model = load_model(meta["model"], meta.get("factory_args") or {})
    cast_model(model, meta.get("model_dtype"))
    model.train()
    shape = tuple(meta["input_shape"][1:])
    high = meta.get("input_high") or (getattr(model, "remat_input", {}) or {}).get("high", 2)
    x = make_inputs(model, meta["batch"], shape, meta["input_dtype"], high, seed)
    return model, x, LOSS_KIND[meta["loss"]]
