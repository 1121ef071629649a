"""Builds ferry's optional native copier; everything else is in pyproject.toml.

The extension compiles against librdkafka's vendored public header and is not linked to
librdkafka: its symbols resolve at import against the library confluent-kafka loaded
(`ferry.engine.copy.native_loop`). `optional=True`: without a C compiler ferry installs anyway
and copies with its Python loop.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ferry.engine.copy._fastcopy",
            sources=["src/ferry/engine/copy/native/fastcopy.c"],
            include_dirs=["third_party/librdkafka"],
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wno-unused-function"],
            optional=True,
        )
    ]
)
