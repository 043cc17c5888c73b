"""The stored-record layout and its codecs, below both `protocol` and `store`.

`codec` is the pure-Python reference. The hot loops also exist compiled
(`_records`, `_append`: C through the CPython API, built by `pip install`);
`native` says which of the two runs.
"""
