#!/usr/bin/env python3
"""Offline inference with deepinfer's Python API.

Runs on $DEEPINFER_HF_MODEL_DIR when set, else on the embedded default tiny model, on the device
$DEEPINFER_ACCELERATOR names (nvidia | cpu), else the CPU:
    PYTHONPATH=build/python python3 examples/offline_inference.py
    DEEPINFER_ACCELERATOR=nvidia DEEPINFER_HF_MODEL_DIR=/tmp/m8 \
        PYTHONPATH=build/python python3 examples/offline_inference.py
"""
import os

from deepinfer import LLM, SamplingParams

# Or LLM(model, device="cuda", gpu_memory_utilization=0.9) to choose the device here.
llm = LLM(model=os.environ.get("DEEPINFER_HF_MODEL_DIR"))
print("running on", llm.capacity["device"], "with numerics", llm.capacity["numerics"])
prompts = ["The capital of France is", "def fibonacci(n):", "DeepSeek-V4 is"]
greedy = SamplingParams(temperature=0, max_tokens=16)
for out in llm.generate(prompts, greedy):
    print(f"{out.prompt!r} -> {out.outputs[0].text!r} ({out.outputs[0].finish_reason})")

sampled = SamplingParams(temperature=0.8, top_p=0.95, seed=7, max_tokens=16, n=2)
for out in llm.generate("Once upon a time", sampled):
    for c in out.outputs:
        print(f"sample {c.index}: {c.text!r}")

chat = llm.chat([{"role": "user", "content": "Hello! Who are you?"}],
                SamplingParams(temperature=0, max_tokens=16))
print("chat:", repr(chat[0].outputs[0].text))
