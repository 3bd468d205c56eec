"""The compiled part of prefeval: the one-pass reader of TREC text runs
(prefeval/io/_textpass.c).  Optional: where it cannot be built (no C compiler), the
install goes on without it and the pure-Python readers read every run; everything else
is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "prefeval.io._textpass",
            sources=["prefeval/io/_textpass.c"],
            optional=True,
        )
    ]
)
