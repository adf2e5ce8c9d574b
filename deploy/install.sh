#!/bin/sh
# Install digest-bot into a virtualenv from this checkout, with exactly the locked versions.
# The one set of install steps: the Dockerfile runs it, docs/deploy.md runs it for systemd,
# and tests/deploy/test_install.py runs it in a temporary venv.
#
#   deploy/install.sh VENV [EXTRA...]     e.g. deploy/install.sh /opt/digest-bot postgres
#
# EXTRA names optional extras beyond the locked run set (telegram + discord), e.g. postgres.
# With uv (the variable UV, else `uv` on PATH; the Dockerfile copies the version pinned in
# requirements/tools.lock) the install takes about half of pip's time; without it, pip does
# the same from the same lock. Either way the modules are byte-compiled, as the image runs
# with PYTHONDONTWRITEBYTECODE=1 and would otherwise compile them at every start.
set -eu
venv=${1:?usage: deploy/install.sh VENV [EXTRA...]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
uv=${UV:-$(command -v uv || true)}
if [ -n "$uv" ]; then
    [ -x "$venv/bin/python" ] || python3 -m venv --without-pip "$venv"
    install="$uv pip install --quiet --python $venv/bin/python --compile-bytecode"
else
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    install="$venv/bin/python -m pip install --disable-pip-version-check --no-input --quiet"
fi
$install -r "$here/requirements/run.lock"
extras=""
for extra in "$@"; do extras="${extras:+$extras,}$extra"; done
if [ -n "$extras" ]; then
    # extras outside the lock (asyncpg for postgres) resolve against what is installed
    $install "$here[$extras]"
else
    # the bot itself, without touching the locked dependencies
    $install --no-deps "$here"
fi
"$venv/bin/digest-bot" --help >/dev/null
echo "installed: $venv/bin/digest-bot"
