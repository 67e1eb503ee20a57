/*
 * lab.js - the live lab page: watch the race happen.
 *
 * Polls GET /lab/state once a second (the next poll starts only after the
 * last one finished, so a slow stockd never piles requests up) and draws:
 * per watched product and store the stock by the ledger (initial - sold:
 * below zero once units that never existed were sold), the store's own
 * counter, sold, oversold and lost updates, with a chart of the last minute;
 * per strategy with traffic its rate, answer mix and p99 over the last few
 * seconds (deltas of stockd's cumulative counters, kept per instance so that
 * several instances behind a balancer add up) and its claim from
 * GET /strategies; the worker pool's load and the backends. When polling
 * fails the page says so and keeps trying.
 *
 * Tests read the figures from stable attributes: body[data-state]
 * (loading, live, down), [data-product][data-store] [data-field] with the
 * figure in data-value, tr[data-strategy] [data-field], [data-backend].
 */
"use strict";

(function () {
    const POLL_MS = 1000;      /* one poll a second, never two at once      */
    const TIMEOUT_MS = 4000;   /* a poll slower than this counts as failed  */
    const WINDOW_MS = 5000;    /* rates, answer mix and p99 over this       */
    const CHART_MS = 60000;    /* the charts show the last minute           */
    const FACTS_RETRY_MS = 10000;
    const SVG = "http://www.w3.org/2000/svg";
    const STORE_TITLES = { mysql: "MySQL", redis: "Redis" };
    const FIELDS = ["remaining", "sold", "oversold", "lost_updates", "held", "paid", "returned"];
    const FIELD_TITLES = {
        remaining: "counter", sold: "sold", oversold: "oversold", lost_updates: "lost updates",
        held: "held", paid: "paid", returned: "returned",
    };
    const MIX = ["ok", "sold_out", "busy", "other"];
    const MIX_TITLES = { ok: "ok", sold_out: "sold out", busy: "busy", other: "other" };

    const $ = (selector) => document.querySelector(selector);

    const lab = {
        facts: null,          /* name -> GET /strategies entry, in its order */
        factsAt: -Infinity,
        factsPending: false,
        samples: new Map(),   /* instance -> [{t, le, strategies}], oldest first */
        views: new Map(),     /* instance -> {t, products}: its last answer's products */
        series: new Map(),    /* "product/store" -> [{t, stock, remaining}] */
        order: new Map(),     /* product -> when the page first saw it */
        seen: 0,
        oversold: new Map(),  /* "product/store" -> last oversold figure */
        lastOk: null,         /* {at: Date.now(), doc} */
        failingSince: null,
        failures: 0,
        lastError: "",
    };

    /* ------------------------------------------------------------ helpers */

    /* An element with attributes (a null value is left out) and children. */
    function el(tag, attrs, ...children) {
        const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
            : document.createElement(tag);
        for (const [k, v] of Object.entries(attrs || {}))
            if (v !== null && v !== undefined) e.setAttribute(k, v);
        for (const c of children)
            e.append(c);
        return e;
    }

    /* An integer as people read it: thousands grouped, a real minus sign. */
    function num(n) {
        return Math.abs(n).toLocaleString("en-US").replace(/^/, n < 0 ? "\u2212" : "");
    }

    /* Sets a figure's text and its data-value (what tests read); "-" when unknown. */
    function figure(node, value, text) {
        const known = value !== null && value !== undefined;
        const shown = known ? (text === undefined ? num(value) : text) : "\u2014";
        if (node.textContent !== shown)
            node.textContent = shown;
        node.dataset.value = known ? String(value) : "";
    }

    function seconds(ms) {
        return ms < 10000 ? (ms / 1000).toFixed(1) + " s" : Math.round(ms / 1000) + " s";
    }

    /* A latency bound given in seconds, in the unit that reads best. */
    function latency(s) {
        if (s === Infinity)
            return "> 10 s";
        return s < 1 ? "\u2264 " + +(s * 1000).toPrecision(3) + " ms" : "\u2264 " + s + " s";
    }

    function clockTime(ms) {
        return new Date(ms).toLocaleTimeString("en-GB");
    }

    /* ------------------------------------------------------------ polling */

    async function getJson(path) {
        const abort = new AbortController();
        const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
        try {
            const reply = await fetch(path, { cache: "no-store", signal: abort.signal });
            if (!reply.ok)
                throw new Error(path + " answered " + reply.status);
            return await reply.json();
        } catch (e) {
            throw new Error(e.name === "AbortError" ? "no answer within " + TIMEOUT_MS / 1000 + " s"
                : e.message || String(e));
        } finally {
            clearTimeout(timer);
        }
    }

    async function poll() {
        const started = performance.now();
        try {
            const doc = await getJson("/lab/state");
            lab.lastOk = { at: Date.now(), doc };
            lab.failingSince = null;
            lab.failures = 0;
            draw(doc);
        } catch (e) {
            lab.failingSince = lab.failingSince || Date.now();
            lab.failures++;
            lab.lastError = e.message;
        }
        showStatus();
        setTimeout(poll, Math.max(0, POLL_MS - (performance.now() - started)));
    }

    /* GET /strategies once, again when a strategy it did not list shows up. */
    async function loadFacts(names) {
        const missing = !lab.facts || names.some((n) => !lab.facts.has(n));
        if (!missing || lab.factsPending || Date.now() - lab.factsAt < FACTS_RETRY_MS)
            return;
        lab.factsPending = true;
        lab.factsAt = Date.now();
        try {
            const doc = await getJson("/strategies");
            lab.facts = new Map(doc.strategies.map((s) => [s.name, s]));
            if (lab.lastOk)
                drawStrategies();
        } catch (e) {
            /* the claims stay blank; the next poll tries again */
        } finally {
            lab.factsPending = false;
        }
    }

    /* ------------------------------------------------------------- status */

    /* The state in a live region (read out when it changes), its age beside it. */
    function showStatus() {
        const now = Date.now();
        let state, text, age = "";
        if (lab.failingSince) {
            state = "down";
            text = "stockd not answering since " + clockTime(lab.failingSince) + " (" +
                lab.lastError + "); retrying every second.";
            age = lab.lastOk ? "The figures below are " + seconds(now - lab.lastOk.at) + " old."
                : "No figures yet.";
        } else if (lab.lastOk) {
            state = "live";
            text = "Live from " + lab.lastOk.doc.instance + ":";
            age = "updated " + seconds(now - lab.lastOk.at) + " ago.";
        } else {
            state = "loading";
            text = "Connecting to stockd\u2026";
        }
        document.body.dataset.state = state;
        if ($("#status").textContent !== text)
            $("#status").textContent = text;
        $("#age").textContent = age;
        for (const node of document.querySelectorAll("[data-age-ms]")) {
            const ms = +node.dataset.ageMs + (lab.lastOk ? now - lab.lastOk.at : 0);
            node.textContent = "sampled " + seconds(ms) + " ago";
        }
    }

    function draw(doc) {
        drawProducts(doc);
        addSample(doc);
        drawStrategies();
        drawLoad(doc);
        loadFacts(Object.keys(doc.strategies.strategies));
    }

    /* ----------------------------------------------------------- products */

    /* The products every answering instance watches (each has its own list),
     * each with the freshest sample any of them has. */
    function mergedProducts(doc) {
        lab.views.set(doc.instance, { t: doc.time_ms, products: doc.products });
        const best = new Map();
        for (const [instance, view] of lab.views) {
            if (doc.time_ms - view.t > 3 * WINDOW_MS) {
                lab.views.delete(instance);
                continue;
            }
            for (const p of view.products) {
                const at = view.t - p.age_ms;
                if (!best.has(p.product) || at > best.get(p.product).at)
                    best.set(p.product, { at, p: Object.assign({}, p, { age_ms: doc.time_ms - at }) });
            }
        }
        return Array.from(best.values(), (b) => b.p);
    }

    function drawProducts(doc) {
        const box = $("#products");
        const products = mergedProducts(doc);
        /* Newest first, and a product keeps its place once shown. stockd lists the
         * seed product, then the others mostly oldest first: at the first poll,
         * the later in that list the higher on the page. */
        for (const [i, p] of products.entries())
            if (!lab.order.has(p.product))
                lab.order.set(p.product, lab.seen === 0 ? i - products.length : lab.seen + i);
        lab.seen += products.length + 1;
        products.sort((a, b) => lab.order.get(b.product) - lab.order.get(a.product));
        const keep = new Set();
        for (const [i, p] of products.entries()) {
            const card = box.querySelector(`:scope > [data-product="${p.product}"]`) ||
                productCard(p.product);
            if (box.children[i] !== card)
                box.insertBefore(card, box.children[i] || null);
            keep.add(card);
            card.querySelector("[data-age-ms]").dataset.ageMs = p.age_ms;
            let oversold = false;
            for (const store of Object.keys(STORE_TITLES))
                oversold = drawStore(card, p, store, doc.time_ms) || oversold;
            card.classList.toggle("oversold", oversold);
        }
        for (const card of Array.from(box.children))
            if (!keep.has(card))
                card.remove();
        const shown = new Set(products.map((p) => String(p.product)));
        for (const map of [lab.series, lab.oversold]) /* forget the products gone */
            for (const key of map.keys())
                if (!shown.has(key.split("/")[0]))
                    map.delete(key);
        $("#no-products").hidden = products.length > 0;
    }

    function productCard(product) {
        const stores = Object.entries(STORE_TITLES).map(([store, title]) => storePanel(product, store, title));
        return el("article", { class: "product", "data-product": product, "aria-labelledby": "p" + product },
            el("h3", { id: "p" + product }, "Product " + product, " ",
                el("span", { class: "age", "data-age-ms": 0 })),
            el("div", { class: "stores" }, ...stores));
    }

    function storePanel(product, store, title) {
        const figs = FIELDS.map((f) => el("div", { class: "fig fig-" + f },
            el("dt", {}, FIELD_TITLES[f]), el("dd", { "data-field": f })));
        return el("section", { class: "store", "data-product": product, "data-store": store,
            "aria-label": "Product " + product + " in " + title },
        el("h4", {}, title),
        el("p", { class: "stock" },
            el("span", { class: "stock-label" }, "stock"), " ",
            el("span", { class: "stock-value", "data-field": "stock" }), " ",
            el("span", { class: "of" }, "of ", el("span", { "data-field": "initial" }))),
        el("dl", { class: "figs" }, ...figs),
        chart());
    }

    /* One store's figures of product p; true when it oversold. */
    function drawStore(card, p, store, now) {
        const panel = card.querySelector(`[data-store="${store}"]`);
        const a = p[store];
        const key = p.product + "/" + store;
        panel.dataset.available = a ? "true" : "false";
        /* What the ledger says is left: the orders' returned units are back. */
        const stock = a ? a.initial - a.sold + (a.returned || 0) : null;
        const big = panel.querySelector('[data-field="stock"]');
        figure(big, stock);
        big.classList.toggle("long", big.textContent.length > 7);
        figure(panel.querySelector('[data-field="initial"]'), a && a.initial);
        for (const f of FIELDS)
            figure(panel.querySelector(`[data-field="${f}"]`), a && a[f]);
        const oversold = !!a && a.oversold > 0;
        panel.classList.toggle("oversold", oversold);
        panel.classList.toggle("below-zero", stock !== null && stock < 0);
        panel.classList.toggle("lost", !!a && a.lost_updates > 0);
        panel.classList.toggle("untouched", !!a && a.sold === 0 && a.remaining === a.initial);
        const before = lab.oversold.get(key);
        if (a && before !== undefined && a.oversold > before)
            alarm(panel);
        if (a)
            lab.oversold.set(key, a.oversold);
        remember(key, a && { t: now - p.age_ms, stock, remaining: a.remaining }, now);
        drawChart(panel.querySelector("svg"), lab.series.get(key) || [], now, a && a.initial);
        return oversold;
    }

    /* The oversell just grew: flash the panel once (not with reduced motion). */
    function alarm(panel) {
        panel.classList.remove("alarm");
        void panel.offsetWidth; /* restart the animation */
        panel.classList.add("alarm");
    }

    function remember(key, point, now) {
        const points = lab.series.get(key) || [];
        if (point && (!points.length || point.t > points[points.length - 1].t))
            points.push(point);
        while (points.length && points[0].t < now - CHART_MS)
            points.shift();
        lab.series.set(key, points);
    }

    /* ------------------------------------------------------------- charts */

    const CW = 300, CH = 64;

    function chart() {
        return el("figure", { class: "chart" },
            el("svg:svg", { viewBox: `0 0 ${CW} ${CH}`, preserveAspectRatio: "none", role: "img" },
                el("svg:rect", { class: "below", x: 0, width: CW }),
                el("svg:line", { class: "zero", x1: 0, x2: CW }),
                el("svg:polyline", { class: "line-remaining" }),
                el("svg:polyline", { class: "line-stock" })),
            el("figcaption", {}, "last minute: ",
                el("span", { class: "key-stock" }, "stock"), " and ",
                el("span", { class: "key-remaining" }, "counter")));
    }

    function drawChart(svg, points, now, initial) {
        const values = [0, initial || 0];
        for (const p of points)
            values.push(p.stock, p.remaining);
        const lo = Math.min(...values), hi = Math.max(...values, lo + 1);
        const x = (t) => ((t - (now - CHART_MS)) / CHART_MS * CW).toFixed(1);
        const y = (v) => (CH - 3 - (v - lo) / (hi - lo) * (CH - 6)).toFixed(1);
        const zero = y(0);
        svg.querySelector(".zero").setAttribute("y1", zero);
        svg.querySelector(".zero").setAttribute("y2", zero);
        const below = svg.querySelector(".below");
        below.setAttribute("y", zero);
        below.setAttribute("height", Math.max(0, CH - zero));
        const last = points[points.length - 1];
        const drawn = last ? points.concat([Object.assign({}, last, { t: now })]) : []; /* holds till now */
        for (const f of ["stock", "remaining"])
            svg.querySelector(".line-" + f).setAttribute("points",
                drawn.map((p) => x(p.t) + "," + y(p[f])).join(" "));
        svg.setAttribute("aria-label", last
            ? `Over the last minute the stock went from ${num(points[0].stock)} to ` +
              `${num(last.stock)}, the counter from ${num(points[0].remaining)} to ${num(last.remaining)}`
            : "No figures over the last minute");
    }

    /* --------------------------------------------------------- strategies */

    /* Keeps WINDOW_MS (and a little more) of one instance's counters; a
     * counter that went back means that instance restarted: start over. */
    function addSample(doc) {
        const list = lab.samples.get(doc.instance) || [];
        const sample = { t: doc.time_ms, le: doc.strategies.le, strategies: doc.strategies.strategies };
        const prev = list[list.length - 1];
        const restarted = prev && (sample.t <= prev.t || Object.entries(prev.strategies).some(
            ([name, s]) => !sample.strategies[name] || sample.strategies[name].count < s.count));
        if (restarted)
            list.length = 0;
        list.push(sample);
        while (list.length > 2 && list[1].t <= sample.t - WINDOW_MS)
            list.shift();
        lab.samples.set(doc.instance, list);
        for (const [instance, l] of lab.samples) /* an instance gone quiet: forget it */
            if (doc.time_ms - l[l.length - 1].t > 3 * WINDOW_MS)
                lab.samples.delete(instance);
    }

    /* Per strategy over the window, added up over the instances:
     * {requests, rate, outcomes: {word: n}, buckets: [n per bucket], le}. */
    function windowed() {
        const out = new Map();
        for (const list of lab.samples.values()) {
            if (list.length < 2)
                continue;
            const first = list[0], last = list[list.length - 1];
            const secs = (last.t - first.t) / 1000;
            for (const [name, s] of Object.entries(last.strategies)) {
                const b = first.strategies[name] || { count: 0, outcomes: {}, buckets: [] };
                const w = out.get(name) || { requests: 0, rate: 0, outcomes: {}, buckets: [], le: last.le };
                const n = s.count - b.count;
                w.requests += n;
                w.rate += n / secs;
                for (const [word, c] of Object.entries(s.outcomes))
                    w.outcomes[word] = (w.outcomes[word] || 0) + c - (b.outcomes[word] || 0);
                s.buckets.forEach((c, i) => { w.buckets[i] = (w.buckets[i] || 0) + c - (b.buckets[i] || 0); });
                out.set(name, w);
            }
        }
        return out;
    }

    /* The bound of the bucket that holds the 99th percentile (seconds). */
    function p99(w) {
        const total = w.buckets.reduce((a, b) => a + b, 0);
        if (!total)
            return null;
        let seen = 0;
        for (let i = 0; i < w.buckets.length; i++) {
            seen += w.buckets[i];
            if (seen >= Math.ceil(total * 0.99))
                return i < w.le.length ? w.le[i] : Infinity;
        }
        return Infinity;
    }

    function claim(fact) {
        if (!fact)
            return { word: "", text: "" };
        const word = fact.safe_single && fact.safe_multi ? "safe"
            : fact.safe_single ? "one-instance" : "unsafe";
        const text = { safe: "safe", "one-instance": "safe in one instance", unsafe: "unsafe" }[word];
        return { word, text: fact.caveat ? text + "*" : text, caveat: fact.caveat || "" };
    }

    /* Requests per strategy since each instance started, added up. */
    function totals() {
        const out = {};
        for (const list of lab.samples.values())
            for (const [name, s] of Object.entries(list[list.length - 1].strategies))
                out[name] = (out[name] || 0) + s.count;
        return out;
    }

    function drawStrategies() {
        const all = totals();
        const names = Object.keys(all).filter((n) => all[n] > 0);
        const order = lab.facts ? Array.from(lab.facts.keys()) : [];
        const rank = (n) => (order.includes(n) ? order.indexOf(n) : order.length);
        names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
        const body = $("#strategies tbody");
        const w = windowed();
        for (const [i, name] of names.entries()) {
            const row = body.querySelector(`tr[data-strategy="${name}"]`) || strategyRow(name);
            if (body.children[i] !== row)
                body.insertBefore(row, body.children[i] || null);
            drawStrategy(row, all[name], w.get(name));
        }
        for (const row of Array.from(body.children).slice(names.length))
            row.remove();
        $("#strategies").hidden = names.length === 0;
        $("#no-traffic").hidden = names.length > 0;
        drawCaveats(names);
    }

    /* "* name: caveat" under the table, for the strategies shown that have one. */
    function drawCaveats(names) {
        const lines = names.map((n) => lab.facts && lab.facts.get(n)).filter((f) => f && f.caveat)
            .map((f) => "* " + f.name + ": " + f.caveat);
        const list = $("#caveats");
        if (Array.from(list.children, (li) => li.textContent).join("\n") !== lines.join("\n"))
            list.replaceChildren(...lines.map((l) => el("li", {}, l)));
    }

    function strategyRow(name) {
        const cell = (field, cls) => el("td", { "data-field": field, class: cls || null });
        return el("tr", { "data-strategy": name },
            el("th", { scope: "row" }, name),
            cell("store"), cell("claim"), cell("rate", "n"),
            el("td", { class: "mix" }, mixBar(),
                el("span", { class: "mix-text" },
                    ...MIX.map((k) => el("span", { class: "mix-" + k, "data-field": k })),
                    el("span", { class: "mix-idle" }, "idle"))),
            cell("p99", "n"), cell("total", "n"));
    }

    function mixBar() {
        return el("svg:svg", { class: "mix-bar", viewBox: "0 0 100 8", preserveAspectRatio: "none",
            "aria-hidden": "true" },
        ...MIX.map((k) => el("svg:rect", { class: "mix-" + k, y: 0, height: 8, x: 0, width: 0 })));
    }

    function drawStrategy(row, total, w) {
        const fact = lab.facts && lab.facts.get(row.dataset.strategy);
        const c = claim(fact);
        const claimCell = row.querySelector('[data-field="claim"]');
        figure(claimCell, c.word || null, c.text);
        claimCell.className = "claim claim-" + (c.word || "unknown");
        claimCell.title = c.caveat;
        figure(row.querySelector('[data-field="store"]'), fact ? fact.store : null, fact && fact.store);
        figure(row.querySelector('[data-field="total"]'), total);
        const requests = w ? w.requests : 0;
        row.classList.toggle("idle", requests === 0);
        const rate = w ? +w.rate.toFixed(w.rate < 10 ? 1 : 0) : null;
        figure(row.querySelector('[data-field="rate"]'), rate, rate === null ? undefined : rate.toLocaleString("en-US"));
        const bound = w ? p99(w) : null;
        figure(row.querySelector('[data-field="p99"]'), bound, bound === null ? undefined : latency(bound));
        const counts = { ok: 0, sold_out: 0, busy: 0, other: 0 };
        const others = [];
        for (const [word, n] of Object.entries(w ? w.outcomes : {})) {
            if (!n)
                continue;
            if (word in counts && word !== "other")
                counts[word] += n;
            else {
                counts.other += n;
                others.push(word.replace(/_/g, " ") + " " + num(n));
            }
        }
        let x = 0;
        for (const k of MIX) {
            const share = requests ? counts[k] / requests : 0;
            const rect = row.querySelector("rect.mix-" + k);
            rect.setAttribute("x", x.toFixed(2));
            rect.setAttribute("width", (share * 100).toFixed(2));
            x += share * 100;
            const cell = row.querySelector(`[data-field="${k}"]`);
            figure(cell, requests ? counts[k] : null, MIX_TITLES[k] + " " + Math.round(share * 100) + "%");
            cell.hidden = !counts[k];
        }
        row.querySelector(".mix-idle").hidden = requests > 0;
        row.querySelector(".mix").title = requests
            ? MIX.map((k) => MIX_TITLES[k] + " " + num(counts[k])).join(", ") +
              (others.length ? " (" + others.join(", ") + ")" : "") + " in the last " + WINDOW_MS / 1000 + " s"
            : "no requests in the last " + WINDOW_MS / 1000 + " s";
    }

    /* --------------------------------------------------------------- load */

    function drawLoad(doc) {
        const l = doc.load;
        figure($('#load [data-field="busy"]'), l.busy, num(l.busy) + " / " + num(l.workers));
        const meter = $("#busy-meter");
        meter.max = Math.max(1, l.workers);
        meter.low = meter.max * 0.75;
        meter.high = meter.max;
        meter.optimum = 0;
        meter.value = l.busy;
        figure($('#load [data-field="queued"]'), l.queued);
        figure($('#load [data-field="in_flight"]'), l.in_flight);
        const s = doc.stream || {}; /* null figures: no consumer in this instance */
        figure($('#load [data-field="stream"]'), s.length,
            num(s.length) + " to settle, oldest " + seconds(s.lag_ms || 0));
        const n = lab.samples.size; /* behind a balancer, each poll may reach another one */
        figure($('#load [data-field="instance"]'), doc.instance,
            doc.instance + (n > 1 ? " (one of " + n + " answering)" : ""));
        const list = $("#backends");
        const names = Object.keys(doc.backends || {});
        for (const [i, name] of names.entries()) {
            const b = doc.backends[name];
            let item = list.querySelector(`[data-backend="${name}"]`);
            if (!item) {
                item = el("li", { "data-backend": name }, el("span", { class: "backend-name" }, name), " ",
                    el("span", { class: "backend-state", "data-field": "state" }));
            }
            if (list.children[i] !== item)
                list.insertBefore(item, list.children[i] || null);
            item.dataset.state = b.state;
            figure(item.querySelector('[data-field="state"]'), b.state, b.state);
            item.title = "probed " + seconds(b.age_ms || 0) + " ago";
        }
        for (const item of Array.from(list.children).slice(names.length))
            item.remove();
    }

    document.addEventListener("DOMContentLoaded", () => {
        for (const node of document.querySelectorAll('[data-fill="origin"]'))
            node.textContent = location.origin;
        setInterval(showStatus, 500);
        poll();
    });
})();
