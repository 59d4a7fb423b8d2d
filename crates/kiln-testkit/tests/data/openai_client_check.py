"""Drives kiln-testkit's fake LM endpoint with the official `openai` Python client.

The fake must answer what real clients expect: completions, usage, models, and errors the
client maps to its own exception classes, with `retry-after` honoured. Run by the kiln-testkit
integration test `fake_lm::the_official_openai_client_accepts_the_fake`, which starts the fake
and sets FAKE_LM_URL and FAKE_LM_KEY.
"""

import json
import os
import time

import openai

base_url = os.environ["FAKE_LM_URL"]
key = os.environ["FAKE_LM_KEY"]
client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=2, timeout=10)
checks = 0


def check(condition, what):
    global checks
    assert condition, what
    checks += 1


def ask(text, client=client, **options):
    return client.chat.completions.create(
        model="fake-judge-1",
        messages=[{"role": "system", "content": "You judge tasks."}, {"role": "user", "content": text}],
        **options,
    )


models = client.models.list()
check([m.id for m in models.data] == ["fake-judge-1"], f"models: {models}")

schema = {
    "type": "object",
    "properties": {"label": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["label", "reason"],
    "additionalProperties": False,
}
answer = ask(
    "say-ok",
    response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}},
    temperature=0,
    max_tokens=64,
)
check(answer.object == "chat.completion", f"object: {answer.object}")
check(answer.id.startswith("chatcmpl-"), f"id: {answer.id}")
check(answer.model == "fake-judge-1", f"model: {answer.model}")
check(answer.choices[0].finish_reason == "stop", f"finish_reason: {answer.choices[0].finish_reason}")
check(answer.choices[0].message.role == "assistant", "role")
check(json.loads(answer.choices[0].message.content)["label"] == "ok", answer.choices[0].message.content)
usage = answer.usage
check(usage.prompt_tokens > 0 and usage.completion_tokens > 0, f"usage: {usage}")
check(usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, f"usage total: {usage}")

# A 429 with retry-after: 1 is retried by the client itself, after the wait it names.
started = time.monotonic()
answer = ask("rate-limit-once")
check(time.monotonic() - started >= 0.9, "the client waited for retry-after")
check(json.loads(answer.choices[0].message.content)["label"] == "ok", "answer after the 429")

try:
    ask("server-error", client=client.with_options(max_retries=0))
    check(False, "a 500 must raise")
except openai.InternalServerError as e:
    check(e.status_code == 500, f"status {e.status_code}")
    check(e.type == "server_error", f"type {e.type}")
    check("server had an error" in e.message, e.message)

try:
    ask("slow", client=client.with_options(max_retries=0, timeout=0.5))
    check(False, "a slow answer must time out")
except openai.APITimeoutError:
    check(True, "timeout")

answer = ask("refuse")
check(answer.choices[0].message.content is None, "refusal has no content")
check(answer.choices[0].message.refusal == "I can't help with that.", "refusal text")

# Tool calling: the client parses the fake's tool_calls, and accepts a conversation that
# answers them with tool messages.
tools = [{"type": "function", "function": {
    "name": "run", "description": "runs a shell command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
answer = client.chat.completions.create(
    model="fake-judge-1", messages=[{"role": "user", "content": "call-run"}], tools=tools, tool_choice="required")
message = answer.choices[0].message
check(answer.choices[0].finish_reason == "tool_calls", f"finish_reason: {answer.choices[0].finish_reason}")
check(message.content is None, "a tool call has no content")
call = message.tool_calls[0]
check(call.type == "function" and call.function.name == "run", f"call: {call}")
check(json.loads(call.function.arguments) == {"command": "ls"}, f"arguments: {call.function.arguments}")
answer = client.chat.completions.create(
    model="fake-judge-1",
    messages=[
        {"role": "user", "content": "call-run"},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "file.txt"},
    ],
    tools=tools,
)
check(answer.choices[0].message.content is not None, "an answer after the tool's result")

try:
    openai.OpenAI(base_url=base_url, api_key="sk-wrong-key", max_retries=0).models.list()
    check(False, "a wrong key must be refused")
except openai.AuthenticationError as e:
    check(e.status_code == 401 and e.code == "invalid_api_key", f"401: {e.code}")

try:
    client.chat.completions.create(model="fake-judge-1", messages=[])
    check(False, "empty messages must be refused")
except openai.BadRequestError as e:
    check(e.param == "messages", f"param {e.param}")

try:
    client.with_options(max_retries=0).get("/nowhere", cast_to=object)
    check(False, "an unknown path must be a 404")
except openai.NotFoundError as e:
    check(e.code == "unknown_url", f"404 code {e.code}")

print(f"openai {openai.__version__}: {checks} checks passed")
