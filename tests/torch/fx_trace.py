#!/usr/bin/python3
"""fx_trace.py - the models of scripts/models.py trace with torch.fx and compute the same outputs.

    /usr/bin/python3 tests/torch/fx_trace.py

The GPT stack and the U-Net are meant to be traceable (no data-dependent
Python control flow), so tools built on torch.fx (and this exporter's
successors) can take them. Prints "traced NAME" per model; exits 1 on a
difference.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))

import torch  # noqa: E402
import torch.fx  # noqa: E402

import models  # noqa: E402

torch.manual_seed(0)
cases = [
    ("gpt", models.gpt(vocab=64, block=16, layers=2, heads=2, d_model=32, dropout=0.0), torch.randint(0, 64, (2, 16))),
    ("unet", models.unet(depth=2, channels=4, size=16), torch.randn(2, 3, 16, 16)),
    ("chain", models.chain(blocks=3, width=8), torch.randn(4, 8)),
]
bad = 0
for name, m, x in cases:
    m.eval()
    gm = torch.fx.symbolic_trace(m)
    same = torch.allclose(gm(x), m(x), atol=1e-6)
    bad += not same
    print("%s %s: %d graph nodes" % ("traced" if same else "DIFFERENT", name, len(gm.graph.nodes)))
sys.exit(1 if bad else 0)
