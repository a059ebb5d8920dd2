"""Process tuning applied by the `memnmt` command (keras_memnmt.runtime)."""

import subprocess
import sys

import pytest

CHECK = ("from keras_memnmt.runtime import tune_malloc; import sys; "
         "sys.stdout.write(str(tune_malloc()))")


def _run(env_value):
    import os

    env = {**os.environ, "MEMNMT_MALLOC_TUNING": env_value}
    return subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_tune_malloc_applies_on_glibc_and_can_be_turned_off():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert _run("1") == "True"
    assert _run("0") == "False"
