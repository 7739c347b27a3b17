/* The site's search where Material's cannot run: a page opened from disk (file://) may not start
 * the Web Worker Material searches in, and the polyfill for that is fetched from a CDN (which the
 * build removes: the pages fetch nothing).  So here, on file:// pages, the search box searches the
 * index the offline plugin writes (search/search_index.js, `var __index = {...}`) in the page
 * itself: every word of the query in a section's title or text, titles first. */
(function () {
  "use strict";

  function plain(html) {
    return String(html).replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").trim();
  }

  /* The index's sections matching every word of `query`: [{location, title, snippet}], best first. */
  function search(index, query, limit) {
    var words = String(query).toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return [];
    var found = [];
    index.docs.forEach(function (doc) {
      var title = plain(doc.title), text = plain(doc.text);
      var hay = (title + " " + text).toLowerCase();
      if (!words.every(function (w) { return hay.indexOf(w) >= 0; })) return;
      var inTitle = words.filter(function (w) { return title.toLowerCase().indexOf(w) >= 0; }).length;
      var at = Math.max(0, text.toLowerCase().indexOf(words[0]) - 60);
      found.push({location: doc.location, title: title, score: inTitle,
                  snippet: (at ? "… " : "") + text.slice(at, at + 200) + (text.length > at + 200 ? " …" : "")});
    });
    found.sort(function (a, b) { return b.score - a.score; });
    return found.slice(0, limit || 20);
  }

  if (typeof module !== "undefined" && module.exports) {  /* node: the tests */
    module.exports = {search: search};
    return;
  }
  if (window.location.protocol !== "file:") return;  /* served: Material's own search runs */

  var script = document.currentScript;
  var base = script.src.replace(/assets\/javascripts\/offline-search\.js.*$/, "")
                       .replace(/javascripts\/offline-search\.js.*$/, "");

  function render(results, list, meta) {
    list.innerHTML = "";
    meta.textContent = results.length === 1 ? "1 matching document" :
      (results.length ? results.length + " matching documents" : "No matching documents");
    results.forEach(function (r) {
      var item = document.createElement("li"), link = document.createElement("a");
      var article = document.createElement("article"), head = document.createElement("h1");
      var body = document.createElement("p");
      item.className = "md-search-result__item";
      link.className = "md-search-result__link";
      link.href = base + r.location;
      article.className = "md-search-result__article md-typeset";
      head.textContent = r.title;
      body.textContent = r.snippet;
      article.appendChild(head);
      article.appendChild(body);
      link.appendChild(article);
      item.appendChild(link);
      list.appendChild(item);
    });
  }

  var loaded = document.createElement("script");
  loaded.src = base + "search/search_index.js";
  loaded.onload = function () {
    var input = document.querySelector('[data-md-component="search-query"]');
    var list = document.querySelector(".md-search-result__list");
    var meta = document.querySelector(".md-search-result__meta");
    if (!input || !list || !meta || typeof __index === "undefined") return;
    input.addEventListener("input", function () { render(search(__index, input.value), list, meta); });
  };
  document.head.appendChild(loaded);
})();
