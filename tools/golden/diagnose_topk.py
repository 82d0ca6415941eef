#!/usr/bin/env python3
"""Where do transformers' full-sequence and prefill+decode paths part ways with a selective top-k?

Loads a fixture model written by make_hf_fixtures.py, runs both paths, and records for every CSA
layer and query position: the indexer's top-k picks, and which compressed entries the attention
actually lets through (finite mask columns). Prints the first disagreement of each kind.

  python3 tools/golden/diagnose_topk.py tests/golden/mixed_selective
"""
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdv4

rec = []
orig_indexer = mdv4.DeepseekV4Indexer.forward
orig_attn = mdv4.eager_attention_forward
orig_layer_fwd = mdv4.DeepseekV4Attention.forward
state = {"layer": None, "pos": None}


orig_scorer = mdv4.DeepseekV4IndexerScorer.forward


def scorer_fwd(self, q, compressed_kv, hidden_states):
    out = orig_scorer(self, q, compressed_kv, hidden_states)
    state["scores"] = out.detach().clone()
    return out


def indexer_fwd(self, hidden_states, q_residual, position_ids, past_key_values, layer_idx):
    out = orig_indexer(self, hidden_states, q_residual, position_ids, past_key_values, layer_idx)
    for s in range(out.shape[1]):
        rec.append(dict(kind="topk", layer=layer_idx, pos=int(position_ids[0, s]),
                        picks=sorted(int(i) for i in out[0, s].tolist() if i >= 0),
                        scores=[float(x) for x in state["scores"][0, s].tolist()]))
    return out


def attn_fwd(module, query, key, value, attention_mask, scaling, **kw):
    n_kv = key.shape[2]
    if module.compressor is not None and isinstance(module.compressor, mdv4.DeepseekV4CSACompressor):
        pos = state["pos"]
        n_sw = n_kv - state["n_comp"]
        for s in range(query.shape[2]):
            if attention_mask is None:
                seen = list(range(state["n_comp"]))
                how = "mask=None"
            else:
                m = attention_mask[0, 0, s, n_sw:]
                seen = [i for i, v in enumerate(m.tolist()) if v == 0.0]
                how = f"mask {tuple(attention_mask.shape)} kv {n_kv}"
            rec.append(dict(kind="attended", layer=module.layer_idx, pos=int(pos[0, s]), seen=seen,
                            how=how))
    return orig_attn(module, query, key, value, attention_mask, scaling, **kw)


def layer_fwd(self, hidden_states, position_embeddings, position_ids, attention_mask, past_key_values=None, **kw):
    state["pos"] = position_ids
    if self.compressor is not None:
        # number of compressed entries this call will concatenate
        cache = past_key_values.layers[self.layer_idx] if past_key_values is not None else None
        before = cache.entry_count["compressor"] if cache is not None else 0
        new = (hidden_states.shape[1] + (cache.buffer_kv["compressor"].shape[1]
               if cache is not None and cache.buffer_kv["compressor"] is not None else 0)) // self.compressor.compress_rate
        state["n_comp"] = before + new
    return orig_layer_fwd(self, hidden_states, position_embeddings, position_ids, attention_mask,
                          past_key_values=past_key_values, **kw)


mdv4.DeepseekV4Indexer.forward = indexer_fwd
mdv4.DeepseekV4IndexerScorer.forward = scorer_fwd
mdv4.eager_attention_forward = attn_fwd
mdv4.DeepseekV4Attention.forward = layer_fwd


def main():
    d = sys.argv[1]
    fx = load_file(f"{d}/fixture.safetensors")
    from safetensors import safe_open
    with safe_open(f"{d}/fixture.safetensors", "pt") as f:
        P = int(f.metadata()["prefill_len"])
    ids = fx["input_ids"].long()
    model = DeepseekV4ForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    with torch.no_grad():
        rec.clear()
        model(ids[None], use_cache=False)
        full = list(rec)
        rec.clear()
        out = model(ids[None, :P], use_cache=True)
        cache = out.past_key_values
        for t in range(P, ids.numel()):
            out = model(ids[None, t:t + 1], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
        dec = list(rec)

    def index(rs, kind, key):
        return {(r["layer"], r["pos"]): r for r in rs if r["kind"] == kind}

    report = {}
    for kind, key in (("topk", "picks"), ("attended", "seen")):
        a, b = index(full, kind, key), index(dec, kind, key)
        diffs = [(k, a[k][key], b[k][key], a[k].get("how"), b[k].get("how"))
                 for k in sorted(a) if k in b and a[k][key] != b[k][key]]
        report[kind] = diffs[:8]
        print(f"== {kind}: {len(diffs)} (layer, pos) rows differ between full and decode")
        for k, x, y, hx, hy in diffs[:8]:
            print(f"  layer {k[0]} pos {k[1]}: full {x} ({hx})  decode {y} ({hy})")
            if kind == "topk":
                vis = (k[1] + 1) // 4
                print("     full scores  ", [f"{v:.9g}" for v in a[k]["scores"][:vis]])
                print("     decode scores", [f"{v:.9g}" for v in b[k]["scores"][:vis]])
    # Does each path attend exactly what its own indexer picked?
    for label, rs in (("full", full), ("decode", dec)):
        t, at = index(rs, "topk", "picks"), index(rs, "attended", "seen")
        mism = [(k, t[k]["picks"], at[k]["seen"], at[k]["how"]) for k in sorted(t) if k in at and t[k]["picks"] != at[k]["seen"]]
        print(f"== {label}: {len(mism)} rows where attention ignores the indexer's picks")
        for k, x, y, how in mism[:8]:
            print(f"  layer {k[0]} pos {k[1]}: picks {x} attended {y} ({how})")
        report[label + "_ignores_indexer"] = mism[:8]
    json.dump(report, open(f"{d}/../topk_diagnosis.json", "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
