"""``--device`` for a Hugging Face model on a machine without CUDA (issue 46): ``cuda`` is refused in one line
with exit status 2 before any model loads; ``cuda:0`` (the default) falls back to the CPU and says so in one
line. These tests run where torch has no CUDA device (the project's CPU machines); elsewhere they skip."""

from __future__ import annotations

import pytest
import torch

from analysis.checks.input_checks import device_problem

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")


def test_cuda_is_refused_and_cuda_0_falls_back_with_a_notice():
    problem, notice = device_problem("capcal-hf", "cuda")
    assert problem is not None and notice is None
    assert problem.startswith("--device cuda: ") and "--device cpu" in problem and "\n" not in problem
    problem, notice = device_problem("hf", "cuda:0")
    assert (
        problem is None and notice == "--device cuda:0: no such CUDA device here; the model runs on the CPU"
    )
    assert device_problem("capcal-hf", "cuda:3")[1] is not None


def test_other_devices_and_models_are_left_alone():
    for model, device in [("hf", "cpu"), ("capcal-hf", None), ("vllm", "cuda"), ("capcal-vllm", "cuda:0")]:
        assert device_problem(model, device) == (None, None), (model, device)
    assert device_problem(object(), "cuda") == (None, None)  # an LM object has placed its model already


@pytest.mark.slow
def test_capcal_eval_refuses_cuda_before_loading_the_model(smollm2_path, tmp_path, forked_cli):
    """The real command (in a child of ``forked_cli``): one line on stderr, exit status 2, no model loaded
    (no weights read)."""
    command = ["eval", "--model", "capcal-hf", "--model_args"]
    command += [f"pretrained={smollm2_path}", "--device", "cuda", "--tasks", "capcal_arithmetic"]
    command += ["--limit", "1", "--repeats", "1", "--apply_chat_template"]
    done = forked_cli.capcal(command, tmp_path, 300)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [
        "capcal eval: error: --device cuda: this machine has no CUDA device "
        f"(torch {torch.__version__}); use --device cpu"
    ], done.stderr
    assert "Loading weights" not in done.stderr + done.stdout


@pytest.mark.slow
def test_cuda_0_falls_back_to_the_cpu_and_says_so(smollm2_path):
    from analysis.evaluation import evaluate

    notices: list[str] = []
    results = evaluate(
        "capcal-hf",
        ["capcal_arithmetic"],
        {"pretrained": str(smollm2_path), "sample_cache": False},
        repeats=1,
        limit=1,
        apply_chat_template=True,
        device="cuda:0",
        notify=notices.append,
        gen_kwargs="max_gen_toks=2",
        bootstrap_iters=0,
    )
    assert "--device cuda:0: no such CUDA device here; the model runs on the CPU" in notices
    assert results["results"]["capcal_arithmetic"]
