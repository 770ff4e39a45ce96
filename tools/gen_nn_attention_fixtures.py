#!/usr/bin/python3
"""Writes spec/fixtures/nn_attention.safetensors with PyTorch 1.13, for
spec/nn_attention_spec.lua: nn.MultiheadAttention (self- and
cross-attention, kdim/vdim, batch_first, unbatched, bool and float masks,
2-d and 3-d attn_mask, key_padding_mask, add_bias_kv/add_zero_attn,
need_weights false, average_attn_weights false, a fully masked row),
nn.TransformerEncoderLayer / DecoderLayer (norm_first on and off, relu and
gelu, batch_first), a 2-layer nn.TransformerEncoder and nn.TransformerDecoder
and a small nn.Transformer.

For every case "<name>": the module's parameters "<name>.p.<torch name>"
(float32 values, loaded through the state dict), the inputs "<name>.<k>"
(float32; masks bool or float32), the output "<name>.out", the attention
weights "<name>.weights" where returned, the seeds of the backward
"<name>.dout" (and "<name>.dweights"), and the float64 gradients of
sum(out * dout) [+ sum(weights * dweights)] for the inputs "<name>.d<k>" and
every parameter "<name>.dp.<torch name>". All computed in float64, dropout 0,
with gradients on (so torch takes its composed path, not the eval fast path).
The metadata entry "cases" lists {name, kind, args, opts, inputs, call}:
lunet's constructor arguments and call options, the input names in call
order ("self": query, key and value are one tensor).
Run:  /usr/bin/python3 tools/gen_nn_attention_fixtures.py
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as g  # noqa: E402

torch.manual_seed(0)
tensors, cases = g.tensors, g.cases


def randomize(m):
    # (random values everywhere: zero biases and cloned layers would hide mistakes)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape).float() * 0.4)


def nomask_row(mask):
    mask[..., 0] = False   # (no fully masked row unless a case asks for one)
    return mask


def run(name, kind, module, args, opts, inputs, call, calls_kw, weights=False, nan=False, grads=True):
    """inputs: ordered dict of float32 inputs (differentiable) and masks;
    calls_kw(module, **float64 inputs) -> output or (output, weights)"""
    randomize(module)
    for k, v in module.state_dict().items():
        tensors[f"{name}.p.{k}"] = v.float().clone()
    m = module.double()
    m.eval()
    d = {}
    for k, v in inputs.items():
        tensors[f"{name}.{k}"] = v
        d[k] = v.double().requires_grad_(True) if v.dtype == torch.float32 and not k.endswith("mask") else (
            v.double() if v.is_floating_point() else v)
    r = calls_kw(m, **d)
    out, w = (r if isinstance(r, tuple) else (r, None))
    tensors[f"{name}.out"] = out.detach()
    loss = None
    if w is not None:
        tensors[f"{name}.weights"] = w.detach()
    if grads:
        dout = g.f32(*out.shape)
        tensors[f"{name}.dout"] = dout
        loss = (out * dout.double()).sum()
        if w is not None:
            dw = g.f32(*w.shape)
            tensors[f"{name}.dweights"] = dw
            loss = loss + (w * dw.double()).sum()
        xs = [k for k in inputs if d[k].requires_grad]
        ps = list(m.named_parameters())
        gs = torch.autograd.grad(loss, [d[k] for k in xs] + [p for _, p in ps], allow_unused=True)
        for k, gr in zip(xs + ["p." + n for n, _ in ps], gs):
            ref = d[k] if not k.startswith("p.") else dict(ps)[k[2:]]
            tensors[f"{name}.d{k}"] = gr if gr is not None else torch.zeros_like(ref)
    cases.append({"name": name, "kind": kind, "args": args, "opts": opts, "inputs": list(inputs),
                  "call": call, "weights": w is not None, "grads": grads, "nan": nan})


def mha_kw(call, self_attn):
    def f(m, **d):
        masks = {k: d[k] for k in ("key_padding_mask", "attn_mask") if k in d}
        if self_attn:
            q = k = v = d["x"]
        else:
            q, k = d["q"], d["k"]
            v = d["v"] if "v" in d else k
        return m(q, k, v, **masks, **call)
    return f


def mha(name, E, H, opts, shapes, masks=None, call=None, self_attn=False, nan=False, kv_same=False):
    call = call or {}
    torch_opts = dict(opts)
    m = nn.MultiheadAttention(E, H, **torch_opts)
    inputs = {}
    if self_attn:
        inputs["x"] = g.f32(*shapes[0])
    else:
        inputs["q"] = g.f32(*shapes[0])
        inputs["k"] = g.f32(*shapes[1])
        if not kv_same:
            inputs["v"] = g.f32(*shapes[2])
    for k, v in (masks or {}).items():
        inputs[k] = v
    run(name, "MultiheadAttention", m, [E, H], opts, inputs, call, mha_kw(call, self_attn),
        weights=call.get("need_weights", True), nan=nan, grads=not nan)


# L=4 targets, S=5 sources, N=3, E=8, H=2 unless said
mha("mha_self", 8, 2, {}, [(4, 3, 8)], self_attn=True)
mha("mha_cross_kdim_vdim", 8, 4, {"kdim": 5, "vdim": 7}, [(4, 2, 8), (6, 2, 5), (6, 2, 7)],
    {"key_padding_mask": nomask_row(torch.rand(2, 6) < 0.4)})
mha("mha_batch_first", 8, 2, {"batch_first": True}, [(3, 4, 8), (3, 5, 8)],
    {"attn_mask": g.f32(4, 5)}, kv_same=True)
mha("mha_unbatched", 8, 2, {}, [(4, 8)],
    {"key_padding_mask": nomask_row(torch.rand(4) < 0.4).unsqueeze(0).squeeze(0),
     "attn_mask": nomask_row(torch.rand(4, 4) < 0.4)}, self_attn=True)
mha("mha_unbatched_mask3d", 8, 2, {}, [(4, 8), (5, 8), (5, 8)], {"attn_mask": g.f32(2, 4, 5)})
mha("mha_mask3d_bool", 8, 2, {}, [(4, 3, 8), (5, 3, 8), (5, 3, 8)],
    {"key_padding_mask": nomask_row(torch.rand(3, 5) < 0.3), "attn_mask": nomask_row(torch.rand(6, 4, 5) < 0.4)})
mha("mha_mask3d_float_kpm_bool", 8, 2, {}, [(4, 3, 8), (5, 3, 8), (5, 3, 8)],
    {"key_padding_mask": nomask_row(torch.rand(3, 5) < 0.3), "attn_mask": g.f32(6, 4, 5)})
mha("mha_kpm_float", 8, 2, {}, [(4, 3, 8)], {"key_padding_mask": g.f32(3, 4)}, self_attn=True)
mha("mha_bias_kv_zero_attn", 8, 2, {"add_bias_kv": True, "add_zero_attn": True}, [(4, 3, 8), (5, 3, 8), (5, 3, 8)],
    {"key_padding_mask": nomask_row(torch.rand(3, 5) < 0.3), "attn_mask": nomask_row(torch.rand(4, 5) < 0.3)})
mha("mha_zero_attn_only", 8, 2, {"add_zero_attn": True}, [(4, 3, 8)], self_attn=True)
mha("mha_no_weights_no_bias", 8, 2, {"bias": False}, [(4, 3, 8), (5, 3, 8), (5, 3, 8)],
    call={"need_weights": False})
mha("mha_per_head", 8, 4, {"batch_first": True}, [(2, 4, 8), (2, 5, 8), (2, 5, 8)],
    {"attn_mask": nomask_row(torch.rand(4, 5) < 0.3)}, call={"average_attn_weights": False})
kpm = torch.zeros(3, 5, dtype=torch.bool)
kpm[1] = True   # (batch 2 sees nothing: torch 1.13's composed path gives NaN)
mha("mha_fully_masked", 8, 2, {}, [(4, 3, 8), (5, 3, 8), (5, 3, 8)], {"key_padding_mask": kpm}, nan=True)


def square_mask(n):
    return nn.Transformer.generate_square_subsequent_mask(n).float()


def enc_layer(name, opts, shape, masks, batch_first=False):
    t = dict(opts)
    m = nn.TransformerEncoderLayer(8, 2, **t)
    run(name, "TransformerEncoderLayer", m, [8, 2], opts, {"src": g.f32(*shape), **masks}, {},
        lambda m, src, **kw: m(src, **kw))


def dec_layer(name, opts, tshape, mshape, masks):
    m = nn.TransformerDecoderLayer(8, 2, **opts)
    run(name, "TransformerDecoderLayer", m, [8, 2], opts, {"tgt": g.f32(*tshape), "memory": g.f32(*mshape), **masks},
        {}, lambda m, tgt, memory, **kw: m(tgt, memory, **kw))


ff = {"dim_feedforward": 16, "dropout": 0.0}
enc_layer("enc_post_relu", ff, (5, 3, 8),
          {"src_mask": square_mask(5), "src_key_padding_mask": nomask_row(torch.rand(3, 5) < 0.3)})
enc_layer("enc_pre_gelu_bf", {**ff, "norm_first": True, "activation": "gelu", "batch_first": True,
                              "layer_norm_eps": 1e-3}, (3, 5, 8), {"src_mask": nomask_row(torch.rand(5, 5) < 0.3)})
enc_layer("enc_unbatched", ff, (5, 8), {"src_key_padding_mask": nomask_row(torch.rand(5) < 0.3)})
dec_layer("dec_post_relu", ff, (4, 3, 8), (5, 3, 8),
          {"tgt_mask": square_mask(4), "memory_key_padding_mask": nomask_row(torch.rand(3, 5) < 0.3),
           "tgt_key_padding_mask": nomask_row(torch.rand(3, 4) < 0.3)})
dec_layer("dec_pre_gelu_bf", {**ff, "norm_first": True, "activation": "gelu", "batch_first": True},
          (3, 4, 8), (3, 5, 8), {"memory_mask": g.f32(4, 5)})

layer = nn.TransformerEncoderLayer(8, 2, **ff)
run("encoder_2", "TransformerEncoder", nn.TransformerEncoder(layer, 2, nn.LayerNorm(8)), [8, 2, 2], ff,
    {"src": g.f32(5, 3, 8), "mask": square_mask(5), "src_key_padding_mask": nomask_row(torch.rand(3, 5) < 0.3)}, {},
    lambda m, src, **kw: m(src, **kw))
layer = nn.TransformerDecoderLayer(8, 2, **ff, norm_first=True)
run("decoder_2", "TransformerDecoder", nn.TransformerDecoder(layer, 2), [8, 2, 2], {**ff, "norm_first": True},
    {"tgt": g.f32(4, 3, 8), "memory": g.f32(5, 3, 8), "tgt_mask": square_mask(4)}, {},
    lambda m, tgt, memory, **kw: m(tgt, memory, **kw))
topts = {"d_model": 8, "nhead": 2, "num_encoder_layers": 2, "num_decoder_layers": 1, **ff}
run("transformer", "Transformer", nn.Transformer(**topts), [], topts,
    {"src": g.f32(5, 3, 8), "tgt": g.f32(4, 3, 8), "tgt_mask": square_mask(4),
     "src_key_padding_mask": nomask_row(torch.rand(3, 5) < 0.3),
     "memory_key_padding_mask": nomask_row(torch.rand(3, 5) < 0.3)}, {},
    lambda m, src, tgt, **kw: m(src, tgt, **kw))

g.write("nn_attention.safetensors", tensors, cases)
