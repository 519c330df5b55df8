# syntax=docker/dockerfile:1
# jobvisor: the supervisor image.
#
#   docker build -t jobvisor .
#   docker run --rm -e JOBVISOR_DATABASE_URL=postgresql://… jobvisor migrate
#   docker run -e JOBVISOR_DATABASE_URL=postgresql://… -e JOBVISOR_APP=myapp.jobs:registry jobvisor
#
# Applications build FROM this image and add their handler package
# (pip install --no-cache-dir ./myapp), or install jobvisor into their own.

ARG PYTHON_IMAGE=python:3.11-slim

# --- stage 1: build wheels for jobvisor and every dependency --------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --wheel-dir /wheels .

# --- stage 2: the runtime, without compilers or the source ----------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    JOBVISOR_HTTP_ADDR=0.0.0.0:9090 \
    JOBVISOR_LOG_FORMAT=json
# The wheels are mounted for the install only, so they never become a layer.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels /wheels/*.whl \
    && groupadd --system --gid 10001 jobvisor \
    && useradd --system --uid 10001 --gid jobvisor --home-dir /var/lib/jobvisor \
       --shell /usr/sbin/nologin jobvisor \
    && install -d -o jobvisor -g jobvisor -m 0750 /var/lib/jobvisor
WORKDIR /var/lib/jobvisor
USER 10001:10001
EXPOSE 9090
# SIGTERM starts the graceful drain. Exec form: jobvisor itself is PID 1 and gets
# the signal (no shell in between to swallow it); it handles SIGTERM explicitly
# and reaps its own workers, so no init process is needed.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:9090/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["jobvisor"]
CMD ["run"]
