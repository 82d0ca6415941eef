#!/usr/bin/env python3
"""Golden fixtures from transformers' DeepseekV4ForCausalLM (run on the GPU machine, transformers 5.17).

For each tiny config this writes tests/golden/<name>/ with
  config.json           Hub-style config (compress_ratios etc.) plus the transformers-native keys
  model.safetensors     random weights in the Hub's bare naming (BF16 values, I64 tid2eid)
  fixture.safetensors   input_ids [L] I32; logits_full [L,V] F32 (one use_cache=False forward);
                        logits_decode [L,V] F32 (prefill of `prefill_len` tokens, then one token at a time)
and prints how far the two transformers paths are apart. Weights go into transformers through
from_pretrained, so the Hub names are checked by transformers' own conversion mapping.

Command used (repo root, on the GPU machine):
  python3 tools/golden/make_hf_fixtures.py --out tests/golden
"""
import argparse
import json
import math
import os
import sys

import torch
from safetensors.torch import save_file

import transformers
from transformers import DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdv4

BASE = dict(
    architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4", torch_dtype="float32",
    vocab_size=512, hidden_size=64, moe_intermediate_size=32, num_attention_heads=4,
    num_key_value_heads=1, head_dim=32, qk_rope_head_dim=16, q_lora_rank=32, o_groups=2,
    o_lora_rank=16, sliding_window=16, rope_theta=10000.0, compress_rope_theta=160000.0,
    rope_scaling=dict(type="yarn", factor=16, original_max_position_embeddings=65536,
                      beta_fast=32, beta_slow=1),
    max_position_embeddings=1048576, index_n_heads=2, index_head_dim=32,
    n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, scoring_func="sqrtsoftplus",
    topk_method="noaux_tc", norm_topk_prob=True, routed_scaling_factor=1.5, swiglu_limit=10.0,
    hidden_act="silu", hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6,
    num_nextn_predict_layers=0, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1,
    attention_bias=False,
)
LAYER_TYPE = {0: "sliding_attention", 4: "compressed_sparse_attention", 16: "heavily_compressed_attention"}

# name -> (ratios per layer (no MTP: transformers drops it), num_hash_layers, index_topk, seq_len, prefill_len, swiglu_limit)
CONFIGS = {
    # CSA with a selective top-k: the case where transformers' two paths disagree.
    "mixed_selective": ([0, 4, 16, 4], 2, 4, 45, 7, 10.0),
    # Same schedule, top-k >= every compressed entry: both transformers paths must agree.
    "mixed_fullk": ([0, 4, 16, 4], 2, 64, 45, 7, 10.0),
    # Sliding-window only, all hash-routed; the window of 16 wraps several times.
    "sliding_hash": ([0, 0], 2, 4, 41, 5, 10.0),
    # HCA-heavy stack, score routing only, a low SwiGLU limit so the clamps bite.
    "hca_clamp": ([16, 4, 16], 0, 64, 38, 13, 0.5),
    # Selective top-k again, but with 8 indexer heads, so that ReLU rarely zeroes a whole score
    # and exact ties at the top-k boundary do not occur (see docs/decisions/0001-*.md).
    "selective_noties": ([0, 4, 16, 4], 1, 3, 45, 6, 10.0, {"index_n_heads": 8}),
}


def build_config(ratios, n_hash, topk, swiglu, overrides=None):
    cfg = dict(BASE)
    cfg.update(overrides or {})
    n = len(ratios)
    cfg.update(num_hidden_layers=n, compress_ratios=ratios, num_hash_layers=n_hash, index_topk=topk,
               swiglu_limit=swiglu)
    # transformers' legacy compress_ratios only knows 0/4/128, so also give its native keys.
    cfg["layer_types"] = [LAYER_TYPE[r] for r in ratios]
    cfg["compress_rates"] = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16}
    cfg["mlp_layer_types"] = ["hash_moe"] * n_hash + ["moe"] * (n - n_hash)
    prf = cfg["qk_rope_head_dim"] / cfg["head_dim"]
    yarn = {k: v for k, v in cfg["rope_scaling"].items() if k != "type"}
    cfg["rope_parameters"] = {
        "main": {"rope_type": "default", "rope_theta": cfg["rope_theta"], "partial_rotary_factor": prf},
        "compress": {"rope_type": "yarn", "rope_theta": cfg["compress_rope_theta"], "partial_rotary_factor": prf,
                     "attention_factor": 1.0, **yarn},
    }
    return cfg


def make_weights(cfg, gen):
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    nh, hd, ql = cfg["num_attention_heads"], cfg["head_dim"], cfg["q_lora_rank"]
    og, ol, inter = cfg["o_groups"], cfg["o_lora_rank"], cfg["moe_intermediate_size"]
    E, K, hc = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["hc_mult"]
    ih, ihd = cfg["index_n_heads"], cfg["index_head_dim"]
    mix = (2 + hc) * hc
    w = {}

    def lin(name, out, inp):
        w[name] = torch.randn(out, inp, generator=gen) / math.sqrt(inp)

    def vec(name, n, mean=0.0, std=1.0):
        w[name] = mean + std * torch.randn(n, generator=gen)

    w["embed.weight"] = torch.randn(V, H, generator=gen)
    lin("head.weight", V, H)
    vec("norm.weight", H, 1.0, 0.1)
    lin("hc_head_fn", hc, hc * H)
    vec("hc_head_base", hc, 0.0, 0.5)
    vec("hc_head_scale", 1, 1.0, 0.2)
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        r = cfg["compress_ratios"][i]
        vec(p + "attn_norm.weight", H, 1.0, 0.1)
        vec(p + "ffn_norm.weight", H, 1.0, 0.1)
        for site in ("attn", "ffn"):
            lin(p + f"hc_{site}_fn", mix, hc * H)
            vec(p + f"hc_{site}_base", mix, 0.0, 0.5)
            vec(p + f"hc_{site}_scale", 3, 1.0, 0.2)
        lin(p + "attn.wq_a.weight", ql, H)
        vec(p + "attn.q_norm.weight", ql, 1.0, 0.1)
        lin(p + "attn.wq_b.weight", nh * hd, ql)
        lin(p + "attn.wkv.weight", hd, H)
        vec(p + "attn.kv_norm.weight", hd, 1.0, 0.1)
        lin(p + "attn.wo_a.weight", og * ol, nh * hd // og)
        lin(p + "attn.wo_b.weight", H, og * ol)
        vec(p + "attn.attn_sink", nh, 0.0, 1.0)
        if r:
            width = 2 * hd if r == 4 else hd
            lin(p + "attn.compressor.wkv.weight", width, H)
            lin(p + "attn.compressor.wgate.weight", width, H)
            w[p + "attn.compressor.ape"] = 0.5 * torch.randn(r, width, generator=gen)
            vec(p + "attn.compressor.norm.weight", hd, 1.0, 0.1)
        if r == 4:
            lin(p + "attn.indexer.wq_b.weight", ih * ihd, ql)
            lin(p + "attn.indexer.weights_proj.weight", ih, H)
            lin(p + "attn.indexer.compressor.wkv.weight", 2 * ihd, H)
            lin(p + "attn.indexer.compressor.wgate.weight", 2 * ihd, H)
            w[p + "attn.indexer.compressor.ape"] = 0.5 * torch.randn(r, 2 * ihd, generator=gen)
            vec(p + "attn.indexer.compressor.norm.weight", ihd, 1.0, 0.1)
        lin(p + "ffn.gate.weight", E, H)
        if i < cfg["num_hash_layers"]:
            ids = torch.stack([torch.randperm(E, generator=gen)[:K] for _ in range(V)])
            w[p + "ffn.gate.tid2eid"] = ids.to(torch.int64)
        else:
            vec(p + "ffn.gate.bias", E, 0.0, 0.3)
        for e in range(E):
            lin(p + f"ffn.experts.{e}.w1.weight", inter, H)
            lin(p + f"ffn.experts.{e}.w3.weight", inter, H)
            lin(p + f"ffn.experts.{e}.w2.weight", H, inter)
        lin(p + "ffn.shared_experts.w1.weight", inter, H)
        lin(p + "ffn.shared_experts.w3.weight", inter, H)
        lin(p + "ffn.shared_experts.w2.weight", H, inter)
    # Weights are stored as BF16; round here so transformers (fp32) sees exactly the stored values.
    return {k: (v if v.dtype == torch.int64 else v.to(torch.bfloat16)) for k, v in w.items()}


@torch.no_grad()
def run_paths(model, ids, prefill_len):
    full = model(ids[None], use_cache=False).logits[0].float()
    out = model(ids[None, :prefill_len], use_cache=True)
    rows = [out.logits[0].float()]
    cache = out.past_key_values
    for t in range(prefill_len, ids.numel()):
        out = model(ids[None, t : t + 1], past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        rows.append(out.logits[0].float())
    return full, torch.cat(rows, 0)


def rel_err_per_pos(a, b):
    return ((a - b).abs().amax(-1) / b.abs().amax(-1).clamp_min(1e-30)).tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--only", default="", help="comma-separated config names (default: all)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(4)
    print("transformers", transformers.__version__, "torch", torch.__version__)
    summary = {}
    only = set(args.only.split(",")) if args.only else None
    for ci, (name, (ratios, n_hash, topk, L, P, swiglu, *extra)) in enumerate(CONFIGS.items()):
        if only and name not in only:
            continue
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        cfg = build_config(ratios, n_hash, topk, swiglu, *extra)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        gen = torch.Generator().manual_seed(args.seed + ci)
        weights = make_weights(cfg, gen)
        save_file(weights, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        model, info = DeepseekV4ForCausalLM.from_pretrained(d, dtype=torch.float32, output_loading_info=True)
        bad = {k: v for k, v in info.items() if v and k != "error_msgs" or (k == "error_msgs" and v)}
        assert not bad, f"{name}: transformers loading info {bad}"
        model.eval()
        if ci == 0:
            print("rope_parameters as transformers sees them:", model.config.rope_parameters)
            rot = model.model.rotary_emb
            print("compress inv_freq:", rot.compress_inv_freq.tolist(), "scaling", rot.compress_attention_scaling)
        ids = torch.randint(2, cfg["vocab_size"], (L,), generator=gen)
        full, dec = run_paths(model, ids, P)
        err = rel_err_per_pos(dec, full)
        first_bad = next((i for i, e in enumerate(err) if e > 1e-4), None)
        summary[name] = dict(max_rel_err=max(err), first_position_over_1e4=first_bad)
        print(f"{name}: L={L} prefill={P} max rel err full vs decode {max(err):.3e}; first >1e-4 at {first_bad}")
        save_file({"input_ids": ids.to(torch.int32), "logits_full": full.contiguous(),
                   "logits_decode": dec.contiguous()},
                  os.path.join(d, "fixture.safetensors"),
                  metadata={"prefill_len": str(P), "transformers": transformers.__version__,
                            "per_position_rel_err": json.dumps([round(e, 9) for e in err])})
        if name == "mixed_fullk":
            tmp = os.path.join("/tmp", "hf_saved_" + name)
            model.save_pretrained(tmp)
            from safetensors import safe_open
            names = []
            for fn in sorted(os.listdir(tmp)):
                if fn.endswith(".safetensors"):
                    with safe_open(os.path.join(tmp, fn), "pt") as f:
                        names += [f"{k} {list(f.get_slice(k).get_shape())}" for k in f.keys()]
            with open(os.path.join(args.out, "hf_saved_names.txt"), "w") as f:
                f.write("\n".join(sorted(names)) + "\n")
            with open(os.path.join(args.out, "hf_saved_config.json"), "w") as f:
                f.write(open(os.path.join(tmp, "config.json")).read())
    path = os.path.join(args.out, "SUMMARY.json")
    old = json.load(open(path)) if os.path.exists(path) else {}
    old.update(summary)
    with open(path, "w") as f:
        json.dump(old, f, indent=2)


if __name__ == "__main__":
    main()
