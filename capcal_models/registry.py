"""Registration of capcal's lm-eval model wrappers without hiding lm-eval's own models.

lm-eval 0.4.13 fills its model registry lazily, only while it is empty: registering a model before
``lm_eval.models`` is imported would hide every built-in model. ``register_models`` therefore imports
``lm_eval.models`` first and then registers capcal's wrappers as lazy ``"module:Class"`` entries (as lm-eval
registers its own), so that the engine behind a wrapper (torch, vLLM, aiohttp) is imported only when the model
is used. ``import capcal_models`` calls it; it is also the target of the ``lm_eval.models`` entry point.
"""

from __future__ import annotations

__all__ = ["WRAPPERS", "register_models"]

# capcal's lm-eval model names and the classes behind them ("module:Class"). A wrapper module's own
# ``@register_model(name)`` replaces the entry by the class when the module is imported (same target).
WRAPPERS: dict[str, str] = {
    "capcal-hf": "capcal_models.hf:CapcalHFLM",
    "capcal-api": "capcal_models.api:CapcalCompletionsAPI",
    "capcal-api-chat": "capcal_models.api:CapcalChatAPI",
    "capcal-vllm": "capcal_models.vllm:CapcalVLLM",
}


def register_models() -> list[str]:
    """Fill lm-eval's built-in model registry, then add capcal's wrappers; return every registered name.

    Idempotent: a name already registered (as the lazy entry or as the imported class) is left as it is.
    """
    import lm_eval.models  # noqa: F401  (must come first: fills the built-in registry)
    from lm_eval.api.registry import MODEL_REGISTRY

    for name, target in WRAPPERS.items():
        if name not in MODEL_REGISTRY:
            MODEL_REGISTRY.register(name, target=target)
    return sorted(MODEL_REGISTRY)
