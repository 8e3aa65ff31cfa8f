FROM python:3.11-slim
# LOCK picks the environment's lock in .ci/locks/: app (the platform) or gpu (the platform with
# vLLM for GPU workers). Every package is pinned with its hashes; nothing is resolved here.
ARG LOCK=app
RUN apt-get update && apt-get install -y --no-install-recommends ffmpeg && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir --require-hashes --no-deps -r ".ci/locks/${LOCK}.txt" \
 && pip install --no-cache-dir --no-deps --no-build-isolation .
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
