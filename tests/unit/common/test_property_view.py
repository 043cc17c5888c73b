"""PropertyView answers every lookup exactly as decode_properties does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.properties import PropertyView, decode_properties

# Small alphabets make repeated names, empty keys and values, stray separators
# and prefixes of other names likely.
_text = st.text(alphabet="ab\x01\x02", max_size=12)
_names = st.text(alphabet="ab\x01\x02", max_size=3)


@given(raw=_text, name=_names)
def test_get_matches_decode(raw: str, name: str) -> None:
    view = PropertyView(raw)
    decoded = decode_properties(raw)
    assert view.get(name) == decoded.get(name)
    assert (name in view) == (name in decoded)
    assert dict(view) == decoded
    assert len(view) == len(decoded)


@given(
    pairs=st.lists(st.tuples(st.sampled_from(["a", "ab", "b", "TAGS"]), st.text(max_size=4))),
    name=st.sampled_from(["a", "ab", "b", "TAGS", "c"]),
)
def test_well_formed_strings_last_pair_wins(pairs: list[tuple[str, str]], name: str) -> None:
    raw = "".join(f"{k}\x01{v.replace(chr(2), '')}\x02" for k, v in pairs)
    assert PropertyView(raw).get(name) == decode_properties(raw).get(name)


def test_missing_key_raises_and_default_is_returned() -> None:
    view = PropertyView("a\x011\x02")
    assert view["a"] == "1"
    assert view.get("zz", "none") == "none"
    with pytest.raises(KeyError):
        view["zz"]
