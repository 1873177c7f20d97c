"""models.py - small models for scripts/export_torch.py and the PyTorch checks.

Every factory returns a torch.nn.Module whose forward is traceable by
torch.fx.symbolic_trace (no data-dependent Python control flow) and which
names its example input and loss for the exporter:

    gpt   a GPT-style decoder stack (pre-LN blocks: causal self-attention and
          a GELU MLP, dropout as in GPT-2), token input, cross-entropy loss;
    unet  a small U-Net (conv-BN-ReLU pairs, max-pool down, transposed-conv
          up, concatenated long skips), image input, MSE loss;
    chain a sequential stack of Linear+ReLU blocks (nn.Sequential), the
          model the torch.utils.checkpoint check applies remat's plans to.

    /usr/bin/python3 scripts/export_torch.py scripts/models.py:gpt --batch 4 -o gpt.json
    /usr/bin/python3 scripts/export_torch.py scripts/models.py:unet --batch 2 --arg depth=3 -o unet.json
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, block, dropout):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        self.scale = 1.0 / math.sqrt(d_model // n_head)

    def forward(self, x, masked):
        B, T, C = x.size(0), x.size(1), x.size(2)
        qkv = self.qkv(x).split(C, dim=2)
        q, k, v = qkv[0], qkv[1], qkv[2]  # indexing, not unpacking: a traced value cannot be iterated
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(masked, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, d_model, n_head, block, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, block, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, masked):
        x = x + self.attn(self.ln1(x), masked)
        return x + self.drop(self.fc2(self.act(self.fc1(self.ln2(x)))))


class GPT(nn.Module):
    """A GPT-2-style decoder: token and learned position embeddings, L pre-LN blocks, an untied LM head.
    Inputs are (batch, block) token ids."""

    def __init__(self, vocab=1024, block=128, layers=4, heads=4, d_model=128, dropout=0.1):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(block, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d_model, heads, block, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        # True above the diagonal: the positions a token must not attend to.
        self.register_buffer("masked", torch.triu(torch.ones(block, block, dtype=torch.bool), diagonal=1))
        self.remat_input = {"shape": (block,), "dtype": "int64", "high": vocab}
        self.remat_loss = "ce"

    def forward(self, idx):
        # Sequences are `block` tokens long: slicing the mask or the position
        # table by a traced length would not trace with torch.fx.
        x = self.drop(self.wte(idx) + self.wpe.weight)
        for blk in self.blocks:
            x = blk(x, self.masked)
        return self.head(self.ln_f(x))


def gpt(vocab=1024, block=128, layers=4, heads=4, d_model=128, dropout=0.1):
    return GPT(vocab, block, layers, heads, d_model, dropout)


def conv_bn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    """Ronneberger et al.'s U-Net, small: `depth` levels, `channels` doubling per level."""

    def __init__(self, depth=3, channels=16, in_channels=3, out_channels=1, size=64):
        super().__init__()
        c = [channels << i for i in range(depth + 1)]
        self.down = nn.ModuleList([conv_bn_relu(in_channels if i == 0 else c[i - 1], c[i]) for i in range(depth)])
        self.pool = nn.MaxPool2d(2)
        self.mid = conv_bn_relu(c[depth - 1], c[depth])
        self.up = nn.ModuleList([nn.ConvTranspose2d(c[i + 1], c[i], 2, stride=2) for i in reversed(range(depth))])
        self.dec = nn.ModuleList([conv_bn_relu(2 * c[i], c[i]) for i in reversed(range(depth))])
        self.head = nn.Conv2d(c[0], out_channels, 1)
        self.remat_input = {"shape": (in_channels, size, size)}
        self.remat_loss = "mse"

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
            x = self.pool(x)
        x = self.mid(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], dim=1))
        return self.head(x)


def unet(depth=3, channels=16, in_channels=3, out_channels=1, size=64):
    return UNet(depth, channels, in_channels, out_channels, size)


def chain(blocks=16, width=256):
    """nn.Sequential of `blocks` (Linear, ReLU) pairs: a pure chain, one block = one module."""
    layers = [nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(blocks)]
    m = nn.Sequential(*layers)
    m.remat_input = {"shape": (width,)}
    m.remat_loss = "sum"
    return m


class LSTMModel(nn.Module):
    """nn.LSTM over a (batch, seq, features) input, summed: its cells run as ATen ops on unsafe_split chunks,
    with in-place sigmoid_/tanh_ on those chunks."""

    def __init__(self, features=32, hidden=64, layers=2, seq=8):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True)
        self.remat_input = {"shape": (seq, features)}
        self.remat_loss = "sum"

    def forward(self, x):
        return self.lstm(x)[0]


def lstm(features=32, hidden=64, layers=2, seq=8):
    return LSTMModel(features, hidden, layers, seq)


def transformer_encoder(d_model=64, heads=4, layers=2, seq=16, ff=128, dropout=0.1):
    """nn.TransformerEncoder (post-LN layers, as PyTorch builds them) over a (batch, seq, d_model) input."""
    layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout, batch_first=True)
    m = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    m.remat_input = {"shape": (seq, d_model)}
    m.remat_loss = "sum"
    return m
