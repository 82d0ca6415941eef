"""SamplingParams(so_args=...) on the embedded default model: outputs are checked by Python's
re / json, which share no code with the engine's grammar matcher."""
import json
import os
import re

import pytest

from deepinfer import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm():
    return LLM()


@pytest.mark.parametrize("temperature,seed", [(0.0, None), (1.0, 1), (1.0, 2)])
def test_regex_outputs_fullmatch(llm, temperature, seed):
    pattern = r"[a-z]{1,6}-[0-9]{2,4}( (ok|fail))?"
    p = SamplingParams(temperature=temperature, seed=seed, max_tokens=64,
                       so_args={"regex": pattern})
    out = llm.generate(["Code:", "Result"], p)
    for o in out:
        c = o.outputs[0]
        assert c.finish_reason == "stop", c
        assert re.fullmatch(pattern, c.text), c.text


def test_ebnf_output_and_seeded_reproducibility(llm):
    grammar = 'root ::= "(" item (" " item){0,3} ")"\nitem ::= [0-9] | "x"'
    p = SamplingParams(temperature=1.0, seed=5, max_tokens=64, so_args={"ebnf": grammar})
    a = llm.generate(["List:"], p)[0].outputs[0]
    b = llm.generate(["List:"], p)[0].outputs[0]
    assert a.token_ids == b.token_ids
    assert re.fullmatch(r"\((?:[0-9]|x)(?: (?:[0-9]|x)){0,3}\)", a.text), a.text


def test_bad_so_args_raise_naming_the_field(llm):
    with pytest.raises(ValueError, match=r"so_args\.regex"):
        llm.generate(["x"], SamplingParams(so_args={"regex": "(unclosed"}))
    with pytest.raises(ValueError, match=r"so_args\.ebnf"):
        llm.generate(["x"], SamplingParams(so_args={"ebnf": "root ::= undefined_rule"}))
    with pytest.raises(ValueError, match="exactly one of"):
        llm.generate(["x"], SamplingParams(so_args={"regex": "a", "ebnf": 'root ::= "a"'}))


@pytest.mark.parametrize("temperature,seed", [(0.0, None), (1.0, 4)])
def test_json_schema_outputs_validate(llm, temperature, seed):
    jsonschema = pytest.importorskip("jsonschema")
    # Properties out of alphabetical order: the dict's order must reach the engine.
    schema = {"type": "object",
              "properties": {"zeta": {"enum": ["x", "y"]},
                             "alpha": {"type": "integer", "minimum": -5, "maximum": 5}},
              "required": ["zeta", "alpha"], "additionalProperties": False}
    p = SamplingParams(temperature=temperature, seed=seed, max_tokens=300,
                       so_args={"json_schema": schema})
    c = llm.generate(["JSON:"], p)[0].outputs[0]
    assert c.finish_reason == "stop", c
    doc = json.loads(c.text)
    jsonschema.validate(doc, schema)
    assert list(doc) == ["zeta", "alpha"]


def test_json_object_outputs_parse(llm):
    # json_object admits unbounded documents: a pull towards closing tokens (still masked by the
    # grammar) makes them end. Printable ASCII maps to itself in the byte-level vocabulary.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "assets", "tokenizers", "deepseek_v3", "tokenizer.json")) as f:
        vocab = json.load(f)["model"]["vocab"]
    pulls = [('"}', 14.0), ("}", 13.0), ('"', 12.0), ("]", 11.0), ("1", 8.0), (":", 8.0)]
    bias = {vocab[t]: b for t, b in pulls}
    for temperature, seed in [(0.0, None), (1.0, 1), (1.0, 2), (1.0, 3)]:
        p = SamplingParams(temperature=temperature, seed=seed, max_tokens=300, logit_bias=bias,
                           so_args={"json_object": True})
        c = llm.generate(["JSON:"], p)[0].outputs[0]
        assert c.finish_reason == "stop", c
        assert isinstance(json.loads(c.text), dict), c.text
