"""capcal_models.credentials: API keys come from the environment and never reach a file or a message.

lm-eval writes model arguments into its results files and logs, so a key in ``model_args`` (as a model
argument or inside ``base_url``) is refused without being echoed; the key is read from its environment
variable when used, sent only in the Authorization header and redacted from any text.
"""

from __future__ import annotations

import pytest

from capcal_models.credentials import (
    REDACTED,
    EnvironmentKey,
    credentials_in_url,
    public_url,
    refuse_credentials,
)
from capcal_models.registry import register_models

FAKE_KEY = "sk-capcal-test-8d1f0c5e27b94a61-do-not-log"


@pytest.mark.parametrize(
    "secret_args",
    [
        f"base_url=http://127.0.0.1:9/v1,api_key={FAKE_KEY}",
        f"base_url=http://127.0.0.1:9/v1,auth_token={FAKE_KEY}",
        f"base_url=http://user:{FAKE_KEY}@127.0.0.1:9/v1",
        f"base_url=http://127.0.0.1:9/v1?api-version=1&api-key={FAKE_KEY}",
    ],
    ids=["api_key", "auth_token", "url_password", "url_query"],
)
def test_secrets_in_model_args_are_refused(secret_args: str) -> None:
    """lm-eval writes model_args into its results files and logs: a secret there is refused, unechoed."""
    register_models()
    from lm_eval.api.registry import get_model

    with pytest.raises(ValueError, match="api_key_env") as refused:
        get_model("capcal-api").create_from_arg_string(f"model=m,{secret_args}")
    assert FAKE_KEY not in str(refused.value)


def test_credentials_in_urls_are_found_and_public_urls_drop_them() -> None:
    assert credentials_in_url(f"https://user:{FAKE_KEY}@api.example.com/v1") == "user:password@ in base_url"
    for name in ("key", "api_key", "access_token", "client_secret", "password", "sig"):
        assert name in credentials_in_url(f"https://api.example.com/v1?{name}={FAKE_KEY}")
    assert credentials_in_url("https://api.example.com/v1?api-version=2024-01-01") is None
    assert credentials_in_url(None) is None and credentials_in_url("") is None
    # a key parameter left empty (an unset variable in a templated URL) or without "=" is still the
    # credential's place in a URL that is written to every results file: flagged by its name, whole
    for query in ("api_key=", "api_key", "page=2&api_key="):
        assert (
            credentials_in_url(f"https://api.example.com/v1?{query}")
            == "the query parameter 'api_key' in base_url"
        )
    url = f"https://user:{FAKE_KEY}@api.example.com:8443/v1/completions?key={FAKE_KEY}#part"
    assert public_url(url) == "https://api.example.com:8443/v1/completions"
    assert public_url("http://127.0.0.1/v1") == "http://127.0.0.1/v1" and public_url(None) == ""


def test_a_token_as_url_username_alone_is_flagged() -> None:
    """Catches the user-info check reading only the password: ``https://TOKEN@host`` has no password."""
    assert credentials_in_url(f"https://{FAKE_KEY}@api.example.com/v1") == "user:password@ in base_url"
    assert credentials_in_url("https://api.example.com:8443/v1") is None


def test_refusal_names_the_problem_without_the_secret() -> None:
    refuse_credentials("capcal-api", {"model": "m", "base_url": "http://127.0.0.1:9/v1"})  # nothing to refuse
    with pytest.raises(ValueError, match=r"capcal-api: do not pass api_key in model_args") as refused:
        refuse_credentials("capcal-api", {"api_key": FAKE_KEY})
    assert FAKE_KEY not in str(refused.value)
    with pytest.raises(ValueError, match="the query parameter 'token' in base_url"):
        refuse_credentials("capcal-api-chat", {"base_url": f"http://h/v1?token={FAKE_KEY}"})


def test_the_key_is_read_at_use_sent_in_the_header_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = EnvironmentKey("CAPCAL_TEST_API_KEY")
    monkeypatch.delenv("CAPCAL_TEST_API_KEY", raising=False)
    assert key.value == "" and key.header() == {} and key.redact("no key here") == "no key here"
    monkeypatch.setenv("CAPCAL_TEST_API_KEY", FAKE_KEY)
    assert key.header() == {"Authorization": f"Bearer {FAKE_KEY}"}
    assert key.redact(f"HTTP 500: you sent Bearer {FAKE_KEY}") == f"HTTP 500: you sent Bearer {REDACTED}"
    assert FAKE_KEY not in repr(vars(key))  # only the variable's name is stored
    monkeypatch.setenv("CAPCAL_TEST_API_KEY", "rotated")
    assert key.header() == {"Authorization": "Bearer rotated"}
