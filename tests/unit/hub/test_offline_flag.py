"""Offline mode as huggingface_hub reads it: kernel-deps is offline exactly when
huggingface_hub is, and a value huggingface_hub reads as "off" without it being plainly
off (``" 1 "``, ``maybe``) is bad input naming the variable, never a silent guess."""

from __future__ import annotations

import pytest
from huggingface_hub import constants

from tests.fixtures.cli import run_kernels
from tests.fixtures.projects import write_project

PLAINLY_OFF = ("", "0", "false", "no", "off", "False", "OFF", "No")
HF_ON = ("1", "true", "yes", "on", "TRUE", "On", "yEs")
AMBIGUOUS = (" 1 ", "1 ", "\ttrue", "on\n", " 0 ", "0 ", "maybe", "2")


@pytest.fixture
def app(hub_env, tmp_path):
    return write_project(tmp_path / "app", '"kernels-test/rotary" = ">=1"')


@pytest.mark.parametrize("value", PLAINLY_OFF + HF_ON + AMBIGUOUS)
def test_offline_mode_is_what_huggingface_hub_reads_or_bad_input(app, value) -> None:
    result = run_kernels("lock", str(app), env={"HF_HUB_OFFLINE": value})
    if constants._is_true(value):  # huggingface_hub's own rule, from the installed package
        assert result.returncode == 1, result.stderr
        assert "HF_HUB_OFFLINE is set, but this needs the Hub" in result.stderr
    elif value in PLAINLY_OFF:
        assert result.returncode == 0, result.stderr
    else:
        assert value in AMBIGUOUS  # huggingface_hub reads it as off; kernel-deps refuses to guess
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"error: HF_HUB_OFFLINE={value!r}: expected 1 or 0 (also true/false, yes/no, on/off)\n"
    assert (app / "kernels.lock").exists() == (result.returncode == 0)


def test_transformers_offline_counts_where_huggingface_hub_reads_it(app) -> None:
    """huggingface_hub reads TRANSFORMERS_OFFLINE when HF_HUB_OFFLINE is unset or empty."""
    for hf_hub_offline in (None, ""):
        result = run_kernels("lock", str(app), env={"HF_HUB_OFFLINE": hf_hub_offline, "TRANSFORMERS_OFFLINE": "1"})
        assert result.returncode == 1 and result.stderr.strip().endswith(
            ": TRANSFORMERS_OFFLINE is set, but this needs the Hub; unset it to go online"
        )
    result = run_kernels("lock", str(app), env={"HF_HUB_OFFLINE": " 1", "TRANSFORMERS_OFFLINE": "1"})
    assert result.returncode == 2 and "HF_HUB_OFFLINE=' 1'" in result.stderr
    result = run_kernels("lock", str(app), env={"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    assert (app / "kernels.lock").exists()
