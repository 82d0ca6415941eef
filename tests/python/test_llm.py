"""The Python API on the embedded default model (created in DEEPINFER_CACHE_DIR by ctest)."""
import os
import subprocess
import sys

import pytest

from deepinfer import LLM, SamplingParams

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def llm():
    return LLM()


def test_greedy_generate_is_deterministic_and_bounded(llm):
    p = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    a = llm.generate(["Hello world", "abc"], p)
    b = llm.generate(["Hello world"], p)
    assert len(a) == 2
    assert len(a[0].outputs[0].token_ids) == 8
    assert a[0].outputs[0].finish_reason == "length"
    assert a[0].outputs[0].token_ids == b[0].outputs[0].token_ids
    assert a[0].prompt == "Hello world"


def test_prompt_token_ids_and_logprobs(llm):
    p = SamplingParams(temperature=0, max_tokens=3, logprobs=2, ignore_eos=True)
    out = llm.generate([[10, 20, 30]], p)[0]
    assert out.prompt_token_ids == [10, 20, 30]
    lps = out.outputs[0].logprobs
    assert len(lps) == 3
    for tok, lp in zip(out.outputs[0].token_ids, lps):
        assert lp["token"] == tok
        assert len(lp["top"]) == 2
        assert lp["top"][0][0] == tok  # greedy picks the most likely token
        assert lp["logprob"] <= 0.0


def test_seeded_sampling_and_n(llm):
    p = SamplingParams(temperature=1.0, seed=3, max_tokens=6, n=2, ignore_eos=True)
    a = llm.generate("Once", p)[0]
    b = llm.generate("Once", p)[0]
    assert [c.token_ids for c in a.outputs] == [c.token_ids for c in b.outputs]
    assert len(a.outputs) == 2


def test_chat_uses_the_recipe(llm):
    out = llm.chat([{"role": "user", "content": "Hi"}], SamplingParams(temperature=0, max_tokens=4))
    assert len(out[0].prompt_token_ids) > 2
    assert out[0].prompt_token_ids[0] == 0  # the recipe starts with BOS


def test_bad_params_name_the_field(llm):
    with pytest.raises(ValueError, match="top_p"):
        llm.generate("x", SamplingParams(top_p=2.0))


def test_example_runs():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "offline_inference.py")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "chat:" in r.stdout


def test_prefix_cache_hit_is_reported_and_changes_nothing(llm):
    # 300 prompt tokens: the second run starts from the cached 256 (two 128-token blocks; a
    # start point always leaves a token to compute), and its tokens equal a cache-off engine's.
    prompt = [1000 + (i * 7919) % 50000 for i in range(300)]
    p = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    first = llm.generate([prompt], p)[0]
    second = llm.generate([prompt], p)[0]
    assert first.usage["prompt_tokens"] == 300
    assert second.usage["prompt_tokens_details"]["cached_tokens"] == 256
    assert second.usage["prompt_cache_hit_tokens"] == 256
    assert second.usage["prompt_cache_miss_tokens"] == 44
    off = LLM(enable_prefix_cache=False)
    ref = off.generate([prompt], p)[0]
    assert ref.usage["prompt_tokens_details"]["cached_tokens"] == 0
    assert second.outputs[0].token_ids == ref.outputs[0].token_ids == first.outputs[0].token_ids
    with pytest.raises(ValueError, match="cache_retention"):
        llm.generate([prompt], p, cache_retention="forever")


def test_switches_are_arguments_and_keep_outputs(llm):
    # seq_seed: the same tokens alone and beside other prompts; YOCO compact truncation leaves
    # them unchanged; bad switch values name the argument.
    p = SamplingParams(temperature=1.0, seq_seed=11, max_tokens=6, ignore_eos=True)
    alone = llm.generate("Once upon", p)[0].outputs[0].token_ids
    beside = llm.generate(["x y z", "Once upon", "a"], p)[1].outputs[0].token_ids
    assert alone == beside
    other = SamplingParams(temperature=1.0, seq_seed=12, max_tokens=6, ignore_eos=True)
    assert llm.generate("Once upon", other)[0].outputs[0].token_ids != alone
    cut = LLM(yoco_prefill_truncation_mode="compact", yoco_prefill_keep_tokens=2,
              batch_invariant=True)
    assert cut.generate("Once upon", p)[0].outputs[0].token_ids == alone
    with pytest.raises(ValueError, match="yoco_prefill_truncation_mode"):
        LLM(yoco_prefill_truncation_mode="everything")
    with pytest.raises(ValueError, match="batch_invariant"):
        LLM(batch_invariant="yes")


def test_a_prompt_the_pool_cannot_hold_raises_with_the_reason():
    # The engine takes the request, then the scheduler finds it can never fit: LLM.generate
    # raises with that reason (it once returned an empty output with finish_reason "abort").
    small = LLM(kv_memory_bytes=200000)
    with pytest.raises(ValueError, match="raise --kv-memory"):
        small.generate([list(range(2, 900))], SamplingParams(max_tokens=4))
