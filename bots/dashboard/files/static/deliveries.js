// The Deliveries page, live: every second it asks deliveries.json and redraws the counts
// (text only: no markup from the data), the timeline chart every few seconds.
"use strict";
(function () {
  var root = document.getElementById("deliveries");
  if (!root) { return; }
  var day = root.getAttribute("data-day");
  var ticks = 0;

  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "" : String(text);
    row.appendChild(td);
  }

  function section(d) {
    var found = root.querySelector('section[data-platform="' + CSS.escape(d.platform) + '"]');
    if (found && found.getAttribute("data-delivery") === String(d.delivery)) { return found; }
    if (found) { found.remove(); }
    var s = document.createElement("section");
    s.className = "card delivery";
    s.setAttribute("data-platform", d.platform);
    s.setAttribute("data-delivery", String(d.delivery));
    var h = document.createElement("h2");
    h.textContent = d.platform + " ";
    var small = document.createElement("small");
    small.textContent = "· " + d.revision + " · #" + d.generation;
    var state = document.createElement("span");
    state.className = "state badge";
    h.appendChild(small); h.appendChild(document.createTextNode(" ")); h.appendChild(state);
    var p = document.createElement("p"); p.className = "summary";
    var img = document.createElement("img"); img.className = "timeline";
    img.alt = d.platform + " 每秒消息 / messages per second";
    var wrap = document.createElement("div"); wrap.className = "scroll";
    var table = document.createElement("table");
    var head = document.createElement("tr");
    ["目标 / target", "已发 sent", "待发 pending", "失败 failed", "未知 unknown", "重试 retries",
     "完成 / done at", "错误 / error"].forEach(function (t) {
      var th = document.createElement("th"); th.textContent = t; head.appendChild(th);
    });
    var thead = document.createElement("thead"); thead.appendChild(head);
    table.appendChild(thead); table.appendChild(document.createElement("tbody"));
    wrap.appendChild(table);
    [h, p, img, wrap].forEach(function (e) { s.appendChild(e); });
    var empty = root.querySelector(".empty");
    if (empty) { empty.remove(); }
    root.appendChild(s);
    return s;
  }

  function draw(d) {
    var s = section(d);
    var t = d.totals;
    var state = s.querySelector(".state");
    state.textContent = d.done ? "完成 / done" : "进行中 / running";
    state.className = "state badge " + (d.done ? "done" : "running");
    s.querySelector(".summary").textContent =
      "目标 / targets " + d.targets_total + " · 已发 / sent " + t.sent + " · 待发 / pending " +
      (t.pending + t.in_flight) + " · 失败 / failed " + (t.failed + t.gone) + " · 未知 / unknown " +
      t.unknown + " · 重试 / retries " + t.retries + (d.completed ? " · 完成于 / done at " + d.completed : "");
    var body = s.querySelector("tbody");
    var rows = document.createDocumentFragment();
    d.targets.forEach(function (x) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-target", x.target);
      [x.target, x.sent, x.pending + x.in_flight, x.failed + x.gone, x.unknown, x.retries,
       x.completed, x.error].forEach(function (v) { cell(tr, v); });
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);
    var img = s.querySelector("img.timeline");
    if (!img.getAttribute("src") || ticks % 3 === 0) {
      img.src = "/admin/chart/timeline.svg?delivery=" + d.delivery + "&platform=" +
        encodeURIComponent(d.platform) + "&t=" + ticks;
    }
  }

  function live(data) {
    var body = document.querySelector("#live tbody");
    if (!body) { return; }
    var rows = document.createDocumentFragment();
    Object.keys(data.live).forEach(function (name) {
      var v = data.live[name];
      var tr = document.createElement("tr");
      tr.setAttribute("data-platform", name);
      [name, v.sent, v.retried, v.rate_limited, v.failed, v.rate, v.limit].forEach(function (x) { cell(tr, x); });
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);
  }

  function tick() {
    ticks += 1;
    fetch("/admin/deliveries.json?day=" + encodeURIComponent(day), {credentials: "same-origin"})
      .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.json(); })
      .then(function (data) {
        data.platforms.forEach(draw);
        live(data);
        root.setAttribute("data-updated", String(ticks));
      })
      .catch(function () { root.setAttribute("data-error", "1"); })
      .finally(function () { window.setTimeout(tick, 1000); });
  }
  tick();
})();
