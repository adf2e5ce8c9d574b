"""The deploy files do what they say: the Dockerfile's install steps and the systemd unit's
command line, run for real in a virtualenv (no Docker daemon or systemd needed)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests import ports
from tests.samples import SAMPLE_ARCHIVE

# real processes; one worker builds the virtualenv once for all of them (tests/xdist_groups.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("deploy"), pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
UNIT = ROOT / "deploy" / "digest-bot.service"
COMPOSE = ROOT / "compose.yaml"
#: set in CI: a missing network fails the install tests instead of skipping them
REQUIRE_ENV = "DIGEST_BOT_REQUIRE_NETWORK"


def dockerfile_stages(text: str) -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, (KEYWORD, arguments), per stage; continuation lines
    joined, comments dropped; instructions before the first FROM form stage 0."""
    joined = re.sub(r"\\\n", " ", text)
    stages: list[list[tuple[str, str]]] = [[]]
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        stages[-1].append((keyword.upper(), rest.strip()))
    return stages


def unit_service(text: str) -> dict[str, list[str]]:
    """The [Service] section of a systemd unit: key -> every value given."""
    out: dict[str, list[str]] = {}
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def _args(instructions: list[tuple[str, str]]) -> dict[str, str]:
    found = {}
    for keyword, rest in instructions:
        if keyword == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            found[name] = " ".join(shlex.split(value))
    return found


def _env(rest: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in shlex.split(rest))


# ---------------------------------------------------------------- what the files promise


def test_dockerfile_is_multi_stage_and_runs_as_a_user() -> None:
    stages = dockerfile_stages(DOCKERFILE.read_text())
    froms = [rest for stage in stages for k, rest in stage if k == "FROM"]
    assert len(froms) >= 2 and " AS build" in froms[0]
    runtime = stages[-1]
    users = [rest for k, rest in runtime if k == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert any(k == "COPY" and rest.startswith("--from=build") for k, rest in runtime)
    assert any(k == "HEALTHCHECK" for k, _ in runtime)


def test_systemd_unit_is_hardened() -> None:
    service = unit_service(UNIT.read_text())
    assert service["DynamicUser"] == ["yes"]
    assert service["ProtectSystem"] == ["strict"]
    assert service["StateDirectory"] == ["digest-bot"]
    assert service["WorkingDirectory"] == ["/var/lib/digest-bot"]
    assert service["NoNewPrivileges"] == ["yes"]
    assert service["CapabilityBoundingSet"] == [""]


def test_compose_runs_the_bot_after_a_healthy_postgres() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    bot, pg = compose["services"]["bot"], compose["services"]["postgres"]
    assert bot["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in bot and "healthcheck" in pg
    assert any(v.endswith(":/srv/digest-bot/archive:ro") for v in bot["volumes"])
    for service in (bot, pg):
        for env_file in service["env_file"]:
            assert (ROOT / (env_file + ".example")).is_file(), env_file
    assert (ROOT / bot["build"] / "Dockerfile").is_file()
    # the env-file examples hold no secrets, and the real ones are never committed
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "deploy/*.env" in ignored


# ---------------------------------------------------------------- the steps, for real


def _network() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Dockerfile's build stage replayed: its COPY lines into a build folder, then its
    RUN lines with its ARGs (VENV in a temporary folder); returns the virtualenv."""
    if not _network():
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail("no network to PyPI, and DIGEST_BOT_REQUIRE_NETWORK=1")
        pytest.skip("no network to PyPI: the install steps need it")
    base = tmp_path_factory.mktemp("image")
    build = base / "src"
    build.mkdir()
    stage = dockerfile_stages(DOCKERFILE.read_text())[1]
    args = _args(stage)
    venv = base / "opt" / "digest-bot"
    args["VENV"] = str(venv)
    for keyword, rest in stage:
        if keyword == "COPY" and not rest.startswith("--"):
            *sources, dest = shlex.split(rest)
            for source in sources:
                target = build / (dest.rstrip("/") if dest not in ("./", ".") else "")
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, target, dirs_exist_ok=True)
                else:
                    if dest.endswith("/") or dest in ("./", "."):
                        target = target / Path(source).name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / source, target)
        elif keyword == "RUN":
            subprocess.run(
                ["sh", "-c", rest], cwd=build, env={**os.environ, **args, **_uv()}, check=True,
                timeout=600,
            )  # fmt: skip
    assert (venv / "bin" / "digest-bot").exists()
    return venv


def _uv() -> dict[str, str]:
    """The image's uv (``COPY --from=ghcr.io/astral-sh/uv``) stood in for by the same version
    installed beside the tests' interpreter (requirements/tools.lock), as ``UV``."""
    uv = Path(sys.executable).with_name("uv")
    return {"UV": str(uv)} if uv.exists() else {}


def test_the_images_uv_is_the_locked_one() -> None:
    """The Dockerfile copies the uv that requirements/tools.lock pins (what the tests use)."""
    [locked] = re.findall(r"^uv==(\S+)$", (ROOT / "requirements" / "tools.lock").read_text(), re.M)
    copied = re.findall(r"COPY --from=ghcr\.io/astral-sh/uv:(\S+) /uv ", DOCKERFILE.read_text())
    assert copied == [locked]


def _free_port() -> int:
    return ports.free_port()


def _runs_until_sigterm(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    ledger: Path,
    while_up: Callable[[], None] | None = None,
) -> str:
    """Start the bot, wait until its ledger exists and it says it runs (it is up), run
    ``while_up``, SIGTERM it: exit 0; its stderr."""
    err_path = cwd / "stderr.txt"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
        )
        deadline = time.monotonic() + 60
        while (
            not (ledger.exists() and "digest-bot running on" in err_path.read_text())
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert proc.poll() is None, err_path.read_text()
        try:
            if while_up is not None:
                while_up()
        finally:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, err_path.read_text()
    return err_path.read_text()


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIGEST_BOT_", "PYTHON"))}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    return env


@pytest.mark.network
def test_the_systemd_units_command_line_runs_the_installed_bot(
    installed: Path, tmp_path: Path
) -> None:
    """ExecStart as written, with /opt/digest-bot and /etc/digest-bot mapped to temporary
    folders, from the unit's WorkingDirectory (the state directory)."""
    service = unit_service(UNIT.read_text())
    [exec_start] = service["ExecStart"]
    state = tmp_path / "var-lib-digest-bot"
    state.mkdir()
    etc = tmp_path / "etc-digest-bot"
    etc.mkdir()
    (etc / "digest-bot.toml").write_text(
        f'archive_dir = "{SAMPLE_ARCHIVE}"\n'
        'database_url = "sqlite+aiosqlite:///digest-bot.db"\n'  # relative: the state dir
        "[schedule]\nenabled = false\n"
    )
    argv = [
        a.replace("/opt/digest-bot", str(installed)).replace("/etc/digest-bot", str(etc))
        for a in shlex.split(exec_start)
    ]
    [workdir] = service["WorkingDirectory"]
    assert workdir == "/var/lib/digest-bot"
    err = _runs_until_sigterm(
        argv, cwd=state, env=_clean_env(installed), ledger=state / "digest-bot.db"
    )
    assert "WARNING: no config file" not in err


@pytest.mark.network
def test_the_images_command_runs_with_the_images_environment(
    installed: Path, tmp_path: Path
) -> None:
    """ENTRYPOINT + CMD of the runtime stage with its ENV (paths mapped to temporary
    folders): configured by the environment alone, it warns about no default."""
    runtime = dockerfile_stages(DOCKERFILE.read_text())[-1]
    args = _args(runtime) | {"VENV": str(installed)}
    state = tmp_path / "state"
    state.mkdir()
    mapping = {
        "/var/lib/digest-bot": str(state),
        "/srv/digest-bot/archive": str(SAMPLE_ARCHIVE),
        "/opt/digest-bot": str(installed),
    }

    def mapped(value: str) -> str:
        value = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), value)
        for old, new in mapping.items():
            value = value.replace(old, new)
        return value

    env = _clean_env(installed)
    for keyword, rest in runtime:
        if keyword == "ENV":
            for name, value in _env(rest).items():
                if name != "PATH":
                    env[name] = mapped(value)
    entry = [rest for k, rest in runtime if k == "ENTRYPOINT"]
    cmd = [rest for k, rest in runtime if k == "CMD"]
    argv = [mapped(a) for a in json.loads(entry[-1]) + json.loads(cmd[-1])]
    argv[0] = str(installed / "bin" / argv[0])
    env["DIGEST_BOT_SCHEDULE__ENABLED"] = "false"
    # the image's HEALTHCHECK, on a free port instead of 9464 (other tests may hold it)
    port = _free_port()
    env["DIGEST_BOT_HTTP__LISTEN"] = env["DIGEST_BOT_HTTP__LISTEN"].replace("9464", str(port))
    [check] = [rest for k, rest in runtime if k == "HEALTHCHECK"]
    probe = json.loads(check.split(" CMD ", 1)[1].replace("9464", str(port)))
    probe[0] = str(installed / "bin" / probe[0])

    def healthy() -> None:
        assert subprocess.run(probe, env=env, timeout=30).returncode == 0

    err = _runs_until_sigterm(
        argv, cwd=state, env=env, ledger=state / "digest-bot.db", while_up=healthy
    )
    assert "WARNING: no config file" not in err


def test_install_script_is_the_one_the_dockerfile_runs() -> None:
    runs = [rest for k, rest in dockerfile_stages(DOCKERFILE.read_text())[1] if k == "RUN"]
    assert any(r.startswith("deploy/install.sh ") for r in runs)
    assert os.access(ROOT / "deploy" / "install.sh", os.X_OK)
