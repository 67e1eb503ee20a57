# The load generator of docker-compose.yml: Apache JMeter 5.x (the upstream
# binary release, checked against its published SHA-512), a headless JRE and
# python3, with jmeter/ of this repository (deduct.jmx, deduct.properties,
# compare) and lab/, the orchestrator compare runs on. Built with the
# repository as its context:
#
#   docker build -f deploy/jmeter.Dockerfile -t stockd-jmeter .
FROM debian:bookworm-slim
ARG JMETER_VERSION=5.6.3
ARG JMETER_URL=https://archive.apache.org/dist/jmeter/binaries
# (the JRE's postinst wants the man directory that slim images leave out)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless python3 curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && cd /tmp \
    && curl -fsSLO "$JMETER_URL/apache-jmeter-$JMETER_VERSION.tgz" \
    && curl -fsSLO "$JMETER_URL/apache-jmeter-$JMETER_VERSION.tgz.sha512" \
    && sum="$(tr -d ' \r\n' <"apache-jmeter-$JMETER_VERSION.tgz.sha512" | grep -oiE '[0-9a-f]{128}' | head -n 1 | tr 'A-F' 'a-f')" \
    && test -n "$sum" \
    && echo "$sum  apache-jmeter-$JMETER_VERSION.tgz" | sha512sum -c - \
    && tar -xzf "apache-jmeter-$JMETER_VERSION.tgz" -C /opt \
    && ln -s "apache-jmeter-$JMETER_VERSION" /opt/jmeter \
    && rm -f /tmp/apache-jmeter-*
WORKDIR /stockd
COPY jmeter/deduct.jmx jmeter/deduct.properties jmeter/compare jmeter/
COPY lab/ lab/
# JMETER=jmeter: the Apache release runs as it is (jmeter/jmeter, the wrapper,
# is only for Debian's JMeter 2.13).
ENV PATH=/opt/jmeter/bin:$PATH \
    JMETER=jmeter \
    RESULTS_DIR=/stockd/results
CMD ["jmeter/compare"]
