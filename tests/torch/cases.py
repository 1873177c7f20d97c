"""cases.py - small models, each built around one thing the exporter must record right.

Factories for scripts/export_torch.py (`tests/torch/cases.py:NAME`); the
checks in tests/cli/torch.sh export each one and compare its saved bytes
with autograd's saved-tensor hooks (saved_bytes.py) and its store-all peak
with the profiler (step_peak.py):

    function     a Python autograd.Function whose ctx.save_for_backward holds
                 its input and an intermediate (autograd's hooks see them as
                 saved_tensors, not as _saved_* attributes);
    checkpoint   blocks under torch.utils.checkpoint (use_reentrant=True: an
                 autograd.Function that saves the block's input);
    slice_write  `h[:, :16] = torch.sigmoid(h[:, :16])`: an in-place copy_
                 into a slice of a tensor read afterwards as a whole;
    dropout_view Dropout(inplace=True) on a flattened view (efficientnet's
                 classifier): its mask is saved by an in-place mul_ on a view;
    checkpoint_nonreentrant  the same with use_reentrant=False: the exporter
                 cannot see its saves and says so;
    linear       nn.Linear layers: the transposed weight's gradient is the
                 weight's own buffer.
"""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint as _checkpoint


class ExpTwice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        b = a.exp()
        ctx.save_for_backward(a, b)
        return b * 2

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b * 2 + 0 * a


class FunctionModel(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)
        self.remat_input = {"shape": (width,)}
        self.remat_loss = "sum"

    def forward(self, x):
        return self.fc2(ExpTwice.apply(self.fc1(x)))


def function(width=64):
    return FunctionModel(width)


class CheckpointModel(nn.Module):
    def __init__(self, width=64, blocks=3):
        super().__init__()
        self.inp = nn.Linear(width, width)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))
                                     for _ in range(blocks)])
        self.remat_input = {"shape": (width,)}
        self.remat_loss = "sum"

    def forward(self, x):
        x = self.inp(x)  # reentrant checkpoint needs an input that requires grad
        for b in self.blocks:
            x = _checkpoint(b, x, use_reentrant=True)
        return x


def checkpoint(width=64, blocks=3):
    return CheckpointModel(width, blocks)


class SliceWrite(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)
        self.remat_input = {"shape": (width,)}
        self.remat_loss = "sum"

    def forward(self, x):
        h = self.fc1(x)
        h[:, :16] = torch.sigmoid(h[:, :16])
        return self.fc2(h)


def slice_write(width=64):
    return SliceWrite(width)


class DropoutView(nn.Module):
    def __init__(self, channels=16, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.2, inplace=True)
        self.fc = nn.Linear(channels, classes)
        self.remat_input = {"shape": (3, 16, 16)}
        self.remat_loss = "sum"

    def forward(self, x):
        h = torch.flatten(self.pool(torch.relu(self.conv(x))), 1)
        return self.fc(self.drop(h))


def dropout_view(channels=16, classes=10):
    return DropoutView(channels, classes)


def linear(width=64, depth=3):
    m = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth)])
    m.remat_input = {"shape": (width,)}
    m.remat_loss = "sum"
    return m


class CheckpointNonReentrant(CheckpointModel):
    """As checkpoint, with use_reentrant=False: its saves go through checkpoint's own hooks (a warning)."""

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
        return x


def checkpoint_nonreentrant(width=64, blocks=3):
    return CheckpointNonReentrant(width, blocks)
