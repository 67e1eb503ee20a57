/*
 * race.js - the race timeline: one lane per request of a race run by
 * POST /lab/race, on one time axis, drawn as SVG with no library.
 *
 * The driver's JSON has, per request, when the driver sent it and got its
 * answer, and the sale's trace: the server's moments (arrival, lock
 * acquired, read, write, commit, answer, all microseconds on the one
 * monotonic clock the driver's times use too) and what it read and wrote.
 * Each lane draws the request from sent to answered as a thin line and, on
 * it, the sale's stretches: waiting (arrival to the lock, or to the first
 * thing it did), holding the lock (lock acquired to commit), the stale
 * window between its read and its write, and the commit, or a write that
 * was sent and refused (a stale fence, a moved version, a conditional
 * update that matched nothing); ticks at the read and the write carry the
 * values. What is not in a trace is not drawn.
 *
 * Then what went wrong, in words and on the lanes: sales answered 200 that
 * read the same count ("#3 and #7 both read 4": one of the two deductions
 * vanished), and, when the ledger says units were oversold, the sales that
 * committed past the initial stock (in commit order). A race larger than
 * MAX_LANES is sampled - every request named in a finding, then evenly
 * spaced others - and the picture says so.
 *
 * The page and report.html load it as a plain script: it sets
 * window.StockdRace = {render, findings}; render(data, box) returns the
 * <svg> and, given a box, puts it there. Under node, module.exports.
 */
"use strict";

(function (root) {
    const SVG = "http://www.w3.org/2000/svg";
    const MAX_LANES = 64;
    const WIDTH = 960, LABEL = 140, RIGHT = 190, LANE = 22, TOP = 34, FOOT = 30;
    const COLOURS = {
        wait: "#d5d8dc", hold: "#9ec5fe", stale: "#f0ad4e", commit: "#2e8b57", refused: "#f1aeb5",
        ok: "#1e7e34", sold_out: "#6c757d", failed: "#c82333", lost: "#c82333",
    };

    function el(tag, attrs, text) {
        const e = root.document.createElementNS(SVG, tag);
        for (const [k, v] of Object.entries(attrs || {}))
            if (v !== null && v !== undefined)
                e.setAttribute(k, String(v));
        if (text !== undefined)
            e.textContent = text;
        return e;
    }

    function names(ids) {
        const shown = ids.slice(0, 4).map((id) => `#${id}`);
        if (ids.length > 4)
            shown.push(`${ids.length - 4} more`);
        return shown.length > 1
            ? `${shown.slice(0, -1).join(", ")} and ${shown[shown.length - 1]}` : shown[0];
    }

    /* What went wrong in the race: {lost: [{read, ids}], oversold: [{id, unit}],
     * words: [sentences], marked: Set of ids}. */
    function findings(data) {
        const history = data.history || [];
        const sold = history.filter((h) => h.status === 200 && h.trace);
        const byRead = new Map();
        for (const h of sold)
            if (h.trace.read !== undefined) {
                if (!byRead.has(h.trace.read))
                    byRead.set(h.trace.read, []);
                byRead.get(h.trace.read).push(h.id);
            }
        const lost = [...byRead].filter(([, ids]) => ids.length > 1)
            .map(([read, ids]) => ({ read: read, ids: ids }));
        const words = lost.map((l) => `${names(l.ids)} ${l.ids.length > 2 ? "all" : "both"} ` +
            `read ${l.read}: ${l.ids.length - 1} of their deductions vanished`);
        const ledger = data.ledger || {};
        const oversold = [];
        if (ledger.oversold > 0) {
            const at = (h) => (h.trace.t_us || {}).commit || h.complete_us || 0;
            let units = 0;
            for (const h of sold.slice().sort((a, b) => at(a) - at(b))) {
                units += h.qty || 1;
                if (units > data.initial)
                    oversold.push({ id: h.id, unit: units });
            }
            words.push(`oversold ${ledger.oversold} of ${data.initial} units: ` +
                `${names(oversold.map((o) => o.id))} committed after the stock was gone`);
        }
        if (ledger.lost_updates > 0 && !lost.length)
            words.push(`the ledger counts ${ledger.lost_updates} lost updates`);
        if (!words.length)
            words.push(`no two sales read the same count; nothing oversold ` +
                `(${sold.length} sold of ${data.initial})`);
        const marked = new Set();
        lost.forEach((l) => l.ids.forEach((id) => marked.add(id)));
        oversold.forEach((o) => marked.add(o.id));
        return { lost: lost, oversold: oversold, words: words, marked: marked };
    }

    /* The lanes to draw: all, or the marked ones and evenly spaced others. */
    function sample(history, marked) {
        if (history.length <= MAX_LANES)
            return history;
        const keep = new Set(history.filter((h) => marked.has(h.id)).slice(0, MAX_LANES)
            .map((h) => h.id));
        const others = history.filter((h) => !keep.has(h.id));
        const room = MAX_LANES - keep.size;
        for (let i = 0; i < room; i++)
            keep.add(others[Math.floor(i * others.length / room)].id);
        return history.filter((h) => keep.has(h.id));
    }

    function times(h) {
        const t = (h.trace && h.trace.t_us) || {};
        return [h.invoke_us, h.complete_us, ...Object.values(t)].filter(Number.isFinite);
    }

    function answerWord(h) {
        if (h.status === 200)
            return "200 sold";
        if (!h.status)
            return "no answer";
        return `${h.status} ${h.error || ""}`.trim();
    }

    function answerColour(h) {
        if (h.status === 200)
            return COLOURS.ok;
        return h.error === "sold_out" ? COLOURS.sold_out : COLOURS.failed;
    }

    /* The stretches of one sale's trace: [from, to, kind]. */
    function stretches(t) {
        const steps = ["lock_acquired", "read", "write", "commit", "answer"].map((k) => t[k])
            .filter(Number.isFinite);
        const out = [];
        if (t.arrival && steps.length)
            out.push([t.arrival, Math.min(...steps), "wait"]);
        if (t.lock_acquired)
            out.push([t.lock_acquired, t.commit || t.write || t.answer, "hold"]);
        if (t.read && t.write && t.write > t.read)
            out.push([t.read, t.write, "stale"]);
        if (t.write && t.commit)
            out.push([t.write, t.commit, "commit"]);
        const after = steps.filter((v) => v > t.write);
        if (t.write && !t.commit && after.length)
            out.push([t.write, Math.min(...after), "refused"]);
        return out.filter(([a, b]) => a && b && b >= a);
    }

    function drawLane(svg, h, y, x, f) {
        const lost = f.lost.find((l) => l.ids.includes(h.id));
        const over = f.oversold.find((o) => o.id === h.id);
        const g = el("g", {
            class: "lane", "data-id": h.id, "data-status": h.status,
            "data-violation": lost || over ? "1" : null,
        });
        const t = (h.trace && h.trace.t_us) || {};
        const tip = [`#${h.id}: ${answerWord(h)}`].concat(Object.entries(t).map(([k, v]) =>
            `${k} +${((v - h.invoke_us) / 1000).toFixed(1)} ms`));
        g.appendChild(el("title", null, tip.join("\n")));
        g.appendChild(el("text", { x: 6, y: y + 15, "font-size": 12, fill: answerColour(h) },
            `#${h.id} ${answerWord(h)}`));
        const end = h.complete_us || Math.max(...times(h));
        g.appendChild(el("line", {
            x1: x(h.invoke_us), x2: x(end), y1: y + 11, y2: y + 11, stroke: "#888",
            "stroke-width": 1, "stroke-dasharray": h.complete_us ? null : "3 2",
        }));
        for (const [a, b, kind] of stretches(t))
            g.appendChild(el("rect", {
                x: x(a), y: y + (kind === "hold" ? 3 : 6), width: Math.max(1, x(b) - x(a)),
                height: kind === "hold" ? 16 : 10, fill: COLOURS[kind],
                "fill-opacity": kind === "hold" ? 0.5 : 0.9, class: kind,
            }));
        const tr = h.trace || {};
        if (t.read && tr.read !== undefined)
            tick(g, x(t.read), y, `${tr.read}`, lost ? COLOURS.lost : "#333", "read");
        if ((t.write || t.commit) && tr.wrote !== undefined)
            tick(g, x(t.commit || t.write), y, `${tr.wrote}`, over ? COLOURS.lost : "#333",
                "wrote");
        if (t.write && !t.commit && h.status !== 200)
            tick(g, x(t.write), y, "\u2717", COLOURS.failed, "refused");
        const said = [];
        const read = tr.read !== undefined, wrote = tr.wrote !== undefined;
        if (read)
            said.push(`read ${tr.read}` + (wrote ? ` \u2192 ${tr.wrote}` : ""));
        else if (wrote)
            said.push(`left ${tr.wrote}`);
        if (tr.fence)
            said.push(`fence ${tr.fence}`);
        if (tr.version !== undefined)
            said.push(`v${tr.version}`);
        if (lost)
            said.push("LOST");
        if (over)
            said.push("OVERSOLD");
        g.appendChild(el("text", {
            x: WIDTH - RIGHT + 8, y: y + 15, "font-size": 11,
            fill: lost || over ? COLOURS.lost : "#333",
        }, said.join(" ")));
        svg.appendChild(g);
    }

    function tick(g, x, y, label, colour, kind) {
        g.appendChild(el("line", {
            x1: x, x2: x, y1: y + 1, y2: y + 21, stroke: colour, "stroke-width": 2, class: kind,
        }));
        g.appendChild(el("text", {
            x: x + 3, y: y + 9, "font-size": 9, fill: colour,
        }, label));
    }

    function axis(svg, x, t0, t1, height) {
        const span = (t1 - t0) / 1000;
        const step = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
            .find((s) => span / s <= 10) || 20000;
        for (let ms = 0; ms <= span; ms += step) {
            const at = x(t0 + ms * 1000);
            svg.appendChild(el("line", {
                x1: at, x2: at, y1: TOP - 6, y2: height - FOOT, stroke: "#eee",
            }));
            svg.appendChild(el("text", {
                x: at, y: TOP - 10, "font-size": 10, "text-anchor": "middle", fill: "#555",
            }, `${ms} ms`));
        }
    }

    function legend(svg, y) {
        const items = [["wait", "waiting"], ["hold", "holding the lock"],
            ["stale", "between read and write"], ["commit", "write to commit"],
            ["refused", "write refused \u2717"]];
        let x = LABEL;
        for (const [kind, words] of items) {
            svg.appendChild(el("rect", { x: x, y: y, width: 14, height: 10, fill: COLOURS[kind] }));
            svg.appendChild(el("text", { x: x + 18, y: y + 9, "font-size": 11 }, words));
            x += 40 + words.length * 6;
        }
    }

    function render(data, box) {
        const f = findings(data);
        const all = data.history || [];
        const lanes = sample(all, f.marked);
        const words = f.words.slice();
        if (lanes.length < all.length)
            words.push(`showing ${lanes.length} of ${all.length} requests (sampled)`);
        const stamps = lanes.flatMap(times);
        const t0 = stamps.length ? Math.min(...stamps) : 0;
        const t1 = stamps.length ? Math.max(...stamps, t0 + 1) : 1;
        const x = (t) => LABEL + (t - t0) / (t1 - t0) * (WIDTH - LABEL - RIGHT);
        const height = TOP + lanes.length * LANE + FOOT + words.length * 16 + 8;
        const svg = el("svg", {
            xmlns: SVG, class: "race-timeline", viewBox: `0 0 ${WIDTH} ${height}`,
            width: "100%", role: "img", "font-family": "system-ui, sans-serif",
            "data-strategy": data.strategy, "data-violations": f.marked.size,
        });
        svg.appendChild(el("title", null, `${data.strategy}: ${data.buyers} buyers, ` +
            `${data.initial} units. ${f.words.join(". ")}`));
        svg.appendChild(el("text", { x: 6, y: 14, "font-size": 13, "font-weight": "bold" },
            `${data.strategy}: ${all.length} buyers, ${data.initial} units`));
        axis(svg, x, t0, t1, TOP + lanes.length * LANE + 4);
        lanes.forEach((h, i) => drawLane(svg, h, TOP + i * LANE, x, f));
        let y = TOP + lanes.length * LANE + 10;
        legend(svg, y);
        y += 30;
        for (const w of words) {
            svg.appendChild(el("text", {
                x: 6, y: y, "font-size": 12, class: "finding",
                fill: f.marked.size ? COLOURS.lost : "#333",
            }, w));
            y += 16;
        }
        if (box) {
            box.replaceChildren(svg);
        }
        return svg;
    }

    const api = { render: render, findings: findings, MAX_LANES: MAX_LANES };
    if (typeof module !== "undefined" && module.exports)
        module.exports = api;
    else
        root.StockdRace = api;
})(typeof window !== "undefined" ? window : this);
