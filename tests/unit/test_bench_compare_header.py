"""The comparison's results header says what ferry ran with beyond the shared defaults."""

from bench.compare import _extra_settings


def test_no_extra_settings_adds_nothing() -> None:
    assert _extra_settings([]) == ""
    assert _extra_settings(None) == ""


def test_each_extra_setting_is_named_verbatim() -> None:
    text = _extra_settings(["B.producer.linger.ms=2", "ferry.bins=4"])
    assert "`B.producer.linger.ms=2`" in text
    assert "`ferry.bins=4`" in text
    assert text.startswith("ferry alone")
