#!/usr/bin/env python3
"""Measures what one NVIDIA GPU achieves on the kernels of a Llama-style
training step, for the cost model's achieved-rate fractions
(docs/llm.md, "What a GPU achieves"), and times one real training step of
a Llama 3 8B-shaped decoder to check the simulator against.

Run on a machine with PyTorch and one CUDA GPU (a lent machine):

    python3 scripts/gpu_rates.py --out rates.json

Everything is bf16 on tensor cores as torch.autocast trains (fp32 master
weights in the step). Times are CUDA-event medians of --repeats runs after
3 warm-ups. FLOPs are counted as placer counts them: 2*M*N*K per product;
attention 4*T*T*d per head forward (no causal halving), and the backward
2.5x the forward (FlashAttention's 5 products to 2).
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F


def timed(fn, repeats):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def gemms(tokens, hidden, ffn, kv, vocab, tp, repeats):
    """The decoder's products at tensor-parallel degree tp: forward Y=XW,
    backward dX=dY W^T and dW=X^T dY."""
    shapes = {
        "qkv": (hidden, (hidden + 2 * kv) // tp),
        "o_proj": (hidden // tp, hidden),
        "gate_or_up": (hidden, ffn // tp),
        "down": (ffn // tp, hidden),
        "lm_head": (hidden, vocab // tp),
    }
    rows = []
    for name, (k, n) in shapes.items():
        x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        dy = torch.randn(tokens, n, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * tokens * n * k
        for part, fn in (("forward", lambda: x @ w),
                         ("grad_input", lambda: dy @ w.t()),
                         ("grad_weight", lambda: x.t() @ dy)):
            seconds = timed(fn, repeats)
            rows.append({"product": name, "part": part, "tp": tp, "m": tokens,
                         "k": k, "n": n, "seconds": seconds,
                         "tflops": flops / seconds / 1e12})
        del x, w, dy
    return rows


def fp8_gemms(tokens, hidden, ffn, kv, vocab, tp, repeats):
    """The same products in FP8 as Transformer Engine runs a Linear: e4m3
    activations and weights forward, e5m2 output gradients backward,
    per-tensor scales, bf16 out (torch._scaled_mm)."""
    shapes = {
        "qkv": (hidden, (hidden + 2 * kv) // tp),
        "o_proj": (hidden // tp, hidden),
        "gate_or_up": (hidden, ffn // tp),
        "down": (ffn // tp, hidden),
    }
    one = torch.ones((), device="cuda")
    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
    rows = []
    for name, (k, n) in shapes.items():
        x = torch.randn(tokens, k, device="cuda").to(e4m3)
        w = torch.randn(n, k, device="cuda").to(e4m3)  # [out, in], as nn.Linear
        dy = torch.randn(tokens, n, device="cuda").to(e5m2)
        w_cm = torch.randn(k, n, device="cuda").to(e4m3).t()  # [n, k], column-major
        x_t = torch.randn(k, tokens, device="cuda").to(e4m3)
        dy_cm = torch.randn(n, tokens, device="cuda").to(e5m2)
        flops = 2.0 * tokens * n * k

        def mm(a, b):
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)

        for part, fn in (("forward", lambda: mm(x, w.t())),
                         ("grad_input", lambda: mm(dy, w_cm)),
                         ("grad_weight", lambda: mm(x_t, dy_cm.t()))):
            seconds = timed(fn, repeats)
            rows.append({"product": name, "part": part, "tp": tp, "m": tokens,
                         "k": k, "n": n, "seconds": seconds,
                         "tflops": flops / seconds / 1e12})
        del x, w, dy, w_cm, x_t, dy_cm
    return rows


def attention(seq, heads, kv_heads, head_dim, causal, repeats):
    q = torch.randn(1, heads, seq, head_dim, device="cuda",
                    dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, kv_heads, seq, head_dim, device="cuda",
                    dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, kv_heads, seq, head_dim, device="cuda",
                    dtype=torch.bfloat16, requires_grad=True)
    gqa = heads != kv_heads

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                              enable_gqa=gqa)

    out = forward()
    grad = torch.randn_like(out)

    def forward_backward():
        o = forward()
        torch.autograd.backward(o, grad)

    forward_seconds = timed(forward, repeats)
    both_seconds = timed(forward_backward, repeats)
    placer_forward_flops = 4.0 * seq * seq * head_dim * heads
    return {"seq": seq, "heads": heads, "kv_heads": kv_heads,
            "head_dim": head_dim, "causal": causal,
            "forward_seconds": forward_seconds,
            "backward_seconds": both_seconds - forward_seconds,
            "forward_tflops_as_placer_counts":
                placer_forward_flops / forward_seconds / 1e12,
            "backward_tflops_as_placer_counts":
                2.5 * placer_forward_flops /
                (both_seconds - forward_seconds) / 1e12}


def bandwidth(tokens, hidden, vocab, repeats):
    """Memory-bound kernels: bytes read and written per second."""
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(hidden, device="cuda", dtype=torch.float32)
    logits = torch.randn(tokens, vocab // 8, device="cuda",
                         dtype=torch.float32)
    target = torch.randint(0, vocab // 8, (tokens,), device="cuda")
    elem = tokens * hidden
    kernels = {
        "add_bf16": (lambda: x + y, 3 * 2 * elem),
        "mul_bf16": (lambda: x * y, 3 * 2 * elem),
        "silu_bf16": (lambda: F.silu(x), 2 * 2 * elem),
        "rms_norm_fp32": (lambda: F.rms_norm(x.float(), (hidden,), w),
                          (2 + 4) * elem),
        "softmax_fp32": (lambda: torch.softmax(logits, -1),
                         2 * 4 * logits.numel()),
        "cross_entropy_fp32": (lambda: F.cross_entropy(logits, target),
                               4 * logits.numel()),
    }
    rows = []
    for name, (fn, moved) in kernels.items():
        seconds = timed(fn, repeats)
        rows.append({"kernel": name, "bytes": moved, "seconds": seconds,
                     "bytes_per_second": moved / seconds})
    return rows


class Block(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.head_dim = hidden // heads
        self.norm1 = torch.nn.RMSNorm(hidden)
        self.norm2 = torch.nn.RMSNorm(hidden)
        self.q = torch.nn.Linear(hidden, hidden, bias=False)
        self.k = torch.nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v = torch.nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o = torch.nn.Linear(hidden, hidden, bias=False)
        self.gate = torch.nn.Linear(hidden, ffn, bias=False)
        self.up = torch.nn.Linear(hidden, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)

    def rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
        return x * cos + rotated * sin

    def forward(self, x, cos, sin):
        b, t, h = x.shape
        a = self.norm1(x)
        q = self.q(a).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(a).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(a).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=True)
        x = x + self.o(o.transpose(1, 2).reshape(b, t, h))
        m = self.norm2(x)
        return x + self.down(F.silu(self.gate(m)) * self.up(m))


class Decoder(torch.nn.Module):
    def __init__(self, layers, hidden, heads, kv_heads, ffn, vocab, seq):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.blocks = torch.nn.ModuleList(
            Block(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(hidden)
        self.head = torch.nn.Linear(hidden, vocab, bias=False)
        head_dim = hidden // heads
        inv = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2).float() /
                                  head_dim))
        angles = torch.outer(torch.arange(seq).float(), inv)
        angles = torch.cat((angles, angles), -1)
        self.register_buffer("cos", angles.cos()[None, None], persistent=False)
        self.register_buffer("sin", angles.sin()[None, None], persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = self.head(self.norm(x)).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               targets.view(-1))


def training_step(layers, micro_batches, repeats, compiled=False):
    """One Llama 3 8B-shaped step (layers as given, 8,192 tokens per
    micro-batch, batch 1): autocast bf16, fp32 weights, AdamW (foreach),
    gradient accumulation over micro_batches; `compiled`: the model under
    torch.compile (its elementwise chains fused into kernels)."""
    hidden, heads, kv_heads, ffn, vocab, seq = 4096, 32, 8, 14336, 128256, 8192
    torch.manual_seed(1)
    model = Decoder(layers, hidden, heads, kv_heads, ffn, vocab, seq).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    tokens = torch.randint(0, vocab, (1, seq), device="cuda")
    targets = torch.randint(0, vocab, (1, seq), device="cuda")
    run = torch.compile(model) if compiled else model

    def step():
        for _ in range(micro_batches):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = run(tokens, targets)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    seconds = timed(step, repeats)
    parameters = sum(p.numel() for p in model.parameters())
    result = {"layers": layers, "micro_batches": micro_batches,
              "compiled": compiled,
              "seq": seq, "parameters": parameters, "step_seconds": seconds,
              "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
              "max_memory_reserved_bytes": torch.cuda.max_memory_reserved()}
    del model, optimizer
    torch.cuda.empty_cache()
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--fp8-only", action="store_true",
                        help="only the FP8 products")
    parser.add_argument("--steps-only", action="store_true",
                        help="only the training steps, eager and compiled")
    args = parser.parse_args()
    started = time.time()
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    report = {"device": props.name, "multiprocessors": props.multi_processor_count,
              "memory_bytes": props.total_memory, "torch": torch.__version__,
              "cuda": torch.version.cuda, "gemms": [], "attention": []}
    print(report["device"], report["torch"], flush=True)
    if args.steps_only:
        report["steps"] = [training_step(layers, 1, 10, compiled)
                           for compiled in (False, True) for layers in (2, 4)]
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        for row in report["steps"]:
            print(row, flush=True)
        return
    report["fp8_gemms"] = []
    shapes = {"llama3_8b": (4096, 14336, 1024), "llama3_70b": (8192, 28672, 1024)}
    for model, (hidden, ffn, kv) in shapes.items():
        for tp in (1, 2, 4, 8):
            for row in fp8_gemms(8192, hidden, ffn, kv, 128256, tp,
                                 args.repeats):
                row["model"] = model
                report["fp8_gemms"].append(row)
        print(model, "fp8 gemms done", round(time.time() - started, 1),
              flush=True)
    if args.fp8_only:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        return
    for model, (hidden, ffn, kv) in shapes.items():
        for tp in (1, 2, 4, 8):
            for row in gemms(8192, hidden, ffn, kv, 128256, tp, args.repeats):
                row["model"] = model
                report["gemms"].append(row)
        print(model, "gemms done", round(time.time() - started, 1), flush=True)
    for seq in (4096, 8192):
        for heads, kv_heads in ((32, 8), (8, 2), (64, 8), (8, 1)):
            for causal in (True, False):
                report["attention"].append(
                    attention(seq, heads, kv_heads, 128, causal, args.repeats))
    print("attention done", round(time.time() - started, 1), flush=True)
    report["bandwidth"] = bandwidth(8192, 4096, 128256, args.repeats)
    print("bandwidth done", round(time.time() - started, 1), flush=True)
    report["steps"] = [training_step(layers, 1, 10) for layers in (2, 4)]
    report["steps"].append(training_step(4, 4, 5))
    print("steps done", round(time.time() - started, 1), flush=True)
    report["wall_seconds"] = time.time() - started
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    for row in report["steps"]:
        print(row, flush=True)


if __name__ == "__main__":
    main()
