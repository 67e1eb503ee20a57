"""The client side of the contract (/work/shared/DESIGN.md's API): what a client sends
stockd, or a foreign service, and what it makes of the answers. Nothing here starts,
breaks or judges anything.

    api           HTTP client for stockd: /strategies, /stock/{p}, reset, /health,
                  /metrics, the X-Stockd-Instance header
    facts         the strategies' facts from GET /strategies (store, claims,
                  contention, lease, exposed_by, needs, failover, cluster): nothing is
                  known by name; check_needs against GET /health
    orders        the expiry mechanisms' facts (GET /expiry), an order's record
                  (GET /orders/{ID})
    outcomes      answers counted by outcome: sold, sold_out, busy, outcome_unknown,
                  errors by word; the ledger rule
    sales         the one deduct path, one sale and its answer, a sale in the background
    sources       the sale script and SQL texts, and strategy names, read from server/*.c
    target        a target file (TOML): how to reset, buy, read the answers and the
                  stock of a service that is not stockd, checked before any load
"""
