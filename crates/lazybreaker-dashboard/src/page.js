(function () {
  "use strict";
  var body = document.body;
  var period = Number(body.dataset.refreshMs) || 0;
  var status = document.getElementById("status");
  var filter = document.getElementById("filter");
  var token = document.getElementById("token");
  var base = location.pathname.replace(/\/?$/, "/");
  var refreshes = 0;
  // What the last control answered: kept beside "live, updated" until the next control,
  // so the refresh that follows a control does not wipe its answer away.
  var answer = "";

  function applyFilter() {
    var q = filter.value.trim().toLowerCase();
    document.querySelectorAll("#board [data-name]").forEach(function (el) {
      if (el.tagName === "BUTTON") return;
      el.hidden = q !== "" && el.dataset.name.toLowerCase().indexOf(q) < 0;
    });
  }

  function refresh() {
    var url = new URL(location.href);
    url.searchParams.delete("filter");
    return fetch(url, { cache: "no-store", headers: { accept: "text/html" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("board");
        document.getElementById("board").replaceWith(fresh);
        applyFilter();
        refreshes += 1;
        body.dataset.refreshed = String(refreshes);
        status.textContent = "live, updated " + new Date().toLocaleTimeString() + answer;
      })
      .catch(function (e) {
        status.textContent = "refresh failed (" + e.message + "); showing the last board";
      });
  }

  filter.addEventListener("input", function () {
    applyFilter();
    var q = filter.value.trim();
    history.replaceState(null, "", q ? "?filter=" + encodeURIComponent(q) : base);
  });
  filter.form.addEventListener("submit", function (e) { e.preventDefault(); });

  if (token) {
    token.value = sessionStorage.getItem("lazybreaker-token") || "";
    token.addEventListener("change", function () {
      sessionStorage.setItem("lazybreaker-token", token.value);
    });
    document.addEventListener("click", function (e) {
      var button = e.target.closest("button[data-action]");
      if (!button) return;
      var name = button.dataset.name, action = button.dataset.action;
      // The name isolated (FSI … PDI): a bidi override in it stays inside it.
      var shown = "\u2068" + name + "\u2069";
      fetch(base + "breakers/" + encodeURIComponent(name) + "/" + action, {
        method: "POST",
        headers: { authorization: "Bearer " + token.value },
      }).then(function (r) {
        answer = " \u00b7 " + shown + ": " + action.replace("_", " ")
          + (r.ok ? " done" : " refused (HTTP " + r.status + ")");
        status.textContent = answer.slice(3);
        return refresh();
      }, function (e) {
        answer = " \u00b7 " + shown + ": " + action.replace("_", " ") + " failed (" + e.message + ")";
        status.textContent = answer.slice(3);
      });
    });
  }

  applyFilter();
  if (period > 0) {
    refresh();
    setInterval(refresh, period);
  }
})();
