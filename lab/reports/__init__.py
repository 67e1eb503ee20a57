"""The reports: rows as tables, pages, pictures and junit.xml, and the headless browser
that checks a page shows them.

    tables        rows as text tables, JSON and CSV
    html          the self-contained HTML pieces: page, table, inline SVG charts
    junit         a run's rows as junit.xml (tests/junit.xsd)
    compare_report, bench_report   report.html and bench.html
    race_report   report.html's race timelines (web/race.js)
    audit_report  the audit's table and report.html, a run's timeline from its answers
    failover_report, cluster_report   the failover's and the cluster's tables and
                  pictures (a failover window row's columns, which each run's table
                  names)
    orders_report  the orders run's table, files and the picture of a payment racing
                   its expiry
    browser       a report checked in headless Chromium
    devtools      one page in headless Chromium over the DevTools protocol (a pipe)
"""
