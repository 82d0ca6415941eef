"""deepinfer: offline inference for DeepSeek-V4 models, with vLLM-style classes.

    from deepinfer import LLM, SamplingParams
    llm = LLM()                       # the embedded default tiny model
    outs = llm.generate(["Hello"], SamplingParams(temperature=0, max_tokens=8))
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from . import _deepinfer

_ASSETS = os.environ.get("DEEPINFER_ASSETS_DIR", os.path.join(os.path.dirname(__file__), "assets"))


@dataclass
class SamplingParams:
    """Field names and defaults follow vLLM's SamplingParams where both have the field."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: Optional[dict] = None
    seed: Optional[int] = None
    # Deterministic sampling (DeepSeek's seq_seed): the draw for output token i depends only on
    # (seq_seed, i); it takes precedence over seed.
    seq_seed: Optional[int] = None
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    stop: Optional[Union[str, list]] = None
    stop_token_ids: Optional[list] = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    logprobs: Optional[int] = None
    skip_special_tokens: bool = True
    # Structured output: exactly one of {"regex": str}, {"json_schema": dict | bool | str},
    # {"ebnf": str} (start rule `root`), {"json_object": True}. Errors come from generate().
    so_args: Optional[dict] = None

    def _to_json(self) -> dict:
        d = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        if isinstance(d.get("so_args"), dict) and not isinstance(
                d["so_args"].get("json_schema", ""), str):
            # As text, so the engine keeps the schema's property order.
            d["so_args"] = dict(d["so_args"], json_schema=json.dumps(d["so_args"]["json_schema"]))
        if isinstance(d.get("stop"), str):
            d["stop"] = [d["stop"]]
        if "logit_bias" in d:
            d["logit_bias"] = {str(k): v for k, v in d["logit_bias"].items()}
        return d


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list
    finish_reason: Optional[str]
    stop_reason: Optional[str] = None
    logprobs: Optional[list] = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: list
    outputs: list = field(default_factory=list)
    finished: bool = True
    # prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens (prefix-cache hits),
    # prompt_cache_hit_tokens and prompt_cache_miss_tokens, as the server reports them.
    usage: dict = field(default_factory=dict)


class LLM:
    """An engine over one model directory (None: $DEEPINFER_HF_MODEL_DIR, else the default).

    device: "cpu" or "cuda" ("nvidia"); None: $DEEPINFER_ACCELERATOR (nvidia | cpu), else cpu.
    numerics: "auto" (official on cpu, plain on cuda), "official" or "plain".
    gpu_memory_utilization: cuda only, the fraction of the GPU's memory for weights and the KV
    pool, in (0, 1]. kv_memory_bytes sizes the pool (0, the default: 1 GiB on cpu, on cuda
    what gpu_memory_utilization leaves after the weights). Other engine_args: max_num_seqs,
    max_num_batched_tokens, max_model_len, policy, seed, cuda_graphs,
    special_tokens_in_content, json_whitespace ("bounded" | "flexible"), and the prefix cache's enable_prefix_cache (default True),
    kv_host_memory_bytes, kv_disk_dir, kv_disk_bytes, kv_cluster_dir, kv_cluster_bytes,
    kv_cluster_redis, kv_cache_interval, kv_retention_agent_s, kv_retention_chat_s and
    kv_cache_salt (the serve flags of the same names), and DeepSeek's switches
    batch_invariant (bool), yoco_prefill_truncation_mode ("off" | "compact"),
    yoco_prefill_keep_tokens (int), enable_mtp (bool; CPU runner) and
    num_speculative_tokens (int), which default to DEEPINFER_BATCH_INVARIANT,
    DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE, DEEPINFER_YOCO_PREFILL_KEEP_TOKENS,
    DEEPINFER_ENABLE_MTP_VARLEN and DEEPINFER_USE_NEXTN_DECODE. Bad values raise ValueError
    naming the argument.
    """

    def __init__(self, model: Optional[str] = None, device: Optional[str] = None,
                 numerics: str = "auto", gpu_memory_utilization: float = 0.9,
                 **engine_args: Any):
        model = model or os.environ.get("DEEPINFER_HF_MODEL_DIR") or ""
        args = dict(engine_args, model=model, device=device, numerics=numerics,
                    gpu_memory_utilization=gpu_memory_utilization,
                    tokenizer_dir=os.path.join(_ASSETS, "tokenizers", "deepseek_v3"))
        if device is not None and not isinstance(device, str):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
        if isinstance(gpu_memory_utilization, bool) or not isinstance(
                gpu_memory_utilization, (int, float)) or not 0 < gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must be a number in (0, 1], got "
                             f"{gpu_memory_utilization!r}")
        self._engine = _deepinfer.Engine(json.dumps(args))

    @property
    def capacity(self) -> dict:
        """device, device_name, numerics, weight_bytes, num_pages, page_bytes, max_tokens
        (one sequence at most) and max_sequences, as the engine sized them."""
        return json.loads(self._engine.capacity())

    def generate(self, prompts: Union[str, Sequence[Union[str, Sequence[int]]]],
                 sampling_params: Optional[SamplingParams] = None,
                 cache_retention: Optional[str] = None) -> list:
        """cache_retention: "agent" (3 days), "chat" (7 days) or "none" (store nothing); None:
        chat."""
        if isinstance(prompts, str):
            prompts = [prompts]
        params = (sampling_params or SamplingParams())._to_json()
        reqs = []
        for p in prompts:
            key = "prompt" if isinstance(p, str) else "prompt_token_ids"
            r = {key: p if isinstance(p, str) else list(p), "params": params}
            if cache_retention is not None:
                r["cache_retention"] = cache_retention
            reqs.append(json.dumps(r))
        return [self._wrap(o, p if isinstance(p, str) else None)
                for o, p in zip(self._engine.generate(reqs), prompts)]

    def chat(self, messages: Union[list, Sequence[list]],
             sampling_params: Optional[SamplingParams] = None,
             cache_retention: Optional[str] = None, **chat_kwargs: Any) -> list:
        """messages: one OpenAI-style conversation or a list of them; chat_kwargs go into the
        request (tools, thinking, reasoning_effort, chat_template_kwargs, ...).
        cache_retention: as generate's; None: "agent" with tools, else "chat"."""
        convs = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        params = (sampling_params or SamplingParams())._to_json()
        extra = {} if cache_retention is None else {"cache_retention": cache_retention}
        reqs = [json.dumps(dict(extra, chat=dict(chat_kwargs, messages=m), params=params))
                for m in convs]
        return [self._wrap(o, None) for o in self._engine.generate(reqs)]

    @staticmethod
    def _wrap(text: str, prompt: Optional[str]) -> RequestOutput:
        o = json.loads(text)
        outs = [CompletionOutput(c["index"], c["text"], c["token_ids"], c["finish_reason"],
                                 c.get("stop_reason"), c.get("logprobs")) for c in o["outputs"]]
        return RequestOutput(o["request_id"], prompt, o["prompt_token_ids"], outs,
                             usage=o.get("usage", {}))


__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput"]
