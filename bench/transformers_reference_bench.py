#!/usr/bin/env python3
"""Reference side of the deepinfer benchmark: Hugging Face transformers' DeepseekV4ForCausalLM,
eager attention, one GPU, on a (synthetic) V4-Flash-shaped FP8/MXFP4 checkpoint.

Measures
  * prefill: one forward of --prefill-len random tokens at batch 1;
  * decode: for each B in --batch-sizes, one sequence of --context tokens is prefilled, its cache
    is replicated to B rows, then --decode-steps single-token steps are timed (after 2 warm-up
    steps), every row getting a different random token so MoE routing differs across rows;
  * long context (--long-context N): prefill N tokens at batch 1 (in chunks, see
    --long-prefill-chunk), then timed decode steps at batch 1.

Only torch, transformers, safetensors and the standard library are used. Progress goes to
stderr; a markdown table goes to stdout; --json writes the same numbers plus environment info.
"""

import argparse
import copy
import gc
import json
import math
import os
import re
import statistics
import sys
import time

# The benchmark machine is offline; without this, transformers/kernels may wait on Hub timeouts.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

WARMUP_DECODE_STEPS = 2


def log(msg):
    print(f"[ref-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Time HF transformers DeepseekV4ForCausalLM (eager) prefill/decode on one GPU.")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="checkpoint directory (config.json + *.safetensors, upstream tensor names)")
    p.add_argument("--prefill-len", type=int, default=4096, help="prompt length of the prefill test")
    p.add_argument("--context", type=int, default=4096, help="context tokens per sequence for decode")
    p.add_argument("--batch-sizes", default="1,8,32,128", help="comma list of decode batch sizes")
    p.add_argument("--decode-steps", type=int, default=8,
                   help=f"timed decode steps (after {WARMUP_DECODE_STEPS} warm-up steps)")
    p.add_argument("--long-context", type=int, default=0,
                   help="if >0: prefill this many tokens at batch 1, then time decode at batch 1")
    p.add_argument("--long-prefill-chunk", type=int, default=4096,
                   help="chunk size of the long-context prefill (0 = one forward; eager attention "
                        "materialises [heads, N, N] scores, so one forward of 32K tokens needs >170 GB)")
    p.add_argument("--load", choices=["auto", "plain", "dequant", "manual"], default="auto",
                   help="auto: try plain from_pretrained, then FP8 dequantize, then our own "
                        "dequantizing loader; or force one of them")
    p.add_argument("--experts-implementation", default=None,
                   help="passed to from_pretrained as experts_implementation (default: transformers' own)")
    p.add_argument("--json", metavar="PATH", help="write results as JSON here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.batch_sizes = [int(x) for x in args.batch_sizes.split(",") if x.strip()]
    return args


# ----------------------------------------------------------------------------------------------
# small helpers


def sync():
    import torch
    torch.cuda.synchronize()


def free_memory():
    import torch
    gc.collect()
    torch.cuda.empty_cache()


def gib(nbytes):
    return round(nbytes / 2**30, 2)


def short_error(e):
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 600 else text[:600] + " ..."


def model_forward(model, ids, cache):
    # logits_to_keep=1: only the last position's logits, as a serving engine computes them
    # (the full [tokens, 129280] logits would add ~1 GB and a large GEMM at 4K prefill).
    return model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)


def random_ids(gen, vocab, n, batch=1):
    import torch
    return torch.randint(0, vocab, (batch, n), generator=gen).cuda()


# ----------------------------------------------------------------------------------------------
# loading


def smoke_test(model, vocab):
    """One short forward; raises if it fails, returns whether the logits are finite."""
    import torch
    with torch.inference_mode():
        ids = torch.arange(16, device="cuda").view(1, 16) % vocab
        out = model(input_ids=ids, use_cache=False, logits_to_keep=1)
        sync()
        return bool(torch.isfinite(out.logits).all())


def load_with_transformers(args, method):
    import torch
    import transformers

    cls = getattr(transformers, "DeepseekV4ForCausalLM", None) or transformers.AutoModelForCausalLM
    kwargs = dict(dtype=torch.bfloat16, device_map="cuda", attn_implementation="eager",
                  output_loading_info=True)
    if args.experts_implementation:
        kwargs["experts_implementation"] = args.experts_implementation
    if method == "dequant":
        # transformers 5.x folds FP8 block scales (and, in Fp8Dequantize, packed MXFP4 int8 experts
        # with their [1, 32] e8m0 grid) into bf16 weights at load when dequantize=True.
        import inspect
        cfg_cls = transformers.FineGrainedFP8Config
        wanted = dict(dequantize=True, weight_block_size=(128, 128), activation_scheme="dynamic",
                      scale_fmt="ue8m0")
        accepted = inspect.signature(cfg_cls.__init__).parameters
        kwargs["quantization_config"] = cfg_cls(**{k: v for k, v in wanted.items() if k in accepted})
    model, info = cls.from_pretrained(args.model, **kwargs)
    info = {k: list(v) if isinstance(v, (list, set, tuple)) else v for k, v in (info or {}).items()}
    return model, info


# Upstream (DeepSeek Hub) name -> transformers parameter name, applied in order. Written from
# transformers' conversion_mapping.py "deepseek_v4" entry (structural prefixes first, then leaves).
_RENAMES = [
    (r"^embed\.weight$", "model.embed_tokens.weight"),
    (r"^head\.weight$", "lm_head.weight"),
    (r"^norm\.weight$", "model.norm.weight"),
    (r"^hc_head_(fn|base|scale)$", r"model.hc_head.hc_\1"),
    (r"^layers\.(\d+)\.attn_norm\.", r"model.layers.\1.input_layernorm."),
    (r"^layers\.(\d+)\.ffn_norm\.", r"model.layers.\1.post_attention_layernorm."),
    (r"^layers\.(\d+)\.hc_attn_(fn|base|scale)$", r"model.layers.\1.attn_hc.\2"),
    (r"^layers\.(\d+)\.hc_ffn_(fn|base|scale)$", r"model.layers.\1.ffn_hc.\2"),
    (r"^layers\.(\d+)\.attn\.", r"model.layers.\1.self_attn."),
    (r"^layers\.(\d+)\.ffn\.", r"model.layers.\1.mlp."),
    (r"\.self_attn\.attn_sink$", ".self_attn.sinks"),
    # the indexer lives inside the CSA compressor in transformers
    (r"\.self_attn\.indexer\.compressor\.norm\.", ".self_attn.compressor.indexer.kv_norm."),
    (r"\.self_attn\.indexer\.compressor\.ape$", ".self_attn.compressor.indexer.position_bias"),
    (r"\.self_attn\.indexer\.compressor\.", ".self_attn.compressor.indexer."),
    (r"\.self_attn\.indexer\.", ".self_attn.compressor.indexer."),
    (r"\.self_attn\.compressor\.norm\.", ".self_attn.compressor.kv_norm."),
    (r"\.self_attn\.compressor\.ape$", ".self_attn.compressor.position_bias"),
    (r"\.self_attn\.q_norm\.", ".self_attn.q_a_norm."),
    (r"\.mlp\.gate\.bias$", ".mlp.gate.e_score_correction_bias"),
    (r"\.mlp\.shared_experts\.w1\.", ".mlp.shared_experts.gate_proj."),
    (r"\.mlp\.shared_experts\.w2\.", ".mlp.shared_experts.down_proj."),
    (r"\.mlp\.shared_experts\.w3\.", ".mlp.shared_experts.up_proj."),
]
_ATTN_LEAVES = {"wq_a": "q_a_proj", "wq_b": "q_b_proj", "wkv": "kv_proj", "wgate": "gate_proj",
                "wo_a": "o_a_proj", "wo_b": "o_b_proj"}
_EXPERT_RE = re.compile(r"^layers\.(\d+)\.ffn\.experts\.(\d+)\.(w[123])\.weight$")
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def upstream_to_hf(name):
    for pattern, repl in _RENAMES:
        name = re.sub(pattern, repl, name)
    if ".self_attn." in name:
        name = re.sub(r"\.(wq_a|wq_b|wkv|wgate|wo_a|wo_b)(?=\.)",
                      lambda m: "." + _ATTN_LEAVES[m.group(1)], name)
    return name


def hf_name_candidates(name):
    """The mapped name plus spellings that differ between transformers versions."""
    first = upstream_to_hf(name)
    out = [first]
    if ".indexer.weights_proj." in first:  # newer versions nest it under a scorer module
        out.append(first.replace(".indexer.weights_proj.", ".indexer.scorer.weights_proj."))
    return out


def e8m0_to_float(scale):
    """E8M0 bytes -> 2^(e-127) in fp32; other dtypes are taken as plain multipliers."""
    import torch
    if scale.dtype in (torch.uint8, getattr(torch, "float8_e8m0fnu", torch.uint8)):
        return torch.exp2(scale.view(torch.uint8).float() - 127.0)
    return scale.float()


def dequantize(weight, scale):
    """FP8 e4m3 with 128x128 block scales, or packed MXFP4 (int8 [out, in/2]) with 1x32 scales.
    The block shape is derived from the two shapes, so both formats go through one path."""
    import torch
    if weight.dtype in (torch.int8, torch.uint8):
        lut = torch.tensor(_E2M1, dtype=torch.float32, device=weight.device)
        packed = weight.view(torch.uint8)
        # low nibble is the even element, high nibble the odd one
        pairs = torch.stack((lut[(packed & 0xF).long()], lut[(packed >> 4).long()]), dim=-1)
        values = pairs.reshape(weight.shape[0], weight.shape[1] * 2)
    else:
        values = weight.float()
    s = e8m0_to_float(scale)
    rows, cols = values.shape
    block_r = math.ceil(rows / s.shape[0])
    block_c = math.ceil(cols / s.shape[1])
    s = s.repeat_interleave(block_r, dim=0)[:rows].repeat_interleave(block_c, dim=1)[:, :cols]
    return values * s


def load_manual(args):
    """Build the model in bf16 on the GPU from its config and fill it by dequantizing the
    safetensors ourselves (used when transformers cannot load the checkpoint)."""
    import torch
    import transformers
    from safetensors import safe_open

    config = transformers.AutoConfig.from_pretrained(args.model)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")  # we hand the model plain bf16 weights
    cls = getattr(transformers, "DeepseekV4ForCausalLM", None) or transformers.AutoModelForCausalLM
    extra = {"experts_implementation": args.experts_implementation} if args.experts_implementation else {}
    log("manual: building the bf16 model on the GPU (random init, overwritten below)")
    with torch.device("cuda"):
        try:
            model = cls._from_config(config, dtype=torch.bfloat16, attn_implementation="eager", **extra)
        except TypeError:
            model = cls._from_config(config, torch_dtype=torch.bfloat16, attn_implementation="eager", **extra)
    model.eval()

    targets = dict(model.named_parameters())
    targets.update(dict(model.named_buffers()))
    expected = set(model.state_dict().keys())

    # checkpoint key -> file
    files = sorted(f for f in os.listdir(args.model) if f.endswith(".safetensors"))
    where = {}
    handles = {}
    for f in files:
        path = os.path.join(args.model, f)
        try:
            handles[f] = safe_open(path, framework="pt", device=f"cuda:{torch.cuda.current_device()}")
        except Exception:
            handles[f] = safe_open(path, framework="pt", device="cpu")
        for k in handles[f].keys():
            where[k] = f

    def get(key):
        return handles[where[key]].get_tensor(key).cuda()

    filled, unmatched, mismatched = set(), [], []
    n_done = 0
    with torch.no_grad():
        for key in sorted(where):
            if key.endswith(".scale") or key.startswith("mtp."):
                continue  # scales are consumed with their weight; MTP is not part of the HF model
            scale_key = key[: -len("weight")] + "scale" if key.endswith(".weight") else None
            value = get(key)
            if scale_key in where:
                value = dequantize(value, get(scale_key))

            m = _EXPERT_RE.match(key)
            if m:
                layer, expert, which = int(m.group(1)), int(m.group(2)), m.group(3)
                prefix = f"model.layers.{layer}.mlp.experts."
                if which == "w2":
                    name, dst = prefix + "down_proj", targets.get(prefix + "down_proj")
                    view = None if dst is None else dst.data[expert]
                else:
                    name, dst = prefix + "gate_up_proj", targets.get(prefix + "gate_up_proj")
                    if dst is None:
                        view = None
                    else:
                        half = dst.shape[1] // 2  # [E, 2I, H]: gate rows first, then up
                        view = dst.data[expert, :half] if which == "w1" else dst.data[expert, half:]
                if view is None:
                    unmatched.append(key)
                elif tuple(view.shape) != tuple(value.shape):
                    mismatched.append(f"{key}: {tuple(value.shape)} vs {name}{tuple(view.shape)}")
                else:
                    view.copy_(value.to(view.dtype))
                    filled.add(name)
            else:
                name = next((c for c in hf_name_candidates(key) if c in targets), None)
                if name is None:
                    unmatched.append(key)
                elif tuple(targets[name].shape) != tuple(value.shape):
                    mismatched.append(f"{key}: {tuple(value.shape)} vs {name}{tuple(targets[name].shape)}")
                else:
                    targets[name].data.copy_(value.to(targets[name].dtype))
                    filled.add(name)
            del value
            n_done += 1
            if n_done % 500 == 0:
                log(f"manual: {n_done} tensors loaded")
    handles.clear()
    free_memory()
    missing = sorted(expected - filled)
    if getattr(config, "tie_word_embeddings", False) and "lm_head.weight" in missing:
        missing.remove("lm_head.weight")
    info = {"missing_keys": missing, "unexpected_keys": unmatched, "mismatched_keys": mismatched}
    return model, info


def load_model(args):
    import torch

    methods = ["plain", "dequant", "manual"] if args.load == "auto" else [args.load]
    attempts = []
    for method in methods:
        log(f"loading with method '{method}' ...")
        free_memory()
        before = torch.cuda.memory_allocated()
        t0 = time.perf_counter()
        model = None
        try:
            if method == "manual":
                model, info = load_manual(args)
            else:
                model, info = load_with_transformers(args, method)
            load_s = time.perf_counter() - t0
            counts = {k: len(v) for k, v in info.items() if isinstance(v, list)}
            log(f"'{method}' returned in {load_s:.1f} s; loading info counts: {counts}")
            for k in ("missing_keys", "mismatched_keys", "unexpected_keys"):
                if info.get(k):
                    log(f"  {k} (first 8): {info[k][:8]}")
            finite = smoke_test(model, model.config.vocab_size)
            problems = []
            if info.get("missing_keys"):
                problems.append(f"{len(info['missing_keys'])} missing keys")
            if info.get("mismatched_keys"):
                problems.append(f"{len(info['mismatched_keys'])} mismatched keys")
            if not finite:
                problems.append("non-finite logits in smoke test")
            # In auto mode a load that leaves weights missing/mismatched (e.g. experts not
            # understood) is not a valid reference: try the next method. The last one is kept.
            if problems and args.load == "auto" and method != methods[-1]:
                raise RuntimeError("rejected: " + ", ".join(problems))
            for prob in problems:
                log(f"WARNING: {prob} (kept: last or forced method)")
            used = torch.cuda.memory_allocated() - before
            attempts.append({"method": method, "ok": True, "load_s": round(load_s, 1)})
            load = {
                "method": method,
                "load_s": round(load_s, 1),
                "gpu_mem_weights_gib": gib(used),
                "gpu_mem_reserved_gib": gib(torch.cuda.memory_reserved()),
                "missing_keys": counts.get("missing_keys", 0),
                "unexpected_keys": counts.get("unexpected_keys", 0),
                "mismatched_keys": counts.get("mismatched_keys", 0),
                "smoke_logits_finite": finite,
                "warnings": problems,
                "attempts": attempts,
            }
            log(f"loaded with '{method}' in {load_s:.1f} s, weights use {gib(used)} GiB of GPU memory")
            return model, load
        except Exception as e:  # noqa: BLE001 - any failure means: try the next method
            attempts.append({"method": method, "ok": False, "error": short_error(e)})
            log(f"method '{method}' failed: {short_error(e)}")
            del model
            free_memory()
    raise SystemExit("ERROR: no loading method worked:\n" +
                     "\n".join(f"  {a['method']}: {a.get('error')}" for a in attempts))


def describe_model(model):
    cfg = model.config
    desc = {k: getattr(cfg, k, None) for k in (
        "num_hidden_layers", "hidden_size", "num_attention_heads", "head_dim", "num_local_experts",
        "num_experts_per_tok", "moe_intermediate_size", "sliding_window", "index_topk", "vocab_size",
        "layer_types", "mlp_layer_types", "compress_rates", "hc_mult")}
    desc["attn_implementation"] = getattr(cfg, "_attn_implementation", None)
    desc["experts_implementation"] = getattr(cfg, "_experts_implementation", None)
    experts = model.model.layers[0].mlp.experts
    desc["experts_module"] = type(experts).__name__
    desc["experts_weight_dtype"] = str(next(experts.parameters()).dtype)
    return desc


# ----------------------------------------------------------------------------------------------
# cache replication


def _repeat_rows(obj, batch, memo, touched, prefix):
    """Repeat every batch-1 tensor held by `obj` (directly, or in a dict/list attribute) to
    `batch` rows. `memo` keeps aliases aliased (V4's sliding layers store values = keys)."""
    import torch

    def rep(t, label):
        if not torch.is_tensor(t) or t.ndim < 2 or t.shape[0] != 1:
            return t
        if id(t) not in memo:
            memo[id(t)] = t.expand(batch, *t.shape[1:]).contiguous()
            touched.add(label)
        return memo[id(t)]

    for attr, val in list(vars(obj).items()):
        if torch.is_tensor(val):
            setattr(obj, attr, rep(val, f"{prefix}{attr}"))
        elif isinstance(val, dict):
            for k in list(val):
                val[k] = rep(val[k], f"{prefix}{attr}[{k}]")
        elif isinstance(val, list):
            for i in range(len(val)):
                val[i] = rep(val[i], f"{prefix}{attr}[]")


def clone_cache(cache):
    """An independent copy of `cache`: deepcopy, or (if some member cannot be deep-copied) fresh
    layer objects and containers sharing tensors, which decode never writes in place."""
    try:
        return copy.deepcopy(cache)
    except Exception:  # noqa: BLE001
        new = copy.copy(cache)
        new.layers = [copy.copy(layer) for layer in cache.layers]
        for layer in new.layers:
            for attr, val in list(vars(layer).items()):
                if isinstance(val, (dict, list)):
                    setattr(layer, attr, type(val)(val))
        return new


def replicate_cache(cache, batch):
    """A new cache whose every layer holds `batch` copies of the single prefilled row.

    DynamicCache.batch_repeat_interleave (cache_utils.py, DynamicLayer) only repeats `keys` /
    `values`, but V4's DeepseekV4HCACache / DeepseekV4CSACache (modeling_deepseek_v4.py) also
    keep per-row compressor state in dicts (buffer_kv, buffer_gate, compressed_kv, overlap_kv,
    overlap_gate), so we copy the cache and repeat all of its batch-1 tensors ourselves."""
    new = clone_cache(cache)
    layers = getattr(new, "layers", None)
    if layers is None:
        raise RuntimeError(f"unknown cache layout: {type(new).__name__} has no .layers")
    touched = set()
    for layer in layers:
        _repeat_rows(layer, batch, {}, touched, f"{type(layer).__name__}.")
    return new, sorted(touched)


def check_replication(model, cache, vocab):
    """Same token into a 2-row replica and into a 1-row copy: the logits must agree."""
    import torch
    tok = torch.tensor([[vocab // 3]], device="cuda")
    rep, _ = replicate_cache(cache, 2)
    one = clone_cache(cache)
    a = model_forward(model, tok.expand(2, 1).contiguous(), rep).logits.float()
    b = model_forward(model, tok, one).logits.float()
    diff = max((a[0] - b[0]).abs().max().item(), (a[1] - b[0]).abs().max().item())
    del rep, one, a, b
    return diff


# ----------------------------------------------------------------------------------------------
# measurements


def prefill(model, ids, chunk=0):
    """Prefill `ids` [1, N] into a fresh cache (chunked if chunk > 0); returns cache, ms."""
    n = ids.shape[1]
    step = n if chunk <= 0 else chunk
    cache = None
    sync()
    t0 = time.perf_counter()
    for start in range(0, n, step):
        cache = model_forward(model, ids[:, start:start + step], cache).past_key_values
    sync()
    return cache, (time.perf_counter() - t0) * 1e3


def decode(model, cache, batch, steps, vocab, gen):
    """Warm-up + timed decode steps; each row gets a distinct random token every step."""
    import torch
    times = []
    for i in range(WARMUP_DECODE_STEPS + steps):
        ids = torch.randperm(vocab, generator=gen)[:batch].view(batch, 1).cuda()
        sync()
        t0 = time.perf_counter()
        cache = model_forward(model, ids, cache).past_key_values
        sync()
        if i >= WARMUP_DECODE_STEPS:
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def run_config(results, name, fn):
    """Run one measurement; OOM or any other error is recorded and the next one goes on."""
    import torch
    log(f"{name} ...")
    free_memory()
    torch.cuda.reset_peak_memory_stats()
    row = {"name": name}
    try:
        row.update(fn())
    except Exception as e:  # noqa: BLE001 - recorded, benchmark continues
        row["error"] = short_error(e)
        log(f"{name} FAILED: {row['error']}")
    row["peak_gpu_mem_gib"] = gib(torch.cuda.max_memory_allocated())
    results.append(row)
    if "error" not in row:
        log(f"{name}: {row.get('step_ms', 0):.2f} ms, {row.get('tokens_per_s', 0):.1f} tok/s")
    free_memory()
    return row


def main():
    args = parse_args()

    import torch
    import transformers

    if not torch.cuda.is_available():
        raise SystemExit("ERROR: a CUDA GPU is required")
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    env = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(),
        "gpu_total_mem_gib": gib(torch.cuda.get_device_properties(0).total_memory),
    }
    log(f"torch {env['torch']}, transformers {env['transformers']}, {env['gpu']}")

    results = []
    # Loaded outside inference mode: the loaders create/assign nn.Parameters.
    model, load = load_model(args)
    model.eval()
    with torch.inference_mode():
        try:
            desc = describe_model(model)
        except Exception as e:  # noqa: BLE001 - description only
            desc = {"error": short_error(e)}
        log(f"model: {json.dumps(desc, default=str)}")
        vocab = model.config.vocab_size

        # --- prefill -----------------------------------------------------------------------
        def do_prefill():
            warm = random_ids(gen, vocab, min(512, args.prefill_len))
            prefill(model, warm)  # warm-up (kernels, allocator) on a shorter prompt
            del warm
            ids = random_ids(gen, vocab, args.prefill_len)
            _, ms = prefill(model, ids)
            return {"kind": "prefill", "batch": 1, "tokens": args.prefill_len,
                    "step_ms": ms, "tokens_per_s": args.prefill_len / (ms / 1e3)}

        run_config(results, f"prefill {args.prefill_len}", do_prefill)

        # --- decode at each batch size -------------------------------------------------------
        base = {}

        def do_context_prefill():
            base["cache"], ms = prefill(model, random_ids(gen, vocab, args.context))
            try:
                base["replication_check_maxdiff"] = check_replication(model, base["cache"], vocab)
                log(f"replication check: max |logit diff| = {base['replication_check_maxdiff']:.3g}")
            except Exception as e:  # noqa: BLE001
                base["replication_check_error"] = short_error(e)
                log(f"replication check failed: {base['replication_check_error']}")
            return {"kind": "context_prefill", "batch": 1, "tokens": args.context, "step_ms": ms,
                    "tokens_per_s": args.context / (ms / 1e3)}

        ctx_row = run_config(results, f"context prefill {args.context} (for decode)", do_context_prefill)
        for key in ("replication_check_maxdiff", "replication_check_error"):
            if key in base:
                ctx_row[key] = base[key]

        for batch in args.batch_sizes:
            def do_decode(batch=batch):
                if "cache" not in base:
                    raise RuntimeError("context prefill failed, no cache to replicate")
                cache, fields = replicate_cache(base["cache"], batch)
                times = decode(model, cache, batch, args.decode_steps, vocab, gen)
                del cache
                med = statistics.median(times)
                return {"kind": "decode", "batch": batch, "context": args.context, "step_ms": med,
                        "step_ms_all": times, "tokens_per_s": batch / (med / 1e3),
                        "replicated_fields": fields}

            run_config(results, f"decode B={batch} @ ctx {args.context}", do_decode)
        base.clear()
        free_memory()

        # --- long context --------------------------------------------------------------------
        if args.long_context > 0:
            n = args.long_context
            long = {}

            def do_long_prefill():
                long["cache"], ms = prefill(model, random_ids(gen, vocab, n), args.long_prefill_chunk)
                return {"kind": "long_prefill", "batch": 1, "tokens": n, "step_ms": ms,
                        "tokens_per_s": n / (ms / 1e3), "chunk": args.long_prefill_chunk}

            def do_long_decode():
                if "cache" not in long:
                    raise RuntimeError("long-context prefill failed")
                times = decode(model, long.pop("cache"), 1, args.decode_steps, vocab, gen)
                med = statistics.median(times)
                return {"kind": "long_decode", "batch": 1, "context": n, "step_ms": med,
                        "step_ms_all": times, "tokens_per_s": 1 / (med / 1e3)}

            run_config(results, f"long ctx {n}: prefill", do_long_prefill)
            run_config(results, f"long ctx {n}: decode B=1", do_long_decode)
            long.clear()

    # --- report ----------------------------------------------------------------------------
    print(f"\nHF transformers {env['transformers']} reference (eager attention, "
          f"load: {load['method']}, {env['gpu']})\n")
    print("| config | step ms | tokens/s |")
    print("|---|---:|---:|")
    for row in results:
        if "error" in row:
            print(f"| {row['name']} | error | {row['error'].splitlines()[0][:80]} |")
        else:
            print(f"| {row['name']} | {row['step_ms']:.2f} | {row['tokens_per_s']:.1f} |")

    if args.json:
        out = {"env": env, "load": load, "model": desc, "args": vars(args),
               "warmup_decode_steps": WARMUP_DECODE_STEPS, "results": results}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
