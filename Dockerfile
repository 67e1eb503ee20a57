# stockd in a container: docker-compose.yml runs two of these behind nginx.
#
#   docker build -t stockd .
#   docker run --rm -p 127.0.0.1:8080:8080 -e STOCKD_ADMIN_TOKEN=... \
#       -e STOCKD_MYSQL_HOST=... stockd
#
# Every setting comes from the STOCKD_* environment (stockd --help lists them).
# The image listens on 0.0.0.0:8080, and stockd refuses to listen on an
# address other than loopback without an admin token: STOCKD_ADMIN_TOKEN must
# be given at run time (the image carries none; POST /stock/reset then needs
# `Authorization: Bearer <token>`).

# ---- build: the same `make build` as on a workstation (scripts/deps.sh build
# installs the compiler and the -dev packages it names). web/ holds the live
# page (HTML, CSS, JS) that the build compiles into the binary.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/ scripts/
RUN scripts/deps.sh build && rm -rf /var/lib/apt/lists/*
COPY Makefile ./
COPY web/ web/
COPY server/ server/
RUN make build

# ---- runtime: the shared libraries build/stockd links against, nothing else.
FROM debian:12
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libmicrohttpd12 libjansson4 libhiredis0.14 libmariadb3 libzookeeper-mt2 libcurl4 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin stockd
COPY --from=build /src/build/stockd /usr/local/bin/stockd
COPY deploy/stockd-health /usr/local/bin/stockd-health
ENV STOCKD_LISTEN=0.0.0.0 \
    STOCKD_PORT=8080
USER stockd
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 CMD ["stockd-health"]
ENTRYPOINT ["/usr/local/bin/stockd"]
