"""`ferry.copier`: which copy loop a task runs, and what happens when the native one is absent."""

from __future__ import annotations

import pytest

from ferry.engine.copy import native_loop as native_copier
from ferry.engine.spark.task_support import use_native


def test_python_is_used_when_asked_for_whatever_is_built() -> None:
    assert use_native("python") is False


def test_without_the_extension_auto_falls_back_and_native_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native_copier, "_loaded", True)
    monkeypatch.setattr(native_copier, "_module", None)
    monkeypatch.setattr(native_copier, "_reason", "ImportError: no _fastcopy")

    assert use_native("auto") is False
    with pytest.raises(RuntimeError, match=r"ferry.copier = native.*no _fastcopy.*make setup"):
        use_native("native")


@pytest.mark.skipif(
    native_copier.native_module() is None,
    reason="native copy loop not built (no C compiler at install): ferry copies with Python",
)
def test_the_built_extension_loads_against_confluent_kafkas_librdkafka() -> None:
    module = native_copier.native_module()
    assert module is not None
    version_text, _ = module.library_version()
    import confluent_kafka

    assert version_text == confluent_kafka.libversion()[0]
