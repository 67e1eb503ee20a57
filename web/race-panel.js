/*
 * race-panel.js - the live page's "Run a race" panel.
 *
 * A class watches one strategy race at a time: the panel asks stockd to
 * run it (POST /lab/race: stockd resets the lab product and fires the
 * buyers at itself, every sale traced), then draws the answer with
 * race.js's timeline and judges the clients' history with linearize.js,
 * beside the ledger's own figures. The presets are the lesson in order:
 * nolock loses updates, sql does not, and under a pause longer than the
 * lease a plain Redis lock oversells where fenced refuses the stale
 * holder.
 *
 * One run at a time: the button is off while one runs, and stockd refuses
 * a second with 409 busy anyway. The admin token, when stockd has one, is
 * typed into the panel and sent as a bearer token, never stored.
 * Tests read section[data-race-state] (idle, running, done, failed) and
 * the <svg> the timeline draws.
 */
"use strict";

(function () {
    const PRESETS = [
        { label: "nolock, hold 50 ms", strategy: "nolock", hold_ms: 50 },
        { label: "sql, hold 50 ms", strategy: "sql", hold_ms: 50 },
        { label: "redis-lock, ttl 100, pause 300", strategy: "redis-lock", ttl_ms: 100, pause_ms: 300 },
        { label: "fenced, ttl 100, pause 300", strategy: "fenced", ttl_ms: 100, pause_ms: 300 },
    ];
    const NUMBERS = ["buyers", "units", "hold_ms", "ttl_ms", "pause_ms"];

    const $ = (selector) => document.querySelector(selector);

    function setState(state, words) {
        $("#race-section").dataset.raceState = state;
        $("#race-status").textContent = words;
    }

    async function loadStrategies() {
        const select = $("#race-strategy");
        try {
            const reply = await fetch("/strategies", { cache: "no-store" });
            const doc = await reply.json();
            for (const s of doc.strategies) {
                const claim = !s.safe_single ? "unsafe" : s.caveat ? "safe*" : "safe";
                select.appendChild(new Option(`${s.name} (${claim})`, s.name));
            }
            select.value = "nolock";
        } catch (e) {
            setState("failed", `cannot list the strategies: ${e.message || e}`);
        }
    }

    function body() {
        const form = $("#race-form");
        const run = { strategy: form.strategy.value };
        for (const name of NUMBERS)
            run[name] = Number(form[name].value);
        return run;
    }

    function ledgerWords(ledger) {
        if (!ledger)
            return "ledger: not read";
        return `ledger: sold ${ledger.sold} of ${ledger.initial}, counter ${ledger.remaining}, ` +
            `oversold ${ledger.oversold}, lost updates ${ledger.lost_updates}`;
    }

    function historyWords(data) {
        const check = window.StockdLinearize;
        if (!check)
            return "history: the checker (linearize.js) is not loaded";
        const v = check.check(data.initial, check.fromRace(data));
        if (v.linearizable === true)
            return "history: linearizable";
        if (v.linearizable === false)
            return `history: not linearizable: ${v.violation}`;
        return `history: undecided${v.undecided ? `: ${v.undecided}` : ""}`;
    }

    function show(data) {
        const unsafe = data.ledger && (data.ledger.oversold > 0 || data.ledger.lost_updates > 0);
        const verdict = $("#race-verdict");
        verdict.replaceChildren();
        for (const words of [ledgerWords(data.ledger), historyWords(data)]) {
            const line = document.createElement("p");
            line.textContent = words;
            verdict.appendChild(line);
        }
        verdict.className = unsafe ? "verdict bad" : "verdict good";
        window.StockdRace.render(data, $("#race-timeline"));
    }

    async function run(event) {
        event.preventDefault();
        const button = $("#race-run");
        const headers = { "Content-Type": "application/json" };
        const token = $("#race-token").value.trim();
        if (token)
            headers.Authorization = `Bearer ${token}`;
        const asked = body();
        button.disabled = true;
        setState("running", `racing ${asked.buyers} buyers of ${asked.strategy} on ` +
            `${asked.units} units…`);
        try {
            const reply = await fetch("/lab/race", {
                method: "POST", headers: headers, body: JSON.stringify(asked), cache: "no-store",
            });
            const doc = await reply.json();
            if (!reply.ok) {
                const hint = reply.status === 401 ? " (type the admin token)" : "";
                setState("failed", `${reply.status} ${doc.error}: ${doc.message || ""}${hint}`);
                return;
            }
            show(doc);
            setState("done", `${doc.strategy}: ${doc.buyers} buyers on ${doc.initial} units ` +
                `(product ${doc.product})`);
        } catch (e) {
            setState("failed", `the race failed: ${e.message || e}`);
        } finally {
            button.disabled = false;
        }
    }

    function preset(p) {
        const form = $("#race-form");
        form.strategy.value = p.strategy;
        form.buyers.value = 12;
        form.units.value = 6;
        form.hold_ms.value = p.hold_ms || 0;
        form.ttl_ms.value = p.ttl_ms || 0;
        form.pause_ms.value = p.pause_ms || 0;
        form.requestSubmit();
    }

    document.addEventListener("DOMContentLoaded", () => {
        const presets = $("#race-presets");
        for (const p of PRESETS) {
            const b = document.createElement("button");
            b.type = "button";
            b.textContent = p.label;
            b.dataset.preset = p.strategy;
            b.addEventListener("click", () => preset(p));
            presets.appendChild(b);
        }
        $("#race-form").addEventListener("submit", run);
        setState("idle", "");
        loadStrategies();
    });
})();
