# Prometheus of Debian 12 (2.42, the one `make compare` starts beside the
# private stack), scraping the lab's replicas with deploy/prometheus.yml.
#
#   docker build -f deploy/prometheus.Dockerfile -t stockd-prometheus .
FROM debian:12
RUN apt-get update \
    && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o prometheus -g prometheus /prometheus
COPY deploy/stockd-health /usr/local/bin/stockd-health
USER prometheus
EXPOSE 9090
CMD ["prometheus", "--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", \
     "--web.listen-address=:9090"]
