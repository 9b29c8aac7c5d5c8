# chatmend: the repairing proxy, listening on 0.0.0.0:8787 in the container.
#
#   docker build -t chatmend:0.1.0 .
#   docker run --rm -p 127.0.0.1:8787:8787 chatmend:0.1.0
#   docker run --rm -p 127.0.0.1:8787:8787 \
#     -v "$PWD/config.yaml:/etc/chatmend/config.yaml:ro" chatmend:0.1.0
#
# The config is read from /etc/chatmend/config.yaml ($CHATMEND_CONFIG). The image ships that
# file empty (embedded defaults, and $CHATMEND_UPSTREAM still applies); mount yours over it.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The runtime dependencies only (no test or bench extras), at the lock's versions (the build's
# setuptools too: PIP_CONSTRAINT reaches pip's isolated build); the source is not kept.
COPY pyproject.toml README.md requirements.lock /src/
COPY proxy /src/proxy
COPY rules /src/rules
RUN PIP_CONSTRAINT=/src/requirements.lock pip install /src && rm -rf /src

RUN groupadd --system --gid 10001 chatmend \
    && useradd --system --uid 10001 --gid chatmend --no-create-home \
       --shell /usr/sbin/nologin chatmend \
    && mkdir -p /etc/chatmend \
    && printf '# Mount your chatmend config over this file (see config.example.yaml).\n' \
       > /etc/chatmend/config.yaml
ENV CHATMEND_CONFIG=/etc/chatmend/config.yaml

# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 8787

# Liveness, with the standard library (slim has no curl); any non-2xx or error exits 1.
# It calls port 8787: keep --port 8787 in the container (map another port outside).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=4)"]

ENTRYPOINT ["chatmend"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8787"]
