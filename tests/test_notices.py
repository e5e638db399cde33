"""Dependencies speak through the project: a dependency's log goes to the project's debug log,
and its warnings reach the terminal once each, as one line in the project's words."""

from __future__ import annotations

import logging
import subprocess
import sys

import xla_cache

from jaxattn.core.notices import DEPENDENCY_LOG, route


def test_a_dependency_warning_is_one_line_once_and_its_whole_record_is_at_debug(capsys, caplog):
    route("fake_dependency", "Fake")
    route("fake_dependency", "Fake")  # idempotent: one handler each
    log = logging.getLogger("fake_dependency.sub")
    with caplog.at_level(logging.DEBUG, logger=DEPENDENCY_LOG):
        log.warning("\n  An accelerator may be present, but its plugin is missing.\nFalling back to cpu.")
        log.warning("\n  An accelerator may be present, but its plugin is missing.\nFalling back to cpu.")
        log.error("Could not write the cache entry")
        log.info("compiled in 1 s")  # below the logger's level: nothing anywhere
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "jaxattn: Fake: An accelerator may be present, but its plugin is missing.",
        "jaxattn: Fake: Could not write the cache entry",
    ]
    debug = [r.getMessage() for r in caplog.records if r.name == DEPENDENCY_LOG]
    assert len(debug) == 3 and debug[0].startswith("fake_dependency.sub: ") and "Falling back to cpu." in debug[0]


def test_a_command_routes_jax_through_the_project_and_prints_nothing_else_on_stderr():
    code = (
        "import logging, os\n"
        "from jaxattn.cli import main\n"
        "try:\n    main(['slm', 'bayes-risk', '--n', '1000'])\nexcept SystemExit:\n    pass\n"
        "logging.getLogger('jax._src.xla_bridge').warning('A GPU may be present, but no plugin.\\nmore')\n"
        "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
    )
    # a user's process: without the test run's XLA cache, which jaxattn leaves off where every
    # load from it logs an error line (jaxlib < 0.10.2 on CPU; the lowest versions' run saw them
    # where an earlier test had cached this command's programs)
    env = {k: v for k, v in xla_cache.uncached().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["jaxattn: JAX: A GPU may be present, but no plugin."]
    assert r.stdout.splitlines()[0].startswith("bayes_risk:") and r.stdout.splitlines()[-1] == "1"
