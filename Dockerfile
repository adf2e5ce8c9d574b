# digest-bot: a multi-stage image; the bot runs as an unprivileged user.
#   docker build -t digest-bot .
#   docker run --env-file deploy/bot.env -v digest-state:/var/lib/digest-bot digest-bot
# Configuration comes from DIGEST_BOT_* variables (secrets from an env file, or *_FILE
# variables pointing at mounted secrets); see docs/deploy.md.

ARG PYTHON=python:3.12-slim-bookworm

# ---- build: a virtualenv with the locked dependencies and the bot, made by deploy/install.sh
FROM ${PYTHON} AS build
ARG VENV=/opt/digest-bot
ARG EXTRAS="postgres http"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/ requirements/
COPY digest_core/ digest_core/
COPY bots/ bots/
COPY deploy/install.sh deploy/install.sh
# uv, the version requirements/tools.lock pins: install.sh installs with it (pip without it)
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /usr/local/bin/uv
RUN deploy/install.sh "$VENV" $EXTRAS

# ---- runtime: the virtualenv and the bundled sample archive, no compilers, no root
FROM ${PYTHON}
ARG VENV=/opt/digest-bot
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/digest-bot \
        --create-home --shell /usr/sbin/nologin digest
COPY --from=build ${VENV} ${VENV}
COPY archive/ /srv/digest-bot/archive/
ENV PATH=${VENV}/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DIGEST_BOT_ARCHIVE_DIR=/srv/digest-bot/archive \
    DIGEST_BOT_DATABASE_URL=sqlite+aiosqlite:////var/lib/digest-bot/digest-bot.db \
    DIGEST_BOT_HTTP__LISTEN=127.0.0.1:9464
USER digest
WORKDIR /var/lib/digest-bot
VOLUME ["/var/lib/digest-bot"]
# /healthz answers while the process is alive ([http] listen above)
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["digest-bot"]
CMD ["run"]
