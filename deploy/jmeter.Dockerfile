# The load generator of docker-compose.yml: Debian 12's JMeter 2.13 with its
# HTTP sampler (jmeter-http), the JMeter every test and `make compare` run,
# through jmeter/jmeter (the wrapper that lets it load our plans: its class is
# compiled here, at build time, with the JDK), and python3 with lab/, the
# orchestrator jmeter/compare runs on.
#
#   docker build -f deploy/jmeter.Dockerfile -t stockd-jmeter .
FROM debian:12
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        jmeter jmeter-http default-jdk-headless python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /stockd
COPY jmeter/jmeter jmeter/deduct.jmx jmeter/deduct.properties jmeter/compare jmeter/
COPY lab/ lab/
COPY deploy/jmeter-entrypoint /usr/local/bin/jmeter-entrypoint
# JMeter's own log in /tmp: the comparison may run as the owner of ./results,
# who cannot write here. The wrapper's class is built now, into jmeter/.shim.
ENV JMETER_LOG=/tmp/jmeter.log \
    RESULTS_DIR=/stockd/results
RUN jmeter/jmeter --version >/dev/null \
    && test -f jmeter/.shim/com/thoughtworks/xstream/security/NoTypePermission.class
# The command runs as the owner of $RESULTS_DIR (see deploy/jmeter-entrypoint).
ENTRYPOINT ["/usr/local/bin/jmeter-entrypoint"]
CMD ["jmeter/compare"]
