/*
 * linearize.js - the history checker of lab/judges/linearize.py, for the live page and
 * report.html: is a history of sale attempts linearizable for a stock counter?
 *
 * The same algorithm and the same words as the Python module (its top comment
 * explains the model and the order of the proofs); tests/lab/test_lab_linearize.py
 * runs both over tests/lab/histories.json and wants the same verdicts and the same
 * violation text. The page runs it on small histories (a race of at most 64
 * buyers); the search is bounded all the same and says "undecided" past BUDGET.
 *
 * check(initial, ops) with ops [{id, invoke, complete (null: never answered),
 * qty, outcome: "ok" | "sold_out" | "unknown" | "failed", remaining}] returns
 * {linearizable: true | false | null, violation, ops, searched, how, undecided}.
 * Loaded by a page it sets window.StockdLinearize; under node, module.exports.
 */
"use strict";

(function (root) {
    const OUTCOMES = ["ok", "sold_out", "unknown", "failed"];
    const BUDGET = 100000;
    const INF = Infinity;

    function makeOp(d, index) {
        const o = {
            id: d.id === undefined ? index : d.id,
            invoke: d.invoke,
            complete: d.complete === null || d.complete === undefined ? INF : d.complete,
            qty: d.qty === undefined ? 1 : d.qty,
            outcome: d.outcome,
            remaining: d.remaining === undefined ? null : d.remaining,
            index: index,
        };
        if (!OUTCOMES.includes(o.outcome))
            throw new Error(`op ${o.id}: outcome ${o.outcome} is not one of ${OUTCOMES}`);
        if (o.qty < 0 || (o.qty === 0 && o.outcome !== "ok"))
            throw new Error(`op ${o.id}: qty ${o.qty} (0 only for a read, outcome ok)`);
        o.deducts = o.outcome === "ok" && o.qty > 0;
        o.pinned = o.outcome === "ok" || o.outcome === "sold_out" ? o.remaining : null;
        return o;
    }

    function words(o) {
        const n = `#${o.id}`, r = o.remaining;
        if (o.outcome === "ok" && o.qty === 0)
            return `${n} (read ${r})`;
        if (o.outcome === "ok")
            return `${n} (sold ${o.qty}` + (r !== null ? `, read ${r + o.qty}, left ${r})` : ")");
        if (o.outcome === "sold_out")
            return `${n} (sold_out asking ${o.qty}` + (r !== null ? `, saw ${r})` : ")");
        return `${n} (outcome unknown, qty ${o.qty})`;
    }

    function result(ops, linearizable, violation, searched, how, undecided) {
        return { linearizable: linearizable, violation: violation || null, ops: ops,
                 searched: searched || 0, how: how || "proof", undecided: undecided || null };
    }

    function sortBy(list, key) {
        return list.slice().sort((a, b) => key(a) - key(b));
    }

    function sum(list) {
        return list.reduce((a, b) => a + b, 0);
    }

    function check(initial, history, budget) {
        let ops = history.map(makeOp).filter(o => o.outcome !== "failed");
        ops.forEach((o, i) => { o.index = i; });
        let why = quickViolation(initial, ops);
        if (why)
            return result(ops.length, false, why);
        if (countingApplies(ops)) {
            why = countingViolation(initial, ops);
            return result(ops.length, why === null, why);
        }
        return search(initial, ops, budget === undefined ? BUDGET : budget);
    }

    /* ------------------------------------------------------ proofs without search */

    function quickViolation(initial, ops) {
        return boundsViolation(initial, ops) || duplicateViolation(ops) ||
            oversellViolation(initial, ops) || orderViolation(ops) ||
            soldOutViolation(ops) || finalViolation(initial, ops);
    }

    function boundsViolation(initial, ops) {
        for (const o of ops) {
            const r = o.pinned;
            if (r === null)
                continue;
            if (r < 0)
                return `${words(o)}: a counter that refuses to sell below zero never shows ${r}`;
            const top = o.deducts ? initial - o.qty : initial;
            if (r > top)
                return `${words(o)}: more than the ${initial} units the run started with`;
            if (o.outcome === "sold_out" && r >= o.qty)
                return `${words(o)}: ${r} units were enough for ${o.qty}`;
        }
        return null;
    }

    function duplicateViolation(ops) {
        const seen = new Map();
        for (const o of sortBy(ops.filter(o => o.deducts && o.remaining !== null),
                               o => o.invoke)) {
            if (!seen.has(o.remaining)) {
                seen.set(o.remaining, o);
                continue;
            }
            const first = seen.get(o.remaining);
            return `${words(first)} and ${words(o)} both left ${o.remaining}: the stock ` +
                "only goes down, so one of the two deductions vanished (a lost update)";
        }
        return null;
    }

    function oversellViolation(initial, ops) {
        const sold = sum(ops.filter(o => o.deducts).map(o => o.qty));
        if (sold <= initial)
            return null;
        let last = null;
        for (const o of ops)
            if (o.deducts && (last === null || o.complete > last.complete))
                last = o;
        return `the 200 answers sold ${sold} units of the ${initial} there were: ` +
            `${sold - initial} oversold (the last to answer: ${words(last)})`;
    }

    function orderViolation(ops) {
        const pinned = sortBy(ops.filter(o => o.pinned !== null), o => o.complete);
        let best = null, k = 0;
        for (const b of sortBy(pinned, o => o.invoke)) {
            while (k < pinned.length && pinned[k].complete < b.invoke) {
                if (best === null || pinned[k].pinned < best.pinned)
                    best = pinned[k];
                k++;
            }
            if (best !== null && (best.pinned < b.pinned ||
                                  (best.pinned === b.pinned && b.deducts)))
                return `${words(best)} had answered before ${words(b)} began, yet ` +
                    `#${b.id} found more stock than #${best.id} left`;
        }
        return null;
    }

    function soldOutViolation(ops) {
        const outs = sortBy(ops.filter(o => o.outcome === "sold_out"), o => o.complete);
        let smallest = null, k = 0;
        for (const b of sortBy(ops.filter(o => o.deducts), o => o.invoke)) {
            while (k < outs.length && outs[k].complete < b.invoke) {
                if (smallest === null || outs[k].qty < smallest.qty)
                    smallest = outs[k];
                k++;
            }
            if (smallest !== null && smallest.qty <= b.qty)
                return `${words(smallest)} had answered before ${words(b)} began: ` +
                    `once the stock was below ${smallest.qty}, a sale of ${b.qty} cannot follow`;
        }
        return null;
    }

    function finalReads(ops) {
        let last = -INF;
        for (const o of ops)
            if (o.qty && o.complete > last)
                last = o.complete;
        return ops.filter(o => o.qty === 0 && o.invoke > last);
    }

    function finalViolation(initial, ops) {
        const finals = finalReads(ops);
        if (!finals.length)
            return null;
        const f = finals[0];
        const took = initial - f.remaining;
        const sold = sum(ops.filter(o => o.deducts).map(o => o.qty));
        const unknown = ops.filter(o => o.outcome === "unknown").map(o => o.qty);
        if (took < sold)
            return `${words(f)} after every request had answered: ${took} units left the ` +
                `counter, but the 200 answers sold ${sold}: ${sold - took} of their deductions ` +
                "vanished (lost updates)";
        if (took > sold + sum(unknown))
            return `${words(f)} after every request had answered: ${took} units left the ` +
                `counter, more than the ${sold} the 200 answers sold` +
                (unknown.length ? ` and the ${sum(unknown)} the unknown answers may have` : "");
        if (new Set(unknown).size === 1 && (took - sold) % unknown[0])
            return `${words(f)}: ${took - sold} units beyond the 200 answers is no whole ` +
                `number of unknown sales of ${unknown[0]}`;
        return null;
    }

    function countingApplies(ops) {
        const qtys = new Set(ops.filter(o => o.qty).map(o => o.qty));
        return qtys.size <= 1 && ops.every(o => !o.qty || o.remaining === null) &&
            finalReads(ops).length === ops.filter(o => !o.qty).length;
    }

    function countingViolation(initial, ops) {
        const outs = ops.filter(o => o.outcome === "sold_out");
        if (!outs.length)
            return null;
        const finals = finalReads(ops);
        let first = outs[0];
        for (const o of outs)
            if (o.complete < first.complete)
                first = o;
        const q = first.qty, need = Math.floor(initial / q);
        const late = ops.filter(o => o.deducts && o.invoke > first.complete);
        if (late.length)
            return `${words(first)} had answered before ${words(late[0])} began, yet it sold`;
        const could = ops.filter(o => o.deducts ||
                                 (o.outcome === "unknown" && o.invoke <= first.complete)).length;
        if (could < need)
            return `${words(first)} answered when at most ${could} sales of ${q} had begun, ` +
                `but ${initial} units need ${need} to run out: the stock cannot have been gone`;
        const left = initial - need * q;
        for (const f of finals)
            if (f.remaining !== left)
                return `${words(first)} says the stock ran out, so it ended at ${left}, ` +
                    `but ${words(f)} after every request had answered`;
        return null;
    }

    /* ------------------------------------------------------------------ search */

    function steps(o, s) {
        if (o.outcome === "unknown")
            return s >= o.qty ? [s, s - o.qty] : [s];
        if (o.outcome === "sold_out")
            return s < o.qty && (o.remaining === null || o.remaining === s) ? [s] : [];
        if (s < o.qty)
            return [];
        const after = s - o.qty;
        return o.remaining === null || o.remaining === after ? [after] : [];
    }

    function search(initial, ops, budget) {
        const events = [];
        for (const o of ops) {
            events.push([o.invoke, 0, o.index]);
            events.push([o.complete, 1, o.index]);
        }
        events.sort((a, b) => (a[0] - b[0]) || (a[1] - b[1]));
        const n = events.length;
        const opOf = [null].concat(events.map(e => e[2]));
        const isCall = [false].concat(events.map(e => e[1] === 0));
        const next = [], prev = [null];
        for (let i = 0; i <= n; i++)
            next.push(i < n ? i + 1 : null);
        for (let i = 0; i < n; i++)
            prev.push(i);
        const ret = new Array(ops.length).fill(0);
        events.forEach((e, k) => { if (e[1] === 1) ret[e[2]] = k + 1; });

        function lift(node) {
            for (const x of [node, ret[opOf[node]]]) {
                next[prev[x]] = next[x];
                if (next[x] !== null)
                    prev[next[x]] = prev[x];
            }
        }
        function unlift(node) {
            for (const x of [ret[opOf[node]], node]) {
                next[prev[x]] = x;
                if (next[x] !== null)
                    prev[next[x]] = x;
            }
        }

        let s = initial, placed = 0n;
        const seen = new Set(), frames = [];

        function forced(node) {
            const o = ops[opOf[node]];
            return o.outcome !== "unknown" && o.qty * (o.outcome === "ok" ? 1 : 0) === 0 &&
                steps(o, s).length > 0;
        }
        function firstForced(node) {
            for (let x = node; x !== null && isCall[x]; x = next[x])
                if (forced(x))
                    return x;
            return null;
        }
        function place(node, alts) {
            const o = ops[opOf[node]];
            while (alts.length) {
                const after = alts.shift();
                const bits = placed | (1n << BigInt(o.index));
                const key = bits.toString(36) + ":" + after;
                if (seen.has(key))
                    continue;
                seen.add(key);
                frames.push([node, s, placed, alts, forced(node)]);
                s = after;
                placed = bits;
                lift(node);
                const first = next[0];
                const f = firstForced(first);
                return f !== null ? f : first;
            }
            return null;
        }
        function backtrack() {
            while (frames.length) {
                const [node, before, placedBefore, alts, wasForced] = frames.pop();
                s = before;
                placed = placedBefore;
                unlift(node);
                if (wasForced)
                    continue;
                const moved = place(node, alts);
                return moved !== null ? moved : next[node];
            }
            return null;
        }

        let best = -1, blocked = null;
        let node = firstForced(next[0]);
        if (node === null)
            node = next[0];
        while (next[0] !== null) {
            if (seen.size > budget)
                return result(ops.length, null, null, seen.size, "search",
                              `gave up after ${seen.size} states (${ops.length} ` +
                              "ops): too many orders left to rule out");
            if (isCall[node]) {
                const moved = place(node, steps(ops[opOf[node]], s));
                node = moved !== null ? moved : next[node];
                continue;
            }
            if (frames.length > best) {
                best = frames.length;
                blocked = [opOf[node], s];
            }
            node = backtrack();
            if (node === null) {
                const o = ops[blocked[0]];
                return result(ops.length, false,
                              `no order of the ${ops.length} requests explains every answer: ` +
                              `at best ${best} line up, then ${words(o)} cannot, with ` +
                              `${blocked[1]} in stock`, seen.size, "search");
            }
        }
        return result(ops.length, true, null, seen.size, "search");
    }

    /* The race driver's history (POST /lab/race) as the checker's ops, with the
     * ledger's counter after the race as a final read (lab/judges/history.py does the
     * same). */
    function fromRace(race) {
        const ops = race.history.map(h => {
            const outcome = outcomeOf(h.status, h.error);
            const known = Number.isInteger(h.remaining) &&
                (outcome === "ok" || outcome === "sold_out");
            return { id: h.id, invoke: h.invoke_us, complete: h.complete_us,
                     qty: h.qty === undefined ? race.qty : h.qty, outcome: outcome,
                     remaining: known ? h.remaining : null };
        });
        const left = race.ledger && race.ledger.remaining;
        if (Number.isInteger(left)) {
            let last = 0;
            for (const o of ops)
                if (o.complete !== null && o.complete > last)
                    last = o.complete;
            ops.push({ id: "final", invoke: last + 1, complete: last + 1, qty: 0,
                       outcome: "ok", remaining: left });
        }
        return ops;
    }

    function outcomeOf(status, error) {
        if (status === 200)
            return "ok";
        if (status === 409 && error === "sold_out")
            return "sold_out";
        if (!status || (status === 503 && (error === "outcome_unknown" || error === "timeout")))
            return "unknown";
        return "failed";
    }

    const api = { check: check, fromRace: fromRace, outcomeOf: outcomeOf, BUDGET: BUDGET };
    if (typeof module !== "undefined" && module.exports)
        module.exports = api;
    else
        root.StockdLinearize = api;
})(typeof window !== "undefined" ? window : this);
