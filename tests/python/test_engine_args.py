"""LLM's device and memory arguments: device (None: $DEEPINFER_ACCELERATOR, else cpu), numerics
and gpu_memory_utilization. Bad values raise ValueError naming the argument."""
import json

import pytest

from deepinfer import LLM, SamplingParams, _deepinfer


def test_device_cpu_generates_and_reports_its_capacity(monkeypatch):
    monkeypatch.delenv("DEEPINFER_ACCELERATOR", raising=False)
    llm = LLM(device="cpu")
    out = llm.generate([[1, 2, 3]], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    assert len(out[0].outputs[0].token_ids) == 4
    cap = llm.capacity
    assert cap["device"] == "cpu"
    assert cap["numerics"] == "official"  # numerics="auto" on cpu
    assert cap["weight_bytes"] > 0 and cap["num_pages"] > 0 and cap["max_sequences"] > 0


def test_unknown_device_names_device():
    with pytest.raises(ValueError, match="device must be cpu or cuda.*'bogus'"):
        LLM(device="bogus")
    with pytest.raises(ValueError, match="device"):
        LLM(device=3)


def test_unknown_accelerator_variable_names_it(monkeypatch):
    monkeypatch.setenv("DEEPINFER_ACCELERATOR", "bogus")
    with pytest.raises(ValueError, match="DEEPINFER_ACCELERATOR"):
        LLM()
    # An explicit device does not read the variable.
    assert LLM(device="cpu").capacity["device"] == "cpu"


@pytest.mark.parametrize("value", [0, 0.0, -0.5, 1.5, float("nan"), "0.5", True])
def test_gpu_memory_utilization_out_of_range_names_it(value):
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        LLM(device="cpu", gpu_memory_utilization=value)


def test_the_bridge_checks_gpu_memory_utilization_too():
    with pytest.raises(ValueError, match=r"gpu_memory_utilization must be in \(0, 1\]"):
        _deepinfer.Engine(json.dumps({"device": "cpu", "gpu_memory_utilization": 2.0}))


def test_numerics_plain_on_cpu():
    assert LLM(device="cpu", numerics="plain").capacity["numerics"] == "plain"
