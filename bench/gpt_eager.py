#!/usr/bin/env python3
"""The GPU check's GPT baseline (bench/gpu_bench.sh gpt; docs/gpu.md): the zoo's
GPT (src/model/zoo.cc buildGpt, src/model/layers.cc) written as plain PyTorch
eager code, trained on random tokens the way one hydrozoa worker trains it:
the same layers, initialisation scale, optimizer (SGD with momentum), bf16
autocast with fp32 weights, one step per batch.

  --attention explicit   the zoo's attention, op for op: matmul, causal mask,
                         softmax, matmul
  --attention sdpa       torch's scaled_dot_product_attention (flash or
                         memory-efficient kernels where the GPU has them): the
                         stronger baseline, what a PyTorch user writes today

Prints one JSON line: tokens/s over the timed steps, and MFU from the thesis's
FLOP count (Megatron-LM's: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) per step,
forward and backward, no recomputation) against the card's dense bf16 peak.
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

# Dense bf16 peak FLOP/s (the vendors' data sheets, without sparsity).
PEAK_BF16 = {"h100": 989e12, "h200": 989e12, "a100": 312e12}


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, attention):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.norm1 = nn.LayerNorm(hidden, eps=1e-5)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-5)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def attend(self, x):
        n, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(x).view(n, s, 3, self.heads, d).permute(2, 0, 3, 1, 4).unbind(0)
        if self.attention == "sdpa":
            context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            context = torch.matmul(torch.softmax(scores.masked_fill(mask, float("-inf")), -1), v)
        return self.proj(context.transpose(1, 2).reshape(n, s, h))

    def forward(self, x):
        x = x + self.attend(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Gpt(nn.Module):
    def __init__(self, layers, hidden, heads, vocab, seq, attention):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq, hidden)
        nn.init.normal_(self.tokens.weight, 0, 0.02)
        nn.init.normal_(self.positions.weight, 0, 0.02)
        self.blocks = nn.ModuleList(Block(hidden, heads, 4 * hidden, attention) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        self.out = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions.weight[: ids.size(1)].unsqueeze(0)
        for b in self.blocks:
            x = b(x)
        return self.out(self.norm(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--attention", choices=["explicit", "sdpa"], default="sdpa")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="CPU compute threads, as one worker uses")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    device = torch.device(a.device)
    model = Gpt(a.layers, a.hidden, a.heads, a.vocab, a.seq, a.attention).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=device)
    inputs, labels = ids[:, :-1], ids[:, 1:]

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, a.vocab).float(), labels.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    seconds = (time.perf_counter() - t0) / a.steps
    B, s, l, h, V = a.batch, a.seq, a.layers, a.hidden, a.vocab
    flops = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    card = torch.cuda.get_device_name(device).lower() if device.type == "cuda" else "cpu"
    peak = next((v for k, v in PEAK_BF16.items() if k in card), None)
    print(json.dumps({"baseline": f"pytorch eager ({a.attention} attention)", "device": card,
                      "tokens_per_s": round(B * s / seconds, 1), "step_seconds": round(seconds, 5),
                      "flops_per_step": flops, "mfu": round(flops / seconds / peak, 4) if peak else None,
                      "final_loss": round(loss.item(), 4)}))


if __name__ == "__main__":
    main()
