# The load generator of docker-compose.yml: Apache JMeter 5.x (the upstream
# binary release, checked against the SHA-512 that Apache publishes for it),
# a headless JRE and python3, with jmeter/ of this repository (deduct.jmx,
# deduct.properties, compare) and lab/, the orchestrator compare runs on.
# Built with the repository as its context:
#
#   docker build -f deploy/jmeter.Dockerfile -t stockd-jmeter .
#
# Another JMeter release needs both build arguments: JMETER_VERSION and its
# JMETER_SHA512 (https://archive.apache.org/dist/jmeter/binaries/, the .sha512
# file beside the .tgz).
FROM debian:bookworm-slim
ARG JMETER_VERSION=5.6.3
ARG JMETER_SHA512=5978a1a35edb5a7d428e270564ff49d2b1b257a65e17a759d259a9283fc17093e522fe46f474a043864aea6910683486340706d745fcdf3db1505fd71e689083
ARG JMETER_URL=https://archive.apache.org/dist/jmeter/binaries
# (the JRE's postinst wants the man directory that slim images leave out)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless python3 curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && cd /tmp \
    && curl -fsSLO "$JMETER_URL/apache-jmeter-$JMETER_VERSION.tgz" \
    && echo "$JMETER_SHA512  apache-jmeter-$JMETER_VERSION.tgz" | sha512sum -c - \
    && tar -xzf "apache-jmeter-$JMETER_VERSION.tgz" -C /opt \
    && ln -s "apache-jmeter-$JMETER_VERSION" /opt/jmeter \
    && rm -f /tmp/apache-jmeter-*
WORKDIR /stockd
COPY jmeter/deduct.jmx jmeter/deduct.properties jmeter/compare jmeter/
COPY lab/ lab/
COPY deploy/jmeter-entrypoint /usr/local/bin/jmeter-entrypoint
# JMETER=jmeter: the Apache release runs as it is (jmeter/jmeter, the wrapper,
# is only for Debian's JMeter 2.13).
ENV PATH=/opt/jmeter/bin:$PATH \
    JMETER=jmeter \
    RESULTS_DIR=/stockd/results
# The command runs as the owner of $RESULTS_DIR (see deploy/jmeter-entrypoint).
ENTRYPOINT ["/usr/local/bin/jmeter-entrypoint"]
CMD ["jmeter/compare"]
