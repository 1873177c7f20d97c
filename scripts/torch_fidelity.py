#!/usr/bin/python3
"""torch_fidelity.py - the exporter against PyTorch's own figures, model by model.

    /usr/bin/python3 scripts/torch_fidelity.py build/remat [--batch 2 --size 64] [--set issue|check|all] [MODEL...]

For each model (torchvision names, or any MODEL spec export_torch.py takes)
this exports the training step (scripts/export_torch.py), then compares:

* saved bytes: remat's store-all saved activations (`remat lifetimes`)
  against the distinct storages autograd's saved-tensor hooks record
  (tests/torch/saved_bytes.py): must be equal;
* store-all peak: `remat replay`'s peak less params and inputs against the
  peak of torch.profiler's allocator events over one step
  (tests/torch/step_peak.py): the ratio remat / torch.

Prints one table row per model (figures, and "ok" where the saved bytes are
equal and the peak ratio is within 1%). Exits 1 if any export or check
fails or a row is not ok. `make bench BENCH=resnet50` (the PyTorch section) runs the `issue` set (the
eight torchvision models the exporter was first tried on, three segmentation
models, nn.LSTM, nn.TransformerEncoder and the bundled GPT and U-Net);
`--set all` (`make bench BENCH=fidelity`) adds every other torchvision
classification and segmentation model. googlenet and inception_v3 are built
with aux_logits=False (the loss reads only the main output, and autograd's
hooks would count what the unread auxiliary heads save), inception_v3 at
96x96 and maxvit_t at 224x224 (the smallest sizes they accept).
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
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "torch"))

ISSUE = ["squeezenet1_0", "densenet121", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x1_0",
         "regnet_y_400mf", "convnext_tiny", "vit_b_16", "resnet18", "mobilenet_v2",
         "fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large",
         "scripts/models.py:lstm", "scripts/models.py:transformer_encoder", "scripts/models.py:gpt",
         "scripts/models.py:unet"]
SEGMENTATION = ["fcn_resnet50", "fcn_resnet101", "deeplabv3_resnet50", "deeplabv3_resnet101",
                "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
CHECK = ["mobilenet_v3_small", "lraspp_mobilenet_v3_large", "scripts/models.py:lstm",
         "scripts/models.py:transformer_encoder"]


def all_classification():
    """Every model factory in torchvision.models (those taking weights=)."""
    import inspect
    import torchvision
    out = []
    for n in sorted(dir(torchvision.models)):
        f = getattr(torchvision.models, n, None)
        if n.startswith("_") or not callable(f) or isinstance(f, type):
            continue
        try:
            params = inspect.signature(f).parameters
        except (TypeError, ValueError):
            continue
        if "weights" in params and n not in out:
            out.append(n)
    return out


# Inputs some models need beyond --size: a minimum size, or windows that
# must tile it (maxvit_t's 7x7 partitions at every stage: 224; vit_h_14's
# 14x14 patches: 70, the least multiple of 14 above 64).
MIN_SIZE = {"inception_v3": 96, "maxvit_t": 224, "vit_h_14": 70}


def export_cmd(model, batch, size):
    spec = model if ":" in model else "torchvision:" + model
    name = model.split(":")[-1]
    size = max(size, MIN_SIZE.get(name, 0))
    cmd = [sys.executable, os.path.join(HERE, "export_torch.py"), spec, "--batch", str(batch)]
    if ":" not in model:
        cmd += ["--size", str(size)]
        if name.startswith("vit_"):
            cmd += ["--arg", "image_size=%d" % size]
    if name == "densenet121":
        cmd += ["--arg", "memory_efficient=true"]  # torch.utils.checkpoint inside each dense layer
    if name in ("googlenet", "inception_v3"):
        # Their auxiliary classifiers run in training mode but no loss reads
        # them (the exporter's loss takes the main output): autograd's hooks
        # would count what those dead branches save.
        cmd += ["--arg", "aux_logits=false"]
    return cmd, name


def measure(path):
    """PyTorch's figures for one exported graph, as JSON on stdout: [saved bytes by autograd's hooks, step peak
    by the profiler]."""
    import torch
    import saved_bytes
    import step_peak
    torch.set_num_threads(1)
    with open(path) as f:
        meta = json.load(f)["meta"]
    st, _ = saved_bytes.torch_saved_bytes(meta)
    print(json.dumps([st, step_peak.torch_step_peak(meta)]))
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        return measure(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("remat")
    ap.add_argument("models", nargs="*")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--set", choices=["issue", "check", "all"], default="issue")
    ap.add_argument("--timeout", type=int, default=600)
    a = ap.parse_args()
    import saved_bytes
    import step_peak
    models = a.models or {"issue": ISSUE, "check": CHECK}.get(a.set) or ISSUE + [
        m for m in all_classification() + SEGMENTATION if m not in ISSUE]
    tmp = tempfile.mkdtemp(prefix="remat-fidelity-")
    print("%-30s %5s %12s %12s %12s %12s %8s  %s" % ("model (batch %d, %dx%d)" % (a.batch, a.size, a.size), "ops",
                                                    "saved remat", "saved torch", "peak remat", "peak torch",
                                                    "ratio", "verdict"))
    bad = 0
    for m in models:
        cmd, name = export_cmd(m, a.batch, a.size)
        path = os.path.join(tmp, name + ".json")
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd + ["-o", path], capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            print("%-30s export timed out after %d s" % (name, a.timeout))
            bad += 1
            continue
        if r.returncode != 0:
            print("%-30s export failed: %s" % (name, (r.stderr.strip().splitlines() or ["?"])[-1][:100]))
            bad += 1
            continue
        warns = [ln for ln in r.stderr.splitlines() if "export_torch: warning" in ln]
        with open(path) as f:
            graph = json.load(f)
        sr, _ = saved_bytes.remat_saved_bytes(a.remat, path)
        pr = step_peak.remat_step_peak(a.remat, path, graph)
        # PyTorch's figures in a process of their own per model: one process over the whole set keeps
        # what each model's run left in its heap (it reached 24 GB at vit_h_14, which alone needs 8 GB)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", path], capture_output=True,
                           text=True, timeout=a.timeout)
        if r.returncode != 0:
            print("%-30s PyTorch's figures failed: %s" % (name, (r.stderr.strip().splitlines() or ["?"])[-1][:100]))
            bad += 1
            continue
        st, pt = json.loads(r.stdout)
        ratio = pr / pt if pt else float("inf")
        ok = sr == st and abs(ratio - 1) <= 0.01
        bad += not ok
        print("%-30s %5d %12d %12d %12d %12d %8.4f  %s%s" % (name, len(graph["ops"]), sr, st, pr, pt, ratio,
                                                           "ok" if ok else "DIFFERS",
                                                           " (%d warnings)" % len(warns) if warns else ""))
        sys.stdout.flush()
        del graph
        os.remove(path)
        if time.perf_counter() - t0 > a.timeout:
            print("  (%.0f s)" % (time.perf_counter() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
