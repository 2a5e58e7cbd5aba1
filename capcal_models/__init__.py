"""capcal's lm-eval model wrappers: ``capcal-hf``, ``capcal-vllm``, ``capcal-api`` and ``capcal-api-chat``.

Importing the package registers them with lm-eval (after lm-eval's own models, which stay available), so
``import capcal_models`` followed by ``lm_eval.simple_evaluate(model="capcal-hf", ...)`` works. The wrapper
classes are imported only when a model is used.
"""

from capcal_models.registry import register_models

register_models()
