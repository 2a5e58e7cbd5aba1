"""Answer extraction and checking, one module per kind of answer."""
