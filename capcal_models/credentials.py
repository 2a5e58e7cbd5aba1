"""Credentials policy of capcal's API wrappers: the key comes from the environment and never enters a file.

lm-eval writes model arguments into its results files and logs, so

- ``refuse_credentials`` refuses ``api_key`` / ``auth_token`` model arguments and credentials in ``base_url``
  (``user:password@``, or a query parameter whose name contains key, token, secret, password or sig);
- ``EnvironmentKey`` reads the key from an environment variable at each use (it is never stored on an
  object), sends it only in the ``Authorization`` header and replaces it by ``[API key]`` in any text
  (``redact``) before that text is logged or raised;
- ``public_url`` is a URL without credentials, query or fragment (for cache keys and logs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "SECRET_MODEL_ARGS",
    "EnvironmentKey",
    "credentials_in_url",
    "public_url",
    "refuse_credentials",
]

SECRET_MODEL_ARGS = ("api_key", "auth_token")
SECRET_QUERY_WORDS = ("key", "token", "secret", "password", "sig")
REDACTED = "[API key]"


def public_url(url: str | None) -> str:
    """scheme://host[:port]/path: the URL without credentials, query or fragment."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def credentials_in_url(url: str | None) -> str | None:
    """What in a URL looks like a credential (user info, a key/token query parameter), or None."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.username or parts.password:
        return "user:password@ in base_url"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if any(word in name.lower() for word in SECRET_QUERY_WORDS):
            return f"the query parameter {name!r} in base_url"
    return None


def refuse_credentials(backend: str, model_args: Mapping[str, object]) -> None:
    """Raise ``ValueError`` (without echoing the secret) when model arguments carry a credential."""
    secret = next((f"{name} in model_args" for name in SECRET_MODEL_ARGS if name in model_args), None)
    base_url = model_args.get("base_url")
    secret = secret or credentials_in_url(None if base_url is None else str(base_url))
    if secret:
        raise ValueError(
            f"{backend}: do not pass {secret} (lm-eval writes model_args into its results files and logs); "
            "put the key in an environment variable and name it with api_key_env=NAME (default "
            "OPENAI_API_KEY)"
        )


class EnvironmentKey:
    """An API key read from the environment variable ``variable`` at each use."""

    def __init__(self, variable: str = "OPENAI_API_KEY") -> None:
        self.variable = str(variable)

    @property
    def value(self) -> str:
        """The key ("" when the variable is unset)."""
        return os.environ.get(self.variable, "")

    def header(self) -> dict[str, str]:
        """``{"Authorization": "Bearer <key>"}``, or no header without a key."""
        key = self.value
        return {"Authorization": f"Bearer {key}"} if key else {}

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the key replaced by ``[API key]``."""
        key = self.value
        return text.replace(key, REDACTED) if key else text
