# MariaDB 10.11 of Debian 12, the server the private stack and every test run
# (not MySQL: stockd is never tested against it). deploy/mariadb-entrypoint
# makes the data directory on the first start of an empty volume: the stockd
# account with the generated password, sql/schema.sql and sql/seed.sql.
#
#   docker build -f deploy/mariadb.Dockerfile -t stockd-mariadb .
FROM debian:12
# The package's own data directory goes: the volume starts empty, and the
# entrypoint makes it.
RUN apt-get update \
    && apt-get install -y --no-install-recommends mariadb-server mariadb-client \
    && rm -rf /var/lib/apt/lists/* /var/lib/mysql \
    && install -d -o mysql -g mysql /var/lib/mysql /run/mysqld
COPY sql/schema.sql sql/seed.sql /usr/local/share/stockd/
COPY deploy/mariadb-entrypoint /usr/local/bin/mariadb-entrypoint
EXPOSE 3306
ENTRYPOINT ["/usr/local/bin/mariadb-entrypoint"]
