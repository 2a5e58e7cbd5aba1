"""Self-Calibration training (Huang et al. 2025, "Efficient Test-Time Scaling via Self-Calibration",
arXiv 2503.00031): the training half of the method, inside capcal's pipeline.

- :mod:`analysis.self_calibration.data`: training tuples (question, response, soft self-consistency target,
  language-modelling flag) from a sampling run and the self-check run on its responses, training splits only;
- :mod:`analysis.self_calibration.train`: LoRA fine-tuning with the method's two kinds of example and its
  schedule (transformers' ``Trainer`` with a custom ``compute_loss``), checkpoints, adapter and merged
  checkpoint; its parts: :mod:`~analysis.self_calibration.train_config` (the settings),
  :mod:`~analysis.self_calibration.example_draw` (the per-bucket draw, validation split and epoch plan),
  :mod:`~analysis.self_calibration.encoding` (tokenised examples, the collator) and
  :mod:`~analysis.self_calibration.loss` (the loss and its mean without gradient);
- :mod:`analysis.self_calibration.compare`: before/after evaluation on held-out questions;
- :mod:`analysis.self_calibration.fingerprint`: step records (settings, input identities, output digest)
  so that the loop never reuses a stale step;
- :mod:`analysis.self_calibration.loop`: the whole loop from one call (``capcal selfcal run``).

The modules import torch, transformers and peft lazily where they need them: ``data`` and ``compare`` work
without the ``train`` extra.
"""
