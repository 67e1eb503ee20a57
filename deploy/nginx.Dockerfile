# nginx of Debian 12 (nginx-light, as the private stack's balancer), in front of
# the lab's stockd replicas; docker-compose.yml mounts deploy/nginx.compose.conf
# as its configuration. The healthcheck asks a replica's GET /health through it.
#
#   docker build -f deploy/nginx.Dockerfile -t stockd-nginx .
FROM debian:12
RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx-light \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/stockd-health /usr/local/bin/stockd-health
EXPOSE 8080
CMD ["nginx", "-g", "daemon off;"]
