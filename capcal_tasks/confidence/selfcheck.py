r"""Self-Calibration's per-response confidence (Huang et al. 2025), for ALL k responses of an earlier run.

Task ``capcal_<dataset>_selfcheck``. For each response y_i of a question, the conversation is the sampling
prompt, the response as the model's turn, and a new user turn "Is the answer correct? (Yes/No)"; the model
then scores "Yes" and "No" as its next word (log-likelihoods, 2k requests per question). With
``--apply_chat_template`` the conversation is rendered by the model's chat template as three turns and the
answers are scored without a leading space; without it, as plain text (prompt, blank line, response, blank
line, question) with " Yes" / " No".

Per-question fields (lists over the k responses, in sampling order):

- ``p_yes``: exp(lp_Yes), Self-Calibration's convention (not renormalised);
- ``p_yes_normalized``: exp(lp_Yes) / (exp(lp_Yes) + exp(lp_No));
- ``logprob_yes``, ``logprob_no``;
- ``response_correctness``: each response's 0/1 correctness in the earlier run.

With them the analysis can do confidence-weighted voting, adaptive self-consistency and early stopping.
Note: lm-eval moves a context's trailing whitespace into the continuation, so after a chat template whose
generation prompt ends in a newline, lp_Yes includes the log-probability of that newline (the same for Yes and
No: it cancels in ``p_yes_normalized``).
"""

from __future__ import annotations

import numpy as np
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from capcal_tasks.confidence.records import selfcheck_record
from capcal_tasks.prompts import SELF_CHECK_QUESTION

__all__ = ["SelfCheckTask", "mean_over_responses", "process_results"]


class SelfCheckTask(ConfigurableTask):
    """A ``multiple_choice`` task with one context per earlier response and the choices Yes / No for each.

    ``doc_to_text`` is the dataset's sampling prompt; the documents carry ``responses`` (see
    ``capcal_tasks.confidence.earlier_run``).
    """

    def __init__(self, config: dict | None = None) -> None:
        super().__init__(config={key: value for key, value in (config or {}).items() if key != "class"})

    def fewshot_context(
        self,
        doc: dict,
        num_fewshot: int,
        system_instruction: str | None = None,
        apply_chat_template: bool = False,
        fewshot_as_multiturn: bool = False,
        chat_template=None,
        gen_prefix: str | None = None,
    ) -> list[str]:
        """One context per response: the sampling prompt, the response, and the check question."""
        prompt = self.doc_to_text(doc)
        contexts = []
        for response in doc["responses"]:
            if apply_chat_template and chat_template is not None:
                messages = [{"role": "system", "content": system_instruction}] if system_instruction else []
                messages += [
                    {"role": "user", "content": prompt},
                    {"role": "assistant", "content": response.strip()},
                    {"role": "user", "content": SELF_CHECK_QUESTION},
                ]
                contexts.append(chat_template(messages, add_generation_prompt=True))
            else:
                system = f"{system_instruction}\n\n" if system_instruction else ""
                contexts.append(f"{system}{prompt}\n\n{response.strip()}\n\n{SELF_CHECK_QUESTION}")
        return contexts

    def construct_requests(self, doc: dict, ctx: list[str], **kwargs) -> list[Instance]:
        """2k log-likelihood requests, ordered (response 1: Yes, No), (response 2: Yes, No), ..."""
        apply_chat_template = kwargs.pop("apply_chat_template", False)
        kwargs.pop("chat_template", None)
        delimiter = "" if apply_chat_template else self.config.target_delimiter
        choices = self.doc_to_choice(doc)
        return [
            Instance(
                request_type="loglikelihood",
                doc=doc,
                arguments=(context, f"{delimiter}{choice}"),
                idx=index * len(choices) + position,
                **kwargs,
            )
            for index, context in enumerate(ctx)
            for position, choice in enumerate(choices)
        ]


def process_results(doc: dict, results: list) -> dict:
    """``results``: the (log-likelihood, is_greedy) pairs of the 2k requests, in request order."""
    k = len(doc["responses"])
    if len(results) != 2 * k:
        raise ValueError(f"selfcheck: expected {2 * k} log-likelihoods for {k} responses, got {len(results)}")
    logprob_yes = [float(results[2 * i][0]) for i in range(k)]
    logprob_no = [float(results[2 * i + 1][0]) for i in range(k)]
    return selfcheck_record(logprob_yes, logprob_no, doc["response_correctness"])


def mean_over_responses(per_question: list[list[float]]) -> float:
    """Aggregation of the per-response lists: the mean over all responses of all questions."""
    values = [value for values in per_question for value in values]
    return float(np.mean(values)) if values else float("nan")
