"""Issue 39, injection: every printed shell word reads back as itself through a real shell, every
value in a pod's args reaches vLLM as written after Kubernetes' $(VAR) expansion, and values the
API server would refuse are refused before anything is planned or written."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.app.serve import HEAD, WEIGHTS, Launch, _quote
from planner.cli import main
from planner.defaults import load

PLAN_8B = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192"]
PRINT_WORDS = "words() { printf '%s\\0' \"$@\"; }; "  # a shell function that prints each word it gets, NUL after each


def shell_words(line: str, env: dict[str, str] | None = None) -> list[str]:
    """The words a real shell (sh -c) hands a command line's program (`vllm serve` or `exec vllm
    serve`, replaced by a function that prints them)."""
    body = line.replace("exec vllm serve ", "words ", 1).replace("vllm serve ", "words ", 1)
    out = subprocess.run(["sh", "-c", PRINT_WORDS + body], capture_output=True, env=env or {}, check=True).stdout
    return [w.decode() for w in out.split(b"\0")[:-1]]


def kubernetes_expanded(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of a container's command and args (hand-written from the API reference,
    core/v1 Container.args: "$(VAR_NAME) references are expanded using the container's environment;
    if a variable cannot be resolved, the reference is unchanged; $$ is reduced to $")."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text) and text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            name = text[i + 2:end]
            out.append(env.get(name, text[i:end + 1]))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def emitted(folder: Path) -> dict[str, list[dict]]:
    return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(folder.glob("*.yaml"))}


def _commands(tree) -> list[str]:
    if isinstance(tree, dict):
        return [v for k, v in tree.items() if k == "vllm_serve" and v] + [c for v in tree.values()
                                                                           for c in _commands(v)]
    return [c for v in tree for c in _commands(v)] if isinstance(tree, list) else []


def test_a_model_folder_with_a_dollar_prints_a_line_the_shell_reads_back(tmp_path, capsys, shared_models):
    """Issue 39: a model folder `evil/m$IFS--trust-remote-code` printed a line a shell runs as
    `vllm serve evil/m --trust-remote-code ...`."""
    folder = tmp_path / "evil" / "m$IFS--trust-remote-code"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text((shared_models / "Qwen--Qwen3-8B.json").read_text())
    assert main(["--model", str(folder), "--chip", "h100", "--concurrency", "4", "--context-length", "8192",
                 "--json"]) == 0
    lines = _commands(json.loads(capsys.readouterr().out))
    assert lines
    for line in lines:
        words = shell_words(line)
        assert words[0] == str(folder) and "--trust-remote-code" not in words
        split = shlex.split(line)
        assert words == split[split.index("serve") + 1:]


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=30))
def test_any_word_a_user_gives_reads_back_as_itself(text):
    """shlex.quote's promise, through a real shell: a word with $, `, ;, spaces, quotes, newlines."""
    assert shell_words(f"vllm serve {_quote(text)} {_quote('$HEAD_IP')}") == [text, "$HEAD_IP"]


def test_only_the_tools_own_placeholders_stay_bare():
    """The placeholders this tool writes are left for the shell; the same text from a user is quoted."""
    line = Launch("n", ("vllm", "serve", WEIGHTS, "--master-addr", HEAD, "--x", "$HEAD_IP")).text
    assert line == "vllm serve $MODEL_WEIGHTS --master-addr $HEAD_IP --x '$HEAD_IP'"
    assert shell_words(line, {"MODEL_WEIGHTS": "/w", "HEAD_IP": "10.0.0.1"}) == [
        "/w", "--master-addr", "10.0.0.1", "--x", "$HEAD_IP"]


def test_a_model_source_that_is_a_flag_is_refused(tmp_path, capsys):
    """Issue 39: `--model-source '--trust-remote-code'` became the pod's first vLLM argument."""
    out = tmp_path / "out"
    assert main([*PLAN_8B, "--emit", "k8s", "-o", str(out), "--model-source", "--trust-remote-code"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("plan: error: --model-source: '--trust-remote-code' begins with '-'")
    assert not out.exists()


def test_a_model_folder_that_begins_with_a_dash_is_refused(tmp_path, capsys, shared_models, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-m").mkdir()
    (tmp_path / "-m" / "config.json").write_text((shared_models / "Qwen--Qwen3-8B.json").read_text())
    assert main(["--model=-m", "--chip", "h100", "--concurrency", "4", "--context-length", "8192"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("plan: error: --model: '-m' begins with '-'") and "./-m" in err[0]


def test_a_model_source_with_a_variable_reference_reaches_vllm_as_written(tmp_path, capsys):
    """Issue 39: `--model-source 'org/m$(HF_TOKEN)'` went into pod args unescaped, and Kubernetes
    put the token on vLLM's command line."""
    out = tmp_path / "out"
    assert main([*PLAN_8B, "--emit", "k8s", "-o", str(out), "--model-source", "org/m$(HF_TOKEN)",
                 "--hf-token-secret", "hf-token"]) == 0
    (resources,) = emitted(out).values()
    container = resources[0]["spec"]["template"]["spec"]["containers"][0]
    args = [kubernetes_expanded(a, {"HF_TOKEN": "hf_secret"}) for a in container["args"]]
    assert args[0] == "org/m$(HF_TOKEN)" and not [a for a in args if "hf_secret" in a]


def test_a_worker_shell_line_hands_vllm_the_model_as_written(tmp_path, capsys):
    """A data-parallel worker's `sh -c` line (its start rank is the shell's arithmetic): after
    Kubernetes' expansion and the shell's, vLLM gets the model as written, the leader's address and
    the rank from LWS's variables."""
    out = tmp_path / "dp"
    source = "org/m$(HF_TOKEN) `id` $HOME"
    assert main(["--model", "qwen3-235b-a22b", "--chip", "h200", "--concurrency", "64", "--tp", "4", "--dp", "4",
                 "--pp", "1", "--gpus-per-node", "8", "--emit", "k8s", "-o", str(out), "--model-source", source]) == 0
    (resources,) = emitted(out).values()
    worker = resources[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert worker["command"] == ["sh", "-c"]
    pod_env = {"HF_TOKEN": "hf_secret", "LWS_LEADER_ADDRESS": "10.0.0.1", "LWS_WORKER_INDEX": "1", "HOME": "/root"}
    words = shell_words(kubernetes_expanded(worker["args"][0], pod_env), pod_env)
    assert words[0] == source
    assert words[words.index("--data-parallel-address") + 1] == "10.0.0.1"
    assert words[words.index("--data-parallel-start-rank") + 1] == "2"


def test_a_router_script_with_a_variable_reference_is_escaped():
    from planner.report.k8s import K8sOptions, router_manifests

    options = K8sOptions(image="vllm/vllm-openai:v0.33.0", router_script="https://example.com/$(HF_TOKEN)/p.py",
                         router_fetch="0" * 64,  # the fetch at start-up is an opt-in, checked against a SHA-256
                         defaults=load())
    resources, _ = router_manifests("chat router", "chat prefill", "chat decode", options)
    fetch = resources[0]["spec"]["template"]["spec"]["initContainers"][0]
    assert [kubernetes_expanded(a, {"HF_TOKEN": "x"}) for a in fetch["args"]][1] == options.router_script


BAD_VALUES = [
    ("--namespace", "Bad_NS!", "at most 63 characters of a-z, 0-9 and '-'"),
    ("--namespace", "a" * 64, "at most 63 characters"),
    ("--hf-token-secret", "Not A Name", "at most 253 characters: labels of a-z, 0-9 and '-'"),
    ("--model-cache-claim", "../../etc", "at most 253 characters: labels of a-z, 0-9 and '-'"),
    ("--image", "vllm/vllm-openai:v0.33.0\nimage: evil", "holds a control character"),
    ("--node-selector", "nvidia.com/gpu.product=NVIDIA-H100\nevil: x", "the value is not a label value"),
    ("--node-selector", "bad key=x", "is not a label key"),
    ("--model-source", "org/m\nx", "holds a control character"),
]


@pytest.mark.parametrize(("flag", "value", "rule"), BAD_VALUES)
def test_a_value_the_api_server_refuses_is_refused_before_anything(tmp_path, capsys, flag, value, rule):
    """Issue 39: such values were written with exit 0; now one line naming the flag and the rule,
    exit 2, nothing written."""
    out = tmp_path / "out"
    assert main([*PLAN_8B, "--emit", "k8s", "-o", str(out), flag, value]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"plan: error: {flag}: ") and rule in err[0], err
    assert not out.exists()


def test_names_the_api_server_takes_are_written(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*PLAN_8B, "--emit", "k8s", "-o", str(out), "--namespace", "team-a", "--hf-token-secret", "hf.token",
                 "--model-cache-claim", "models-cache", "--node-selector", "nvidia.com/gpu.product=NVIDIA-H100_80GB.x",
                 ]) == 0
    (resources,) = emitted(out).values()
    pod = resources[0]["spec"]["template"]["spec"]
    assert resources[0]["metadata"]["namespace"] == "team-a"
    assert pod["volumes"][1]["persistentVolumeClaim"]["claimName"] == "models-cache"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100_80GB.x"}


def test_a_launch_environment_value_is_escaped_too():
    """Kubernetes expands $(VAR) in env values as in args: a plan's value reaches the pod as written."""
    from planner.report.k8s import _launch_env

    (entry,) = _launch_env({"SOME_SETTING": "a$(HF_TOKEN)b"})
    assert kubernetes_expanded(entry["value"], {"HF_TOKEN": "x"}) == "a$(HF_TOKEN)b"
