"""``import capcal_models`` registers capcal's wrappers with lm-eval without hiding lm-eval's own models."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capcal_models.registry import WRAPPERS, register_models

REPO = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported yet); its stdout."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_register_models_keeps_lm_evals_builtin_models():
    names = register_models()
    for builtin in ("hf", "vllm", "local-completions", "local-chat-completions"):
        assert builtin in names
    assert set(WRAPPERS) <= set(names)


def test_import_capcal_models_registers_the_wrappers_and_keeps_lm_evals_models():
    code = (
        "import json, sys\n"
        "import capcal_models\n"
        "from lm_eval.api.registry import MODEL_REGISTRY, get_model\n"
        "engines = [name for name in ('torch', 'capcal_models.hf') if name in sys.modules]\n"
        "classes = {name: get_model(name).__qualname__ for name in ('capcal-hf', 'capcal-api', 'hf')}\n"
        "print(json.dumps({'names': sorted(MODEL_REGISTRY), 'engines': engines, 'classes': classes}))\n"
    )
    found = json.loads(_python(code))
    assert {"hf", "vllm", "local-completions", "openai-chat-completions", *WRAPPERS} <= set(found["names"])
    assert found["engines"] == []  # the import alone loads no engine: the wrappers are lazy entries
    assert found["classes"] == {"capcal-hf": "CapcalHFLM", "capcal-api": "CapcalCompletionsAPI", "hf": "HFLM"}


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_each_lazy_entry_names_the_class_its_module_registers(name):
    """lm-eval replaces a lazy "module:Class" entry by the class only when the decorator registers that same
    class: a wrapper moved to another module must be moved in ``WRAPPERS`` too."""
    module, _, class_name = WRAPPERS[name].partition(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text(encoding="utf-8")
    assert f"class {class_name}(" in source
    decorator = f'@register_model("{name}")' if name != "capcal-vllm" else "@register_model(BACKEND)"
    assert decorator in source
    if importlib.util.find_spec("vllm") is None and name == "capcal-vllm":
        return  # vLLM lives in its own environment (.venv-vllm)
    from lm_eval.api.registry import get_model

    model_class = get_model(name)
    assert f"{model_class.__module__}:{model_class.__name__}" == WRAPPERS[name]


@pytest.mark.slow
def test_simple_evaluate_runs_capcal_hf_after_import_capcal_models(smollm2_path):
    code = (
        "import json\n"
        "import capcal_models\n"
        "from lm_eval import simple_evaluate\n"
        "from lm_eval.api.registry import MODEL_REGISTRY\n"
        "from lm_eval.tasks import TaskManager\n"
        "from capcal_tasks import tasks_dir\n"
        "results = simple_evaluate(\n"
        f"    model='capcal-hf', model_args={{'pretrained': {str(smollm2_path)!r}, 'sample_cache': False}},\n"
        "    tasks=['capcal_arithmetic'], task_manager=TaskManager(include_path=str(tasks_dir())),\n"
        "    limit=1, gen_kwargs={'max_gen_toks': 4}, device='cpu', bootstrap_iters=0,\n"
        ")\n"
        "n = results['results']['capcal_arithmetic']['n_samples,all_responses']\n"
        "print(json.dumps({'hf': 'hf' in MODEL_REGISTRY, 'n': n}))\n"
    )
    assert json.loads(_python(code).splitlines()[-1]) == {"hf": True, "n": 16}  # the task's k = 16


def _model_entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {entry.name: entry.value for entry in entry_points(group="lm_eval.models")}


def test_model_entry_points_declare_one_class_per_alias():
    """lm-eval's plugin loader (after 0.4.13) reads ``lm_eval.models`` as alias -> "module:Class": each capcal
    alias is declared, with the target of ``WRAPPERS``, and no entry names anything else (e.g. a function)."""
    capcal_entries = {
        name: value for name, value in _model_entry_points().items() if value.startswith("capcal_models.")
    }
    assert capcal_entries == WRAPPERS


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_each_model_entry_point_loads_the_class_lm_eval_registers(name):
    from importlib.metadata import entry_points

    (entry,) = [entry for entry in entry_points(group="lm_eval.models") if entry.name == name]
    if importlib.util.find_spec("vllm") is None and name == "capcal-vllm":
        # vLLM lives in its own environment (.venv-vllm): the module cannot be imported here, so check that
        # the entry's module defines the class it names (tests/capcal_models/test_vllm.py loads it there).
        spec = importlib.util.find_spec(entry.module)
        assert spec is not None and spec.origin is not None
        assert f"class {entry.attr}(" in Path(spec.origin).read_text(encoding="utf-8")
        return
    loaded = entry.load()
    from lm_eval.api.model import LM
    from lm_eval.api.registry import get_model

    register_models()
    assert isinstance(loaded, type) and issubclass(loaded, LM)
    assert get_model(name) is loaded


def test_task_entry_point_names_capcal_tasks_folder():
    from importlib.metadata import entry_points

    from capcal_tasks import tasks_dir

    (entry,) = [entry for entry in entry_points(group="lm_eval.tasks") if entry.name == "capcal"]
    assert Path(entry.load()()) == Path(tasks_dir())
