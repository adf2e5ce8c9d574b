// The archive's search: no server. Loads the prebuilt index (search.json, see
// digest_core/site/search.py): a query's character pairs (its character, for one
// character) pick candidate documents; each is then checked for the whole query.
(function () {
  "use strict";
  var list = document.getElementById("results");
  var status = document.getElementById("status");
  var input = document.getElementById("q");
  var root = list.getAttribute("data-root");
  var index = null;
  var lowered = null;

  function grams(query) {
    var chars = Array.from(query);
    if (chars.length === 1) return chars;
    var out = [];
    for (var i = 0; i + 1 < chars.length; i++) out.push(chars[i] + chars[i + 1]);
    return out;
  }

  function candidates(query) {
    var postings = grams(query).map(function (g) { return index.grams[g] || []; });
    postings.sort(function (a, b) { return a.length - b.length; });
    var docs = postings[0];
    for (var i = 1; i < postings.length && docs.length; i++) {
      var other = new Set(postings[i]);
      docs = docs.filter(function (d) { return other.has(d); });
    }
    return docs;
  }

  function snippet(text, at, length) {
    var line = text.lastIndexOf("\n", at) + 1;
    var end = text.indexOf("\n", at);
    if (end < 0) end = text.length;
    var start = Math.max(line, at - 40);
    var stop = Math.min(end, at + length + 60);
    var p = document.createElement("p");
    p.className = "snippet";
    p.append((start > line ? "…" : "") + text.slice(start, at));
    var mark = document.createElement("mark");
    mark.textContent = text.slice(at, at + length);
    p.append(mark, text.slice(at + length, stop) + (stop < end ? "…" : ""));
    return p;
  }

  function show(raw) {
    var query = raw.trim().toLowerCase();
    list.replaceChildren();
    if (!query) { status.textContent = ""; return; }
    var found = 0;
    candidates(query).forEach(function (d) {
      var at = lowered[d].indexOf(query);
      if (at < 0) return;
      var doc = index.docs[d];
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = root + doc[0];
      a.textContent = doc[3];
      var meta = document.createElement("div");
      meta.className = "meta";
      meta.textContent = doc[1] + " · " + doc[2];
      li.append(a, meta, snippet(doc[4], at, query.length));
      list.append(li);
      found++;
    });
    status.textContent = found
      ? "找到 " + found + " 条 / " + found + " found"
      : "没有找到“" + raw.trim() + "” / nothing found";
  }

  function run() {
    var q = input.value;
    var url = new URL(window.location.href);
    if (q.trim()) url.searchParams.set("q", q.trim()); else url.searchParams.delete("q");
    window.history.replaceState(null, "", url);
    show(q);
  }

  var params = new URLSearchParams(window.location.search);
  input.value = params.get("q") || "";
  status.textContent = "正在载入索引… / loading the index…";
  fetch(list.getAttribute("data-index"))
    .then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    })
    .then(function (data) {
      index = data;
      lowered = data.docs.map(function (doc) { return doc[4].toLowerCase(); });
      document.body.setAttribute("data-search-ready", "1");
      show(input.value);
      var timer = null;
      input.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(run, 150);
      });
      input.form.addEventListener("submit", function (e) { e.preventDefault(); run(); });
    })
    .catch(function (err) {
      status.textContent = "索引载入失败 / the index did not load: " + err.message;
    });
})();
