// The archive's search, without a server. The index is prebuilt (digest_core/site/search.py):
// search/meta.json; the year lists of (at most three of) the query's character pairs (its
// character, for one character) say which years may hold it; then, newest year first, that
// year's postings give candidate days, whose files are loaded newest first and each document
// checked for the whole query, until a page of hits is shown. A site built for files
// (data-format="js") has the index as scripts calling digestSearch.add(name, data), loaded
// with script elements: a page opened from disk may not fetch.
(function () {
  "use strict";
  var PAGE = 30;  // hits a page shows at most
  var DAYS = 5;  // and days' files it loads at most (a word found once a day: <100 kB)
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
  var pages = 0;
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

  function shard(gram, shards) {
    var value = 0;
    Array.from(gram).forEach(function (c) { value = value * 31 + c.codePointAt(0); });
    return value % shards;
  }

  function chosen(query) {  // the grams looked up: at most three, spread over the query
    var all = grams(query).filter(function (g, i, a) { return a.indexOf(g) === i; });
    if (all.length <= 3) return all;
    return [all[0], all[all.length >> 1], all[all.length - 1]];
  }

  function intersect(lists) {  // of ascending lists
    lists.sort(function (a, b) { return a.length - b.length; });
    var out = lists[0];
    for (var i = 1; i < lists.length && out.length; i++) {
      var other = new Set(lists[i]);
      out = out.filter(function (x) { return other.has(x); });
    }
    return out;
  }

  function days(posting) {  // a year's days (0 = 1 January) from gaps or a base64 bitmap
    var out = [];
    if (typeof posting !== "string") {
      var day = 0;
      posting.forEach(function (gap) { day += gap; out.push(day); });
      return out;
    }
    var bits = atob(posting);
    for (var d = 0; d < bits.length * 8; d++) {
      if (bits.charCodeAt(d >> 3) >> (d & 7) & 1) out.push(d);
    }
    return out;
  }

  function years(wanted) {  // the years (newest first) whose issues hold every wanted gram
    return Promise.all(wanted.map(function (g) {
      return load("grams/" + shard(g, meta.shards) + ".json").then(function (part) {
        return (part[g] || []).slice().reverse();
      });
    })).then(function (lists) {
      return intersect(lists).reverse().map(function (y) { return 2000 + y; });
    });
  }

  function dayDates(year, wanted) {  // the candidate days of `year`, newest first
    var shards = meta.years.filter(function (y) { return y[0] === year; })[0][1];
    return Promise.all(wanted.map(function (g) {
      return load("grams/" + year + "/" + shard(g, shards) + ".json").then(function (part) {
        return part[g] === undefined ? [] : days(part[g]);
      });
    })).then(function (lists) {
      return intersect(lists).reverse().map(function (d) {
        var date = new Date(Date.UTC(year, 0, 1 + d));
        return date.toISOString().slice(0, 10);
      });
    });
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

  function hit(date, file, doc, at, length) {
    var li = document.createElement("li");
    var a = document.createElement("a");
    a.href = root + date.replace(/-/g, "/") + "/" + pageName + "#" + doc[0];
    var text = doc[2];
    var line = text.indexOf("\n");
    a.textContent = doc[0] === "lede" ? file.m : (line < 0 ? text : text.slice(0, line));
    var info = document.createElement("div");
    info.className = "meta";
    info.textContent = date + " · " + doc[1];
    li.append(a, info, snippet(text, at, length));
    list.append(li);
  }

  // check candidate documents in order until PAGE more hits are shown or DAYS days' files
  // were read (years, then their days, then each day's documents); resolves to the count
  // shown
  function fill(state, me) {
    var shown = 0, loaded = 0;
    function next() {
      if (me !== run) return Promise.resolve(-1);
      if (shown >= PAGE || !left(state)) return Promise.resolve(shown);
      if (state.doc === 0 && loaded >= DAYS && state.day < state.days.length) {
        return Promise.resolve(shown);  // enough for one page: "more" goes on
      }
      if (state.day >= state.days.length) {
        var year = state.years[state.year++];
        return dayDates(year, state.wanted).then(function (found) {
          state.days = found;
          state.day = 0;
          state.doc = 0;
          return next();
        });
      }
      var date = state.days[state.day];
      if (state.doc === 0) loaded++;
      return load("days/" + date + ".json").then(function (file) {
        if (me !== run) return -1;
        var doc = file.d[state.doc];
        var at = doc[2].toLowerCase().indexOf(state.query);
        if (at >= 0) { hit(date, file, doc, at, state.query.length); shown++; }
        if (++state.doc >= file.d.length) { state.doc = 0; state.day++; }
        return next();
      });
    }
    return next();
  }

  function left(state) {  // more candidates to check
    return state.day < state.days.length || state.year < state.years.length;
  }

  function report(state, raw) {
    state.found = list.children.length;
    var more_ = left(state);
    more.hidden = !more_;
    status.textContent = state.found
      ? "找到 " + state.found + (more_ ? "+" : "") + " 条 / " + state.found + (more_ ? "+" : "") + " found"
      : "没有找到“" + raw + "” / nothing found";
    document.body.setAttribute("data-search-done", String(run));
    document.body.setAttribute("data-search-pages", String(++pages));  // one more page shown
  }

  function show(raw) {
    var me = ++run;
    var query = raw.trim().toLowerCase();
    list.replaceChildren();
    more.hidden = true;
    pending = null;
    if (!query) { status.textContent = ""; return Promise.resolve(); }
    status.textContent = "正在搜索… / searching…";
    var wanted = chosen(query);
    return years(wanted).then(function (found) {
      if (me !== run) return;
      var state = { query: query, wanted: wanted, years: found, year: 0, days: [], day: 0,
                    doc: 0, found: 0 };
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
