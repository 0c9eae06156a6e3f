"""The real Claude Code at work in a node project, through ai-sandbox: its tools read the code, never the secrets.

A local stub of the Anthropic API (anthropic_stub.py) plays the model: it makes Claude Code call its own
tools — Read, Grep, Glob, Bash, Write — on the project, and records every tool result Claude Code sends back.
What a tool returned is what the model would have seen, so "the secret is in no recorded request" is
the claim that matters. The control runs the same script without ai-sandbox and finds the secrets there,
so the assertions can fail.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.workflows.anthropic_stub import SIDE_ANSWER, AnthropicStub, Step, ToolCall, tool_id
from tests.workflows.conftest import NodeProject, Run, run_direct, run_sandboxed

pytestmark = [pytest.mark.agents, pytest.mark.sandbox]


def bash(command: str) -> ToolCall:
    return ToolCall("Bash", {"command": command, "description": "scripted step"})


def reads_script(p: NodeProject) -> list[Step]:
    repo = str(p.repo)
    return [
        [ToolCall("Read", {"file_path": f"{repo}/src/greet.js"}), ToolCall("Read", {"file_path": f"{repo}/.env"})],
        [
            # patterns that match the tokens without containing them: the script itself must not leak them
            ToolCall("Grep", {"pattern": "ENVSECRET-[0-9a-f]{16}", "path": repo, "output_mode": "content"}),
            ToolCall("Grep", {"pattern": "TFSECRET-[0-9a-f]{16}", "path": repo, "output_mode": "content"}),
        ],
        [ToolCall("Glob", {"pattern": "**/*", "path": repo})],
        [bash("cat .env prod.tfvars")],
        [ToolCall("Read", {"file_path": f"{repo}/prod.tfvars"})],
        "Read everything I was asked to.",
    ]


def build_commit_script(p: NodeProject) -> list[Step]:
    return [
        [bash("cat .env prod.tfvars; npm run build && cat dist/app.js")],
        [ToolCall("Write", {"file_path": f"{p.repo}/src/added.js", "content": "module.exports = 2;\n"})],
        [bash("git add -A && git commit -qm agent && git show --stat HEAD")],
        "Built and committed.",
    ]


def assert_ran_whole_script(run: Run, script: list[Step]) -> None:
    assert run.result.rc == 0, run.explain()
    assert run.stub.problems == [], run.explain()
    assert run.stub.steps_served == list(range(len(script))), run.explain()
    assert run.result.out.strip() == script[-1], run.explain()
    missing = [i for i in run.stub.tool_calls if i not in run.stub.tool_results]
    assert not missing, f"no tool_result for {missing}\n{run.explain()}"


def assert_no_secret_left(run: Run, p: NodeProject) -> None:
    """Neither secret in any tool result, any byte sent to the API, or the agent's output."""
    seen = run.stub.all_traffic() + run.result.out + run.result.err
    for name, secret in (("the .env token", p.env_secret), ("the prod.tfvars token", p.tf_secret)):
        leaked = [i for i, text in run.stub.tool_results.items() if secret in text]
        assert not leaked, f"{name} reached the model through {leaked}\n{run.explain()}"
        sent = secret in seen  # a bool: pytest would otherwise print the whole traffic
        assert not sent, f"{name} was sent to the API or printed\n{run.explain()}"


def test_claude_code_reads_the_code_not_the_secrets(node_project, agent_env):
    p = node_project
    script = reads_script(p)
    run = run_sandboxed(p, agent_env, script)
    assert_ran_whole_script(run, script)
    assert_no_secret_left(run, p)

    # the tools did work inside: the source, the search and the listing came back
    assert p.source_mark in run.stub.result(0, 0), run.explain()
    assert "src/greet.js" in run.stub.result(2), run.explain()
    assert "package.json" in run.stub.result(2), run.explain()
    # and nothing was changed on the host
    assert (p.repo / ".env").read_text() == p.env_secret + "\n"
    assert (p.repo / "prod.tfvars").read_text() == p.tfvars


def test_control_without_sandbox_the_same_script_reads_the_secrets(node_project, agent_env):
    p = node_project
    script = reads_script(p)
    run = run_direct(p, agent_env, script)
    assert_ran_whole_script(run, script)

    assert p.source_mark in run.stub.result(0, 0), run.explain()
    assert p.env_secret in run.stub.result(0, 1), run.explain()  # Read .env
    assert p.tf_secret in run.stub.result(1, 1), run.explain()  # Grep finds the tracked secret (rg skips ignored .env)
    assert p.env_secret in run.stub.result(3) and p.tf_secret in run.stub.result(3), run.explain()  # cat
    assert p.tf_secret in run.stub.result(4), run.explain()  # Read prod.tfvars
    assert p.env_secret in run.stub.all_traffic()  # so assert_no_secret_left can fail


def test_claude_code_builds_and_commits_in_the_sandbox(node_project, agent_env):
    p = node_project
    script = build_commit_script(p)
    run = run_sandboxed(p, agent_env, script)
    assert_ran_whole_script(run, script)
    assert_no_secret_left(run, p)

    # What the agent must be able to do: rebuild the git-ignored dist/ that an earlier build left, and commit
    # its work without touching the hidden tracked prod.tfvars. Both are checked, so one run reports both.
    failures = []
    build_out = run.stub.result(0)
    disk = (p.repo / "dist" / "app.js").read_text()
    if p.build_mark not in build_out or p.build_mark not in disk:
        failures.append(f"the build did not run inside: its output was\n{build_out}\ndist/app.js on the host: {disk!r}")
    head = p.ws.git("log", "-1", "--format=%s").strip()
    if head != "agent":
        failures.append(f"no commit by the agent (HEAD is {head!r}): the commit step said\n{run.stub.result(2)}")
    else:
        committed = p.ws.git("show", "HEAD:prod.tfvars")
        if committed != p.tfvars:
            failures.append(f"the commit recorded prod.tfvars as {committed!r}, not as it was")
        files = p.ws.git("show", "--name-only", "--format=", "HEAD").split()
        if files != ["src/added.js"]:
            failures.append(f"the commit holds {files}, not just src/added.js")
    if (p.repo / "prod.tfvars").read_text() != p.tfvars:
        failures.append(f"prod.tfvars changed on the host: {(p.repo / 'prod.tfvars').read_text()!r}")
    status = p.ws.git("status", "--porcelain")
    if status:
        failures.append(f"the work tree is not clean after the commit:\n{status}")
    assert not failures, "\n".join(failures) + f"\n\n{run.explain()}"


def test_stub_serves_steps_only_to_turns_of_the_loop():
    """Side requests (no tools, or a fork's own prompt), retries and count_tokens leave the script where it was."""

    def post(stub, path: str, body: dict) -> dict:
        req = urllib.request.Request(stub.url + path, json.dumps(body).encode(), {"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    prompt = {"role": "user", "content": [{"type": "text", "text": "<reminder/>"}, {"type": "text", "text": "go"}]}
    call = ToolCall("Read", {"file_path": "/x"})
    with AnthropicStub("go", [[call], "done"]) as stub:
        title = {"messages": [{"role": "user", "content": "<session>\ngo\n</session> Write the title"}]}
        assert post(stub, "/v1/messages", title)["content"] == [{"type": "text", "text": SIDE_ANSWER}]
        assert post(stub, "/v1/messages/count_tokens", {"messages": [prompt]})["input_tokens"] > 0
        first = post(stub, "/v1/messages?beta=true", {"tools": tools, "messages": [prompt]})
        assert first["stop_reason"] == "tool_use"
        assert first["content"] == [{"type": "tool_use", "id": tool_id(0, 0), "name": "Read", "input": call.input}]
        retry = post(stub, "/v1/messages", {"tools": tools, "messages": [prompt]})
        assert retry["content"] == first["content"]
        turn = [prompt, {"role": "assistant", "content": first["content"]}]
        answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id(0, 0), "content": "X"}]}
        fork = {
            "tools": tools,
            "messages": [*turn, answer, {"role": "assistant", "content": "ok"}, title["messages"][0]],
        }
        assert post(stub, "/v1/messages", fork)["content"][0]["text"] == SIDE_ANSWER
        last = post(stub, "/v1/messages", {"tools": tools, "messages": [*turn, answer], "stream": False})
        assert last["content"] == [{"type": "text", "text": "done"}] and last["stop_reason"] == "end_turn"
    assert stub.steps_served == [0, 0, 1] and stub.problems == []
    assert stub.tool_results == {tool_id(0, 0): "X"}
    assert [r.kind for r in stub.requests] == ["side", "count_tokens", "step 0", "step 0", "side", "step 1"]
