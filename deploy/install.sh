#!/bin/sh
# Install digest-bot into a virtualenv from this checkout, with exactly the locked versions.
# The one set of install steps: the Dockerfile runs it, docs/deploy.md runs it for systemd,
# and tests/deploy/test_install.py runs it in a temporary venv.
#
#   deploy/install.sh VENV [EXTRA...]     e.g. deploy/install.sh /opt/digest-bot postgres
#
# EXTRA names optional extras beyond the locked run set (telegram + discord), e.g. postgres.
set -eu
venv=${1:?usage: deploy/install.sh VENV [EXTRA...]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip="$venv/bin/python -m pip --disable-pip-version-check --no-input"
$pip install --quiet -r "$here/requirements/run.lock"
extras=""
for extra in "$@"; do extras="${extras:+$extras,}$extra"; done
if [ -n "$extras" ]; then
    # extras outside the lock (asyncpg for postgres) resolve against what is installed
    $pip install --quiet "$here[$extras]"
else
    # the bot itself, without touching the locked dependencies
    $pip install --quiet --no-deps "$here"
fi
"$venv/bin/digest-bot" --help >/dev/null
echo "installed: $venv/bin/digest-bot"
