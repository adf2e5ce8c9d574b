// The archive's search, without a server. The index is prebuilt (digest_core/site/search.py):
// search/meta.json, then the shards of the query's character pairs (its character, for one
// character) give candidate documents; month files are loaded newest first, and each
// candidate is checked for the whole query, until a page of hits is shown. A site built for
// files (data-format="js") has the index as scripts calling digestSearch.add(name, data),
// loaded with script elements: a page opened from disk may not fetch.
(function () {
  "use strict";
  var PAGE = 30;
  var list = document.getElementById("results");
  var status = document.getElementById("status");
  var more = document.getElementById("more");
  var input = document.getElementById("q");
  var root = list.getAttribute("data-root");
  var base = list.getAttribute("data-index");
  var pageName = list.getAttribute("data-page") || "";
  var scripts = list.getAttribute("data-format") === "js";
  var waiting = {};
  window.digestSearch = {
    add: function (name, data) {
      if (waiting[name]) { waiting[name].resolve(data); delete waiting[name]; }
    }
  };

  function script(path) {
    return new Promise(function (resolve, reject) {
      waiting[path] = { resolve: resolve };
      var el = document.createElement("script");
      el.src = base + path.replace(/\.json$/, ".js");
      el.onerror = function () { delete waiting[path]; reject(new Error(path + ": not loaded")); };
      el.onload = function () {
        if (waiting[path]) { delete waiting[path]; reject(new Error(path + ": no data")); }
      };
      document.head.append(el);
    });
  }
  var meta = null;
  var cache = {};
  var run = 0;
  var pending = null;
  var timer = null;

  function load(path) {
    if (!cache[path]) {
      cache[path] = scripts ? script(path) : fetch(base + path).then(function (r) {
        if (!r.ok) throw new Error(path + ": HTTP " + r.status);
        return r.json();
      });
    }
    return cache[path];
  }

  function grams(query) {
    var chars = Array.from(query);
    if (chars.length === 1) return chars;
    var out = [];
    for (var i = 0; i + 1 < chars.length; i++) out.push(chars[i] + chars[i + 1]);
    return out;
  }

  function shard(gram) {
    var value = 0;
    Array.from(gram).forEach(function (c) { value = value * 31 + c.codePointAt(0); });
    return value % meta.shards;
  }

  function candidates(query) {
    var wanted = grams(query);
    return Promise.all(wanted.map(function (g) {
      return load("grams/" + shard(g) + ".json").then(function (part) { return part[g] || []; });
    })).then(function (postings) {
      postings.sort(function (a, b) { return a.length - b.length; });
      var docs = postings[0];
      for (var i = 1; i < postings.length && docs.length; i++) {
        var other = new Set(postings[i]);
        docs = docs.filter(function (d) { return other.has(d); });
      }
      return docs;
    });
  }

  function month(doc) {  // the month file holding document number `doc`
    var m = meta.months;
    var lo = 0, hi = m.length - 1;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (m[mid][1] <= doc) lo = mid; else hi = mid - 1;
    }
    return m[lo];
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

  function hit(doc, at, length) {
    var li = document.createElement("li");
    var a = document.createElement("a");
    var cut = doc[0].indexOf("#");  // a folder, then "#anchor": the page's file name between
    a.href = root + (cut < 0 ? doc[0] + pageName : doc[0].slice(0, cut) + pageName + doc[0].slice(cut));
    a.textContent = doc[3];
    var info = document.createElement("div");
    info.className = "meta";
    info.textContent = doc[1] + " · " + doc[2];
    li.append(a, info, snippet(doc[4], at, length));
    list.append(li);
  }

  // check candidates in order until PAGE more hits are shown; resolves to the count shown
  function fill(state, me) {
    var shown = 0;
    function next() {
      if (me !== run) return Promise.resolve(-1);
      if (shown >= PAGE || state.at >= state.docs.length) return Promise.resolve(shown);
      var number = state.docs[state.at];
      var m = month(number);
      return load("docs/" + m[0] + ".json").then(function (docs) {
        if (me !== run) return -1;
        var doc = docs[number - m[1]];
        var at = doc[4].toLowerCase().indexOf(state.query);
        if (at >= 0) { hit(doc, at, state.query.length); shown++; }
        state.at++;
        return next();
      });
    }
    return next();
  }

  function report(state, raw) {
    state.found = list.children.length;
    var left = state.at < state.docs.length;
    more.hidden = !left;
    status.textContent = state.found
      ? "找到 " + state.found + (left ? "+" : "") + " 条 / " + state.found + (left ? "+" : "") + " found"
      : "没有找到“" + raw + "” / nothing found";
    document.body.setAttribute("data-search-done", String(run));
  }

  function show(raw) {
    var me = ++run;
    var query = raw.trim().toLowerCase();
    list.replaceChildren();
    more.hidden = true;
    pending = null;
    if (!query) { status.textContent = ""; return Promise.resolve(); }
    status.textContent = "正在搜索… / searching…";
    return candidates(query).then(function (docs) {
      if (me !== run) return;
      var state = { query: query, docs: docs, at: 0, found: 0 };
      return fill(state, me).then(function (n) {
        if (n < 0) return;
        pending = state;
        report(state, raw.trim());
      });
    }).catch(function (err) {
      status.textContent = "搜索失败 / search failed: " + err.message;
    });
  }

  function submit() {
    clearTimeout(timer);
    var q = input.value.trim();
    var url = new URL(window.location.href);
    if (q) url.searchParams.set("q", q); else url.searchParams.delete("q");
    window.history.replaceState(null, "", url);
    show(input.value);
  }

  more.addEventListener("click", function () {
    if (!pending) return;
    var state = pending, me = run;
    fill(state, me).then(function (n) { if (n >= 0) report(state, input.value.trim()); });
  });

  input.value = new URLSearchParams(window.location.search).get("q") || "";
  load("meta.json").then(function (data) {
    meta = data;
    document.body.setAttribute("data-search-ready", "1");
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(submit, 200);
    });
    input.form.addEventListener("submit", function (e) { e.preventDefault(); submit(); });
    show(input.value);
  }).catch(function (err) {
    status.textContent = "索引载入失败 / the index did not load: " + err.message;
  });
})();
