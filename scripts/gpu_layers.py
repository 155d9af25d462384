#!/usr/bin/env python3
"""Times Llama 3 8B-shaped decoder layers on one GPU the way torchtitan
trains them, to check how placer models compiling, recomputation and
Float8 (docs/llm.md, "torchtitan's layers on one GPU").

Run on a machine with PyTorch (2.4 or later) and one CUDA GPU:

    python3 scripts/gpu_layers.py --out layers.json

Each configuration is a forward and backward pass of --layers decoder
layers over local batch 2 x 8,192 tokens, as each torchtitan rank runs
them at the published 8B rows: bf16 parameters (FSDP2's param_dtype), the
key/value heads repeated before scaled_dot_product_attention (flash),
and per configuration:
  compiled      each layer under torch.compile(fullgraph=True), wrapped
                first in its recomputation, as torchtitan's
                parallelize_llama.py applies them;
  recompute     none; "selective-op": torchtitan's selective_ac_option
                "op" (save SDPA's outputs and every other aten.mm counted
                from the layer's first, recompute the rest); "full":
                every layer recomputed;
  precision     bf16, or float8: each Linear's product in fp8 with
                dynamic per-tensor scales as torchao's Float8Linear
                (tensorwise) makes them: an amax, a scale and a cast per
                operand, e4m3 forward, e5m2 output gradients.
Not timed: embedding, output layer, loss, optimizer, collectives (the
layers are what placer's per-layer figures compare against).
Times are CUDA-event medians of --repeats steps after 3 warm-ups (the
first compiles); each configuration's row is written to --out as soon as
it is measured, and a configuration that fails is recorded with its
error, so one failure loses nothing else.
"""
import argparse
import collections
import functools
import json
import statistics
import time
import traceback

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

HIDDEN, HEADS, KV_HEADS, FFN, SEQ, BATCH = 4096, 32, 8, 14336, 8192, 2
E4M3_MAX, E5M2_MAX = 448.0, 57344.0


def to_float8(tensor, dtype, largest):
    """A dynamic per-tensor cast: returns the fp8 tensor and the scale
    that turns it back (amax / largest), as torchao's tensorwise recipe."""
    amax = tensor.abs().max().float().clamp(min=1e-12)
    scale = largest / amax
    cast = (tensor.float() * scale).clamp(-largest, largest).to(dtype)
    return cast, scale.reciprocal()


class Float8Product(torch.autograd.Function):
    """y = x w^T with x, w cast to e4m3 and dy to e5m2, per-tensor scales,
    bf16 out (torch._scaled_mm); the backward's products read the saved
    fp8 operands in the layouts _scaled_mm needs."""

    @staticmethod
    def forward(ctx, x, weight):
        x8, x_inv = to_float8(x, torch.float8_e4m3fn, E4M3_MAX)
        w8, w_inv = to_float8(weight, torch.float8_e4m3fn, E4M3_MAX)
        ctx.save_for_backward(x8, x_inv, w8, w_inv)
        return torch._scaled_mm(x8, w8.t(), scale_a=x_inv, scale_b=w_inv,
                                out_dtype=torch.bfloat16)

    @staticmethod
    def backward(ctx, dy):
        x8, x_inv, w8, w_inv = ctx.saved_tensors
        dy = dy.contiguous()
        dy8, dy_inv = to_float8(dy, torch.float8_e5m2, E5M2_MAX)
        w_column_major = w8.t().contiguous().t()
        dx = torch._scaled_mm(dy8, w_column_major, scale_a=dy_inv,
                              scale_b=w_inv, out_dtype=torch.bfloat16)
        x_column_major = x8.t().contiguous().t()
        dw = torch._scaled_mm(dy8.t().contiguous(), x_column_major,
                              scale_a=dy_inv, scale_b=x_inv,
                              out_dtype=torch.bfloat16)
        return dx, dw


class Linear(torch.nn.Module):
    def __init__(self, inputs, outputs, float8):
        super().__init__()
        self.weight = torch.nn.Parameter(
            torch.randn(outputs, inputs) / inputs ** 0.5)
        self.float8 = float8

    def forward(self, x):
        if not self.float8:
            return F.linear(x, self.weight)
        flat = x.reshape(-1, x.shape[-1]).contiguous()
        return Float8Product.apply(flat, self.weight).view(
            *x.shape[:-1], self.weight.shape[0])


class Layer(torch.nn.Module):
    """torchtitan's TransformerBlock (2024-12): wq, wk, wv, rotary,
    repeat_kv, SDPA, wo; w2(silu(w1(x)) * w3(x)); RMSNorm in fp32."""

    def __init__(self, float8):
        super().__init__()
        self.head_dim = HIDDEN // HEADS
        kv = KV_HEADS * self.head_dim
        self.attention_norm = torch.nn.Parameter(torch.ones(HIDDEN))
        self.ffn_norm = torch.nn.Parameter(torch.ones(HIDDEN))
        self.wq = Linear(HIDDEN, HIDDEN, float8)
        self.wk = Linear(HIDDEN, kv, float8)
        self.wv = Linear(HIDDEN, kv, float8)
        self.wo = Linear(HIDDEN, HIDDEN, float8)
        self.w1 = Linear(HIDDEN, FFN, float8)
        self.w3 = Linear(HIDDEN, FFN, float8)
        self.w2 = Linear(FFN, HIDDEN, float8)

    @staticmethod
    def norm(x, weight):
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5)
        return y.type_as(x) * weight

    @staticmethod
    def rotary(x, cos, sin):
        pairs = x.float().unflatten(-1, (-1, 2))
        real, imaginary = pairs[..., 0], pairs[..., 1]
        rotated = torch.stack((real * cos - imaginary * sin,
                               real * sin + imaginary * cos), -1)
        return rotated.flatten(-2).type_as(x)

    def forward(self, x, cos, sin):
        b, t, h = x.shape
        a = self.norm(x, self.attention_norm)
        q = self.rotary(self.wq(a).view(b, t, HEADS, self.head_dim), cos, sin)
        k = self.rotary(self.wk(a).view(b, t, KV_HEADS, self.head_dim),
                        cos, sin)
        v = self.wv(a).view(b, t, KV_HEADS, self.head_dim)
        repeats = HEADS // KV_HEADS
        k = k[:, :, :, None].expand(b, t, KV_HEADS, repeats, self.head_dim)
        v = v[:, :, :, None].expand(b, t, KV_HEADS, repeats, self.head_dim)
        k = k.reshape(b, t, HEADS, self.head_dim)
        v = v.reshape(b, t, HEADS, self.head_dim)
        o = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            is_causal=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, t, h))
        m = self.norm(x, self.ffn_norm)
        return x + self.w2(F.silu(self.w1(m)) * self.w3(m))


def selective_op_context():
    """torchtitan's _custom_policy: save the attention kernels' outputs and
    every other product (the 1st, 3rd, ... of the layer), recompute the
    rest. A Float8 product counts where its aten.mm would."""
    ops = torch.ops.aten
    attention = {getattr(ops, name).default for name in (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention") if hasattr(ops, name)}
    products = {ops.mm.default, ops._scaled_mm.default}
    counts = collections.defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = "recompute" if ctx.is_recompute else "forward"
        if func in products:
            counts[key] += 1
            return (CheckpointPolicy.MUST_SAVE if counts[key] % 2 == 1
                    else CheckpointPolicy.PREFER_RECOMPUTE)
        if func in attention or func == ops.max.default:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Recomputed(torch.nn.Module):
    def __init__(self, layer, recompute):
        super().__init__()
        self.layer, self.recompute = layer, recompute

    def forward(self, x, cos, sin):
        if self.recompute == "none":
            return self.layer(x, cos, sin)
        if self.recompute == "full":
            return checkpoint(self.layer, x, cos, sin, use_reentrant=False,
                              preserve_rng_state=False)
        return checkpoint(self.layer, x, cos, sin, use_reentrant=False,
                          preserve_rng_state=False,
                          context_fn=selective_op_context)


def rotary_angles():
    head_dim = HIDDEN // HEADS
    inv = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2).float() /
                              head_dim))
    angles = torch.outer(torch.arange(SEQ).float(), inv)[None, :, None, :]
    return angles.cos().cuda(), angles.sin().cuda()


def measure(layers, compiled, recompute, precision, repeats):
    torch.manual_seed(1)
    blocks = []
    for _ in range(layers):
        block = Recomputed(Layer(precision == "float8"), recompute)
        block = block.to(device="cuda", dtype=torch.bfloat16)
        if compiled:
            block = torch.compile(block, fullgraph=True)
        blocks.append(block)
    cos, sin = rotary_angles()
    x = torch.randn(BATCH, SEQ, HIDDEN, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    dy = torch.randn_like(x)
    parameters = [p for block in blocks for p in block.parameters()]

    def step():
        y = x
        for block in blocks:
            y = block(y, cos, sin)
        y.backward(dy)
        x.grad = None
        for p in parameters:
            p.grad = None

    started = time.time()
    step()
    torch.cuda.synchronize()
    first_seconds = time.time() - started
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    baseline = torch.cuda.memory_allocated()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    seconds = statistics.median(times)
    row = {"layers": layers, "compiled": compiled, "recompute": recompute,
           "precision": precision, "tokens": BATCH * SEQ,
           "step_seconds": seconds, "layer_seconds": seconds / layers,
           "min_seconds": min(times), "max_seconds": max(times),
           "first_step_seconds": first_seconds,
           "peak_above_start_bytes":
               torch.cuda.max_memory_allocated() - baseline,
           "parameter_bytes": sum(p.numel() * p.element_size()
                                  for p in parameters)}
    del blocks, parameters, x, dy
    torch.cuda.empty_cache()
    return row


CONFIGURATIONS = [  # most wanted first: a budget cut drops the last
    (False, "none", "bf16"),
    (True, "none", "bf16"),
    (False, "selective-op", "bf16"),
    (True, "selective-op", "bf16"),
    (True, "selective-op", "float8"),
    (True, "full", "bf16"),
    (False, "selective-op", "float8"),
    (True, "none", "float8"),
    (False, "full", "bf16"),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--budget-seconds", type=float, default=400,
                        help="start no configuration after this long")
    args = parser.parse_args()
    started = time.time()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch._dynamo.config.cache_size_limit = 64
    props = torch.cuda.get_device_properties(0)
    report = {"device": props.name, "torch": torch.__version__,
              "cuda": torch.version.cuda, "layers": args.layers,
              "rows": [], "failed": [], "skipped": []}
    print(report["device"], report["torch"], flush=True)
    for compiled, recompute, precision in CONFIGURATIONS:
        name = {"compiled": compiled, "recompute": recompute,
                "precision": precision}
        if time.time() - started > args.budget_seconds:
            report["skipped"].append(name)
            continue
        try:
            row = measure(args.layers, compiled, recompute, precision,
                          args.repeats)
            report["rows"].append(row)
            print(json.dumps(row), round(time.time() - started, 1),
                  flush=True)
        except Exception as error:  # recorded, and the next one runs
            name["error"] = "".join(traceback.format_exception_only(
                type(error), error))[-2000:]
            report["failed"].append(name)
            print("FAILED", name, flush=True)
            traceback.print_exc()
            torch.cuda.empty_cache()
        torch._dynamo.reset()
        report["wall_seconds"] = time.time() - started
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
