'use strict';
/*
 * The bench's peer: what a team that does not write C would build for the
 * same sales, on Node.js's usual stack, so that `make bench` can measure
 * stockd next to it on the same stack, products and load.
 *
 *   GET /stock/deduct/LUA?product=P&qty=N  the `lua` sale: stockd's own sale
 *       script by EVALSHA (ioredis defineCommand: EVALSHA, EVAL once on
 *       NOSCRIPT), every command of a tick sent in one write (ioredis
 *       enableAutoPipelining), the keys stockd uses (stock:{P}, ledger:{P})
 *   GET /stock/deduct/SQL?product=P&qty=N  the `sql` sale: stockd's own
 *       conditional UPDATE and ledger INSERT in one transaction, as prepared
 *       statements (mysql2 execute) on a pool's connection; when the UPDATE
 *       matches nothing, stockd's read of the stock's row says why
 *   GET /strategies                        stockd's GET /strategies bytes,
 *       held in memory (a static JSON answer)
 *
 * Nothing of the sale is written here: the script, the two statements, the
 * two strategies' names (LUA, SQL) and the static bytes come from the bench
 * (lab/drivers/peer.py), which reads them from stockd's sources and its GET
 * /strategies, so the two servers do the same work. Answers follow stockd's
 * contract for these cases: 200 sold, 409 sold_out, 404 unknown_product, 400
 * bad_request, 503 backend_unavailable.
 *
 * Production settings as fastify documents them: no request logging (the
 * logger off, as in fastify's own benchmarks), response schemas so that
 * replies go through fast-json-stringify, a query schema so that bad input
 * is refused before a handler runs, keep-alive left on; and mysql2's `trace:
 * false`, which mysql2 documents as saving a stack capture on every call (a
 * long stack trace for errors that this service answers as 503 anyway). Node
 * runs JavaScript on one thread, so the cluster module starts one process
 * per core, or PEER_WORKERS: each has its own Redis connection and its own
 * MySQL pool, and the pools together hold PEER_MYSQL_CONNECTIONS
 * connections, as stockd's workers hold one each. The bench asks for one
 * process where the cores are shared with the load generator and the
 * backends (bench/README.md says why).
 *
 * Settings, all from the environment: PEER_HOST, PEER_PORT, PEER_WORKERS,
 * PEER_REDIS_HOST, PEER_REDIS_PORT, PEER_MYSQL_HOST, PEER_MYSQL_PORT,
 * PEER_MYSQL_USER, PEER_MYSQL_PASSWORD_FILE and PEER_REDIS_PASSWORD_FILE
 * (files holding the passwords, as stockd is given them), PEER_MYSQL_DB,
 * PEER_MYSQL_CONNECTIONS, PEER_LUA_NAME and PEER_SQL_NAME (the two
 * strategies' names), PEER_SALE_SCRIPT (the Lua source), PEER_DEDUCT_SQL,
 * PEER_INSERT_SQL, PEER_READ_SQL (the stock's row, to tell sold_out from
 * unknown_product), PEER_SQL_STRATEGY (the ledger rows' strategy),
 * PEER_STATIC_FILE (the GET /strategies bytes).
 */
const cluster = require('node:cluster');
const fs = require('node:fs');
const os = require('node:os');

function setting(name, fallback) {
  const v = process.env[name];
  if (v !== undefined && v !== '') return v;
  if (fallback === undefined) throw new Error(`${name} is not set`);
  return fallback;
}

// The first line of the file the setting names; '' when it names none.
function secret(name) {
  const path = setting(name, '');
  return path ? fs.readFileSync(path, 'utf8').split(/\r?\n/)[0] : '';
}

const workers = Number(setting('PEER_WORKERS', String(os.availableParallelism())));

if (cluster.isPrimary && workers > 1) {
  for (let i = 0; i < workers; i++) cluster.fork();
  // A worker that dies takes the peer down: the bench must see it, not a
  // server quietly running on fewer cores.
  cluster.on('exit', (w, code, signal) => {
    console.error(`peer: worker ${w.process.pid} ended (${signal || code})`);
    process.exit(1);
  });
  const stop = () => {
    for (const id in cluster.workers) cluster.workers[id].process.kill('SIGTERM');
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} else {
  serve().catch((e) => {
    console.error(`peer: ${e.stack || e}`);
    process.exit(1);
  });
}

async function serve() {
  const Fastify = require('fastify');
  const Redis = require('ioredis');
  const mysql = require('mysql2/promise');

  const strategies = fs.readFileSync(setting('PEER_STATIC_FILE'));
  const luaName = setting('PEER_LUA_NAME');
  const sqlName = setting('PEER_SQL_NAME');
  const insertStrategy = setting('PEER_SQL_STRATEGY');
  const deductSql = setting('PEER_DEDUCT_SQL');
  const insertSql = setting('PEER_INSERT_SQL');
  const readSql = setting('PEER_READ_SQL');

  const redis = new Redis({
    host: setting('PEER_REDIS_HOST', '127.0.0.1'),
    port: Number(setting('PEER_REDIS_PORT')),
    password: secret('PEER_REDIS_PASSWORD_FILE') || undefined,
    enableAutoPipelining: true,
  });
  redis.defineCommand('sell', { numberOfKeys: 2, lua: setting('PEER_SALE_SCRIPT') });

  const pool = mysql.createPool({
    host: setting('PEER_MYSQL_HOST', '127.0.0.1'),
    port: Number(setting('PEER_MYSQL_PORT')),
    user: setting('PEER_MYSQL_USER'),
    password: secret('PEER_MYSQL_PASSWORD_FILE'),
    database: setting('PEER_MYSQL_DB'),
    connectionLimit: Math.max(1, Math.round(Number(setting('PEER_MYSQL_CONNECTIONS', '16')) /
                                            workers)),
    trace: false,
  });

  const app = Fastify({ logger: false });

  const query = {
    type: 'object',
    properties: {
      product: { type: 'integer', minimum: 1, maximum: 2147483647, default: 1001 },
      qty: { type: 'integer', minimum: 1, maximum: 1000000, default: 1 },
    },
  };
  const answer = {
    type: 'object',
    properties: {
      ok: { type: 'boolean' },
      strategy: { type: 'string' },
      product: { type: 'integer' },
      qty: { type: 'integer' },
      remaining: { type: 'integer' },
      error: { type: 'string' },
      message: { type: 'string' },
    },
  };
  const schema = { querystring: query, response: { 200: answer, '4xx': answer, 503: answer } };

  app.setErrorHandler((err, req, reply) => {
    if (err.validation) return refused(reply, 400, 'bad_request', err.message);
    return refused(reply, 503, 'backend_unavailable', err.message);
  });

  function refused(reply, code, error, message) {
    return reply.code(code).send({ ok: false, error, message });
  }

  app.get('/strategies', (req, reply) => {
    reply.type('application/json').send(strategies);
  });

  app.get(`/stock/deduct/${luaName}`, { schema }, async (req, reply) => {
    const { product, qty } = req.query;
    const [sold, count] = await redis.sell(`stock:{${product}}`, `ledger:{${product}}`, qty);
    if (sold < 0) {
      return refused(reply, 404, 'unknown_product', `product ${product} is not in redis`);
    }
    if (sold === 0) return refused(reply, 409, 'sold_out', `${count} left, ${qty} asked`);
    return { ok: true, strategy: luaName, product, qty, remaining: count };
  });

  app.get(`/stock/deduct/${sqlName}`, { schema }, async (req, reply) => {
    const { product, qty } = req.query;
    const conn = await pool.getConnection();
    try {
      await conn.beginTransaction();
      const [deducted] = await conn.execute(deductSql, [qty, product, qty]);
      if (deducted.affectedRows !== 1) {
        await conn.rollback();
        const [rows] = await conn.execute(readSql, [product]);
        if (rows.length === 0) {
          return refused(reply, 404, 'unknown_product', `no product ${product}`);
        }
        return refused(reply, 409, 'sold_out', `${rows[0].count} left, ${qty} asked`);
      }
      await conn.execute(insertSql, [product, insertStrategy, qty]);
      await conn.commit();
      return { ok: true, strategy: sqlName, product, qty };
    } catch (e) {
      await conn.rollback().catch(() => {});
      throw e;
    } finally {
      conn.release();
    }
  });

  await app.listen({ host: setting('PEER_HOST', '127.0.0.1'), port: Number(setting('PEER_PORT')) });
  const close = () => app.close()
    .then(() => Promise.all([redis.quit(), pool.end()]))
    .then(() => process.exit(0));
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
}
