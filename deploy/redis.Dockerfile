# Redis 7.0 of Debian 12, the release the private stack and the tests run: one
# image for the lab's primary, its replica, the three Sentinels and the three
# Redlock servers (docker-compose.yml gives each its command).
#
#   docker build -f deploy/redis.Dockerfile -t stockd-redis .
FROM debian:12
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server redis-sentinel redis-tools \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o redis -g redis /data
WORKDIR /data
USER redis
EXPOSE 6379 26379
CMD ["redis-server", "--dir", "/data"]
