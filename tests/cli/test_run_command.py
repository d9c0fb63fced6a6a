"""`stream-dedup run`: every setting is a flag; a bad setting exits 2 naming it, before any connection."""

import pytest

from stream_dedup.cli.main import main
from stream_dedup.cli.settings_sources import setting_types


def test_every_setting_has_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = capsys.readouterr().out
    for name in setting_types():
        assert f"--{name.replace('_', '-')}" in help_text, name


def test_a_bad_setting_exits_2_naming_it(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAM_DEDUP_SNAPSHOTS_KEPT", "0")
    assert main(["run", "--bootstrap-servers", "127.0.0.1:1"]) == 2
    assert "invalid setting 'snapshots_kept': must be positive" in capsys.readouterr().err
