"""report.html's race timelines: one figure per race of lab.drivers.race_runs, drawn in the
page by web/race.js from the race driver's JSON embedded beside it, with the
history checker's verdict (lab.judges.linearize here, web/linearize.js again in the page)
and the race's ledger.

web/race.js is the live page's renderer; it sets window.StockdRace, whose render
(or draw) function takes the driver's JSON (and the element to draw in) and returns
or draws the SVG. The page inlines both scripts so that report.html stays one file
that opens anywhere. Without web/race.js in the checkout, or without races (a
stockd lacking POST /lab/race), the section says so."""

import json
import os

from ..base.common import REPO
from .html import card, esc

SCRIPTS = ("linearize.js", "race.js")

LOADER = """
(function () {
    "use strict";
    var R = window.StockdRace, L = window.StockdLinearize;
    var draw = R && (R.render || R.draw || R.timeline);
    document.querySelectorAll("figure.race").forEach(function (fig) {
        var data = JSON.parse(fig.querySelector("script.race-data").textContent);
        var box = fig.querySelector(".timeline");
        if (L) {
            var v = L.check(data.initial, L.fromRace(data));
            fig.setAttribute("data-js-linearizable", String(v.linearizable));
        }
        if (!draw) {
            box.textContent = "web/race.js did not load: no timeline.";
            return;
        }
        var el = draw(data, box);
        if (el && el.nodeType && !el.parentNode)
            box.appendChild(el);
        fig.setAttribute("data-drawn", "1");
    });
})();
"""


def _script(name):
    path = os.path.join(REPO, "web", name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def _inline(text):
    """Text that is safe inside <script>...</script>."""
    return text.replace("</", "<\\/")


def figure(entry):
    race, check = entry["race"], entry["check"]
    p = entry["params"]
    knobs = ", ".join(f"{k} {p[k]}" for k in ("hold_ms", "ttl_ms", "pause_ms") if p.get(k))
    said = check["history_linearizable"]
    verdict = "undecided" if said is None else "linearizable" if said else "not linearizable"
    agree = check["agree"] or "the two witnesses agree"
    caption = (f"<b>{esc(entry['strategy'])}</b> — {p['buyers']} buyers, {p['units']} units"
               f"{', ' + esc(knobs) if knobs else ''}. Ledger: {esc(check['ledger'])}. "
               f"History: {esc(check['history'])}. <span class=\"note\">{esc(agree)}</span>")
    data = _inline(json.dumps(race, separators=(",", ":")))
    return (f'<figure class="race" data-strategy="{esc(entry["strategy"])}" '
            f'data-verdict="{verdict}"><figcaption>{caption}</figcaption>'
            f'<div class="timeline"></div>'
            f'<script type="application/json" class="race-data">{data}</script></figure>')


INTRO = ("Small races run by stockd itself (POST /lab/race, every request traced): one "
         "lane per request on one time axis, what each read and wrote; the lost updates "
         "and oversells are marked. Each unsafe strategy, and its store's safe "
         "counterpart for contrast.")


def section(races, intro=INTRO):
    if not races:
        return ""
    note = esc(races.get("note") or "")
    if not races.get("races"):
        return card("Race timelines", f'<p class="note" id="races-missing">{note}</p>')
    scripts = {name: _script(name) for name in SCRIPTS}
    missing = [n for n, text in scripts.items() if text is None]
    body = "".join(figure(e) for e in races["races"])
    if missing:
        body += (f'<p class="note">web/{esc(", web/".join(missing))} is not in this checkout: '
                 "the races' JSON is embedded, the pictures are not drawn.</p>")
    code = "".join(f"<script>{_inline(text)}</script>" for text in scripts.values() if text)
    return card("Race timelines", f'<p class="note">{intro} {note}.</p><div id="races">'
                f"{body}</div>{code}<script>{LOADER}</script>")
