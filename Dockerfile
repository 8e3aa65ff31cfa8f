FROM python:3.11-slim
ARG EXTRAS=""
RUN apt-get update && apt-get install -y --no-install-recommends ffmpeg && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir -c .ci/constraints.txt ".${EXTRAS:+[$EXTRAS]}"
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
