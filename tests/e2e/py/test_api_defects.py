"""The API defects of the outside audit (issue 14), through raw HTTP against `deepinfer serve` on
the embedded tiny model: models, batched completions and echo, logprobs offsets, error params
and codes, ids, validation, tool_choice and cancellation of a non-streaming request."""
import json
import os
import re
import socket
import tempfile
import threading
import time

import pytest

from serve_fixture import Server, sse_events

# The scripted completion (serve --debug-scripted-output): reasoning, content, one DSML call, in
# DeepSeek-V4's format (the embedded default model is deepseek_v4).
SCRIPT = ("Let me check.</think>Checking now.\n\n<\uff5cDSML\uff5ctool_calls>\n"
          "<\uff5cDSML\uff5cinvoke name=\"get_weather\">\n"
          "<\uff5cDSML\uff5cparameter name=\"city\" string=\"true\">Paris</\uff5cDSML\uff5cparameter>\n"
          "</\uff5cDSML\uff5cinvoke>\n</\uff5cDSML\uff5ctool_calls>")
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
# Forced calls on a random model: a parameter the grammar can only finish (an enum).
PICK = {"type": "function", "function": {
    "name": "pick_city", "description": "pick",
    "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}},
                   "required": ["city"]}}}
UNICODE_SCRIPT = "a\u00e9\u4f60\u597d b \U0001F600 z"


@pytest.fixture(scope="module")
def srv():
    s = Server("--served-model-name", "tiny", "tiny-alias", "--max-model-len", "4096")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def scripted():
    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8")
    f.write(SCRIPT)
    f.close()
    s = Server("--debug-scripted-output", f.name)
    yield s
    s.stop()
    os.unlink(f.name)


def chat(messages, **kw):
    return dict({"messages": messages, "max_tokens": 8, "temperature": 0}, **kw)


USER = [{"role": "user", "content": "What is the weather in Paris?"}]


# ---- models -------------------------------------------------------------------------------

def test_models_list_every_alias_and_retrieve_one(srv):
    _, _, body = srv.request("GET", "/v1/models")
    assert [m["id"] for m in json.loads(body)["data"]] == ["tiny", "tiny-alias"]
    status, _, body = srv.request("GET", "/v1/models/tiny-alias")
    model = json.loads(body)
    assert status == 200 and model["id"] == "tiny-alias" and model["object"] == "model"
    status, _, body = srv.request("GET", "/v1/models/nope")
    assert status == 404 and json.loads(body)["error"]["code"] == "model_not_found"


def test_unknown_model_is_404_model_not_found_and_aliases_serve(srv):
    status, _, body = srv.post("/v1/chat/completions", chat(USER, model="gpt-4"))
    assert status == 404, body
    assert body["error"]["code"] == "model_not_found" and body["error"]["param"] == "model"
    status, _, body = srv.post("/v1/chat/completions", chat(USER, model="tiny-alias"))
    assert status == 200 and body["model"] == "tiny-alias"


# ---- completions: batches and echo -----------------------------------------------------------

def test_batched_string_prompts_give_prompt_major_choice_indices(srv):
    status, _, body = srv.post("/v1/completions", {"prompt": ["Hello", "Good morning"], "n": 2,
                                                   "max_tokens": 3, "seed": 1})
    assert status == 200, body
    assert sorted(c["index"] for c in body["choices"]) == [0, 1, 2, 3]
    # Each prompt alone (greedy) gives the text its choices in the batch give.
    for i, prompt in enumerate(["Hello", "Good morning"]):
        _, _, alone = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": 3,
                                                   "temperature": 0})
        _, _, batch = srv.post("/v1/completions", {"prompt": ["Hello", "Good morning"],
                                                   "max_tokens": 3, "temperature": 0})
        got = {c["index"]: c["text"] for c in batch["choices"]}
        assert got[i] == alone["choices"][0]["text"]
    assert body["usage"]["prompt_tokens"] > 0


def test_batched_token_id_prompts_and_streaming_indices(srv):
    status, _, body = srv.post("/v1/completions", {"prompt": [[1, 2, 3], [4, 5]],
                                                   "max_tokens": 2, "temperature": 0})
    assert status == 200 and sorted(c["index"] for c in body["choices"]) == [0, 1]
    status, _, raw = srv.request("POST", "/v1/completions", {
        "prompt": ["a", "b", "c"], "max_tokens": 2, "stream": True, "temperature": 0})
    assert status == 200
    indices = {c["index"] for e in sse_events(raw) for c in e["choices"]}
    assert indices == {0, 1, 2}


def test_echo_prepends_the_prompt(srv):
    _, _, plain = srv.post("/v1/completions", {"prompt": "Hello there", "max_tokens": 3,
                                               "temperature": 0})
    status, _, body = srv.post("/v1/completions", {"prompt": "Hello there", "max_tokens": 3,
                                                   "temperature": 0, "echo": True})
    assert status == 200
    assert body["choices"][0]["text"] == "Hello there" + plain["choices"][0]["text"]
    status, _, raw = srv.request("POST", "/v1/completions", {
        "prompt": "Hello there", "max_tokens": 3, "temperature": 0, "echo": True,
        "stream": True})
    streamed = "".join(c["text"] for e in sse_events(raw) for c in e["choices"])
    assert streamed == body["choices"][0]["text"]


# ---- logprobs -------------------------------------------------------------------------------

def test_completion_text_offset_counts_characters(tmp_path):
    script = tmp_path / "unicode.txt"
    script.write_text(UNICODE_SCRIPT, encoding="utf-8")
    s = Server("--debug-scripted-output", str(script))
    try:
        req = {"max_tokens": 40, "temperature": 0, "logprobs": True}
        _, _, chat_body = s.post("/v1/chat/completions", dict(req, messages=USER))
        token_bytes = [bytes(t["bytes"]) for t in chat_body["choices"][0]["logprobs"]["content"]]
        status, _, body = s.post("/v1/completions", {"prompt": "x", "max_tokens": 40,
                                                     "temperature": 0, "logprobs": 0})
        assert status == 200
        choice = body["choices"][0]
        offsets = choice["logprobs"]["text_offset"]
        # Independently: each token starts at the character holding its first byte.
        text = b"".join(token_bytes)
        want, pos = [], 0
        for tb in token_bytes:
            want.append(len(text[:pos].decode("utf-8", errors="ignore")))
            pos += len(tb)
        assert choice["text"].startswith(UNICODE_SCRIPT)
        assert offsets == want[:len(offsets)]
        assert any(len(tb) != len(tb.decode("utf-8", errors="ignore")) for tb in token_bytes), \
            "the script must have multi-byte characters"
    finally:
        s.stop()


# ---- errors name the field and carry a code ----------------------------------------------------

@pytest.mark.parametrize("body,param", [
    ({"prompt": "x", "stop": 5}, "stop"),
    ({"prompt": "x", "stop": ["a", 3]}, "stop"),
    ({"prompt": "x", "max_tokens": 100000}, "max_tokens"),
    ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "response_format": {"type": "json_schema",
                                         "json_schema": {"name": "t", "schema": {
                                             "type": "string", "pattern": "(?<"}}}},
     "response_format"),
])
def test_errors_name_their_field_and_have_a_code(srv, body, param):
    status, _, resp = srv.post("/v1/completions", dict({"max_tokens": 2}, **body))
    assert status == 400, resp
    assert resp["error"]["param"] == param, resp
    assert isinstance(resp["error"]["code"], str) and resp["error"]["code"]


def test_max_tokens_beyond_the_context_is_context_length_exceeded(srv):
    status, _, resp = srv.post("/v1/completions", {"prompt": "x", "max_tokens": 5000})
    assert status == 400
    assert resp["error"]["code"] == "context_length_exceeded"


def test_every_error_has_a_code(srv):
    for method, path, body in [("GET", "/nope", None), ("POST", "/v1/completions", "{bad"),
                               ("POST", "/v1/completions", {"prompt": 3}),
                               ("POST", "/v1/chat/completions", {"messages": []})]:
        status, _, raw = srv.request(method, path, body)
        assert status >= 400
        assert json.loads(raw)["error"]["code"], (path, raw)


# ---- ids and validation ------------------------------------------------------------------------

def test_response_ids_are_unique_and_unpredictable(srv):
    ids = set()
    for _ in range(8):
        _, _, body = srv.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
        ids.add(body["id"])
    assert len(ids) == 8
    for i in ids:
        assert re.fullmatch(r"cmpl-[0-9A-Za-z]{20,}", i), i


def test_user_message_without_content_is_400(srv):
    for msg in [{"role": "user"}, {"role": "user", "content": None}]:
        status, _, resp = srv.post("/v1/chat/completions", chat([msg]))
        assert status == 400, resp
        assert resp["error"]["param"] == "messages[0].content"


# ---- tool calls ---------------------------------------------------------------------------------

def test_tool_calls_parsed_only_when_tools_are_offered(scripted):
    status, _, with_tools = scripted.post("/v1/chat/completions", chat(
        USER, tools=[WEATHER], max_tokens=200, chat_template_kwargs={"thinking": True}))
    assert status == 200, with_tools
    calls = with_tools["choices"][0]["message"]["tool_calls"]
    assert calls[0]["function"]["name"] == "get_weather"
    assert calls[0]["id"].startswith("call_")
    for kw in [{}, {"tools": [WEATHER], "tool_choice": "none"}]:
        status, _, body = scripted.post("/v1/chat/completions", chat(
            USER, max_tokens=200, chat_template_kwargs={"thinking": True}, **kw))
        assert status == 200, body
        msg = body["choices"][0]["message"]
        assert not msg.get("tool_calls"), kw
        assert "get_weather" in msg["content"], kw
        assert body["choices"][0]["finish_reason"] == "stop"


def test_tool_call_ids_are_unique_across_choices(scripted):
    status, _, body = scripted.post("/v1/chat/completions", chat(
        USER, tools=[WEATHER], max_tokens=200, n=3, chat_template_kwargs={"thinking": True}))
    assert status == 200
    ids = [c["message"]["tool_calls"][0]["id"] for c in body["choices"]]
    assert len(set(ids)) == 3


def test_streamed_output_that_breaks_the_chat_format_ends_with_an_error_event(scripted, tmp_path):
    # The well-formed script streams without an error event.
    status, _, raw = scripted.request("POST", "/v1/chat/completions", chat(
        USER, tools=[WEATHER], max_tokens=200, stream=True,
        chat_template_kwargs={"thinking": True}))
    assert status == 200
    assert not [e for e in sse_events(raw) if "error" in e]
    # Text after the tool calls (an audit case): what was streamed stays, then an error event
    # tells the client, then [DONE].
    script = tmp_path / "trailing.txt"
    script.write_text(SCRIPT + "trailing words", encoding="utf-8")
    s = Server("--debug-scripted-output", str(script))
    try:
        status, _, raw = s.request("POST", "/v1/chat/completions", chat(
            USER, tools=[WEATHER], max_tokens=200, stream=True,
            chat_template_kwargs={"thinking": True}))
        assert status == 200
        events = sse_events(raw)
        errors = [e for e in events if "error" in e]
        assert len(errors) == 1, events
        assert errors[0]["error"]["code"] == "malformed_model_output"
        assert "unexpected content after tool calls" in errors[0]["error"]["message"]
        assert raw.decode().rstrip().endswith("data: [DONE]")
        streamed = "".join(c["delta"].get("content") or "" for e in events
                           for c in e.get("choices", []))
        assert "trailing words" in streamed  # the lenient reading was streamed
        # Cut by max_tokens, the same output is incomplete, not malformed: no error event.
        status, _, raw = s.request("POST", "/v1/chat/completions", chat(
            USER, tools=[WEATHER], max_tokens=5, stream=True,
            chat_template_kwargs={"thinking": True}))
        assert status == 200
        assert not [e for e in sse_events(raw) if "error" in e]
    finally:
        s.stop()


@pytest.mark.parametrize("choice", ["required",
                                    {"type": "function", "function": {"name": "pick_city"}}])
def test_forced_tool_choice_yields_a_parsable_call(srv, choice):
    status, _, body = srv.post("/v1/chat/completions", chat(
        USER, tools=[PICK], tool_choice=choice, max_tokens=400))
    assert status == 200, body
    c = body["choices"][0]
    if c["finish_reason"] == "length":
        pytest.fail("the random model did not finish a call in 400 tokens: %r" % c)
    assert c["finish_reason"] == "tool_calls", c
    call = c["message"]["tool_calls"][0]
    assert call["function"]["name"] == "pick_city"
    assert json.loads(call["function"]["arguments"])["city"] in ("Paris", "Rome")


def test_named_tool_choice_must_name_an_offered_tool(srv):
    status, _, body = srv.post("/v1/chat/completions", chat(
        USER, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "x"}}))
    assert status == 400 and body["error"]["param"] == "tool_choice"


# ---- cancellation ---------------------------------------------------------------------------------

def test_non_streaming_request_is_cancelled_when_its_client_leaves(srv):
    before = srv.metric("deepinfer:request_success_total", 'finished_reason="abort"')
    body = json.dumps({"prompt": "Hello", "max_tokens": 3000, "ignore_eos": True}).encode()
    with srv.connect() as c:
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                  b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        for _ in range(600):  # until it runs
            if srv.metric("deepinfer:num_requests_running") >= 1:
                break
            time.sleep(0.02)
    # Closed: the engine request is aborted long before its 3000 tokens.
    for _ in range(600):
        if srv.metric("deepinfer:request_success_total", 'finished_reason="abort"') > before:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the request was not cancelled")
    assert srv.metric("deepinfer:num_requests_running") == 0


def test_default_max_tokens_counts_the_prompt_as_it_is_tokenized():
    """Special-token text in content is tokenized as plain text (several ids each, not one), so
    the chat default max_tokens (context minus prompt) must count the prompt that way too."""
    s = Server("--max-model-len", "300")
    try:
        content = "<\uff5cAssistant\uff5c>" * 10 + " hello"
        status, _, body = s.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": content}], "temperature": 0})
        assert status == 200, body
        u = body["usage"]
        assert u["prompt_tokens"] + u["completion_tokens"] <= 300
    finally:
        s.stop()
