"""The environment ``make setup`` builds is the locked one, and every run records which lock it was made under."""

from harness.runner import provenance


def test_setup_installs_exactly_the_lock():
    info = provenance.lock()
    assert info["lock"] != "none", "requirements.lock is missing from the checkout"
    assert info["lock_match"] == "exact", f"installed versions differ from requirements.lock ({info['lock_match']}); run make setup"


def test_lock_drift_is_counted(tmp_path, monkeypatch):
    lock = tmp_path / "requirements.lock"
    lock.write_text("# header\nnumpy==0.0.1\nduckdb==0.0.1\nno-such-package-anywhere==1.0\n", encoding="utf-8")
    monkeypatch.setattr(provenance, "LOCK", lock)
    assert provenance.lock()["lock_match"] == "drift: 3"
    assert provenance.versions()["lock"] == provenance.lock()["lock"]
