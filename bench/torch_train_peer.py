#!/usr/bin/python3
"""torch_train_peer.py — the PyTorch CPU peer of bench_train (issue: training
must beat a comparable PyTorch CPU run by ≥ 2×).

A GPT-NeoX of the same shape (parallel residual, partial NeoX rotary, erf
GELU, untied output), trained with the same work per step as
hm's engine: next-token cross-entropy, AdamW (0.9, 0.95), global-norm clip
1.0, fp32, B sequences of T tokens. Prints tokens/s as a median of steps
after one warm-up, and the FLOP rate counted as bench_train counts it.

Run with Debian's torch (apt-get install python3-torch), not in CI:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/torch_train_peer.py --shape 70m
Alternate it with build/bench/bench_train (bench/README.md).
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {  # vocab, d, layers, heads, mlp
    "tiny": (257, 128, 4, 4, 512),
    "70m": (50304, 512, 6, 8, 2048),
    "160m": (50304, 768, 12, 12, 3072),
}


class Layer(nn.Module):
    def __init__(self, d, nh, inter, rot):
        super().__init__()
        self.nh, self.p, self.rot = nh, d // nh, rot
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.dense = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, inter), nn.Linear(inter, d)

    def rotary(self, x, cos, sin):
        r = self.rot
        xr, xp = x[..., :r], x[..., r:]
        x1, x2 = xr[..., : r // 2], xr[..., r // 2:]
        rotated = torch.cat((-x2, x1), dim=-1)
        return torch.cat((xr * cos + rotated * sin, xp), dim=-1)

    def forward(self, h, cos, sin):
        B, T, d = h.shape
        qkv = self.qkv(self.ln1(h)).view(B, T, self.nh, 3 * self.p).transpose(1, 2)
        q, k, v = qkv.split(self.p, dim=-1)
        q, k = self.rotary(q, cos, sin), self.rotary(k, cos, sin)
        # torch 1.13 (Debian) has no scaled_dot_product_attention
        s = (q @ k.transpose(-2, -1)) / math.sqrt(self.p)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
        o = self.dense(att.transpose(1, 2).reshape(B, T, d))
        m = self.fc2(F.gelu(self.fc1(self.ln2(h))))
        return h + o + m


class NeoX(nn.Module):
    def __init__(self, V, d, L, nh, inter):
        super().__init__()
        p = d // nh
        self.rot = int(p * 0.25)
        self.emb = nn.Embedding(V, d)
        self.layers = nn.ModuleList(Layer(d, nh, inter, self.rot) for _ in range(L))
        self.lnf = nn.LayerNorm(d)
        self.out = nn.Linear(d, V, bias=False)

    def forward(self, x):
        T = x.shape[1]
        inv = 1.0 / (10000 ** (torch.arange(0, self.rot, 2, dtype=torch.float32) / self.rot))
        ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        ang = torch.cat((ang, ang), dim=-1)
        cos, sin = ang.cos()[None, None], ang.sin()[None, None]
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.out(self.lnf(h))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="70m", choices=SHAPES)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    V, d, L, nh, inter = SHAPES[a.shape]
    model = NeoX(V, d, L, nh, inter)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    x = torch.randint(0, V, (a.batch, a.seq + 1))
    times = []
    for step in range(a.steps + 1):
        t0 = time.perf_counter()
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step > 0:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    tps = a.batch * a.seq / med
    # bench_train's count: 6N per weight-matrix entry (embed_out included,
    # embed_in 0) + 3 * 4*T*d per layer for attention
    mats = L * (3 * d * d + d * d + 2 * d * inter) + V * d
    fpt = 6.0 * mats + 3.0 * 4.0 * a.seq * d * L
    print(f"torch_train_peer: torch {torch.__version__}, shape {a.shape}, batch {a.batch} x "
          f"seq {a.seq}, {a.threads} threads")
    print(f"  training step: median {med:.3f} s (min {min(times):.3f}, max {max(times):.3f})")
    print(f"  tokens/s: {tps:.0f}; FLOP rate {fpt * tps / 1e9:.1f} GFLOP/s (same count as "
          f"bench_train)")


if __name__ == "__main__":
    main()
