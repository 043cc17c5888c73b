"""The compiled core (C through the CPython API), built by `pip install` with gcc.

Everything else about the package is in pyproject.toml. The extensions are
optional: if one fails to build, the install still succeeds and the
pure-Python twin runs (see tidemq.record.native); the test suite checks that
they were built where a compiler exists.
"""

from setuptools import Extension, setup

_FLAGS = [
    "-O2",
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
]


def _extension(name: str, libraries: tuple[str, ...] = ()) -> Extension:
    return Extension(
        f"tidemq.record.{name}",
        [f"src/tidemq/record/{name}.c"],
        depends=[
            "src/tidemq/record/_native_common.h",
            "src/tidemq/record/_property_text.h",
            "src/tidemq/record/_batch_body.h",
        ],
        extra_compile_args=_FLAGS,
        libraries=list(libraries),
        optional=True,
    )


# zlib (crc32) comes with the Python headers: Debian's libpython3-dev depends on zlib1g-dev.
setup(
    ext_modules=[
        _extension("_records"),
        _extension("_append", ("z",)),
        _extension("_transactions", ("z",)),
    ]
)
