import pytest

from dune_ledger.infrastructure.strict_json import JSONInputError, loads


def test_plain_json_decodes() -> None:
    assert loads(b'{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


@pytest.mark.parametrize("text", [
    '{"a": 1, "a": 2}',
    '{"x": {"b": 1, "b": 1}}',
    '[{"k": 1, "k": 1}]',
])
def test_a_repeated_key_is_refused(text: str) -> None:
    with pytest.raises(JSONInputError, match="repeated"):
        loads(text)


@pytest.mark.parametrize("data", [b"\xff\xfe", b"{", b"NaN", b'{"a": Infinity}', b"[" * 100000])
def test_what_is_not_json_is_refused(data: bytes) -> None:
    with pytest.raises(JSONInputError):
        loads(data)
