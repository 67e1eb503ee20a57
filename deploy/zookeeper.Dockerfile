# ZooKeeper 3.8 of Debian 12, as the private stack runs it (scripts/backends.sh
# start_zk): the server's jar on a JRE, standalone, with deploy/zookeeper-run
# writing its zoo.cfg. zk-lock's ephemeral nodes need no state across restarts.
#
#   docker build -f deploy/zookeeper.Dockerfile -t stockd-zookeeper .
FROM debian:12
RUN apt-get update \
    && apt-get install -y --no-install-recommends zookeeper libslf4j-java \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o zookeeper -g zookeeper /data
COPY deploy/zookeeper-run /usr/local/bin/zookeeper-run
USER zookeeper
EXPOSE 2181
CMD ["/usr/local/bin/zookeeper-run"]
