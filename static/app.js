// asynqdeck page behaviour. No inline scripts (the CSP forbids them); htmx
// does the requests, this file adds what htmx leaves to the page.
(function () {
  "use strict";
  var paused = false;

  function toast(text, isError) {
    var box = document.getElementById("toast");
    if (!box) return;
    var msg = document.createElement("div");
    msg.className = "msg" + (isError ? " error" : "");
    msg.textContent = text;
    box.appendChild(msg);
    setTimeout(function () { msg.remove(); }, 6000);
  }

  // Local time and relative time for every <time datetime=...>.
  function localTimes(root) {
    (root || document).querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      el.title = "Local: " + d.toLocaleString();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    var btn = document.getElementById("live-toggle");
    if (btn) {
      btn.addEventListener("click", function () {
        paused = !paused;
        btn.setAttribute("aria-pressed", paused ? "true" : "false");
        btn.textContent = paused ? "Resume live updates" : "Pause live updates";
      });
    }
  });

  // Pausing stops polls, not clicks.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var trig = evt.detail.requestConfig && evt.detail.requestConfig.triggeringEvent;
    var polling = evt.detail.elt && (evt.detail.elt.getAttribute("hx-trigger") || "").indexOf("every") === 0;
    if (paused && polling && !(trig && trig.type === "click")) evt.preventDefault();
  });

  // A failed poll marks the fragment stale instead of breaking the page.
  function markStale(evt, on) {
    var elt = evt.detail.elt;
    if (!elt || !elt.classList || !elt.classList.contains("live")) return false;
    elt.classList.toggle("stale", on);
    var badge = elt.querySelector(":scope > .stale-badge");
    if (on && !badge) {
      badge = document.createElement("span");
      badge.className = "badge stale stale-badge";
      badge.textContent = "stale: last update failed";
      elt.prepend(badge);
    }
    return true;
  }
  document.addEventListener("htmx:responseError", function (evt) {
    if (markStale(evt, true)) return;
    var xhr = evt.detail.xhr;
    toast((xhr && xhr.responseText) || "Request failed", true);
  });
  document.addEventListener("htmx:sendError", function (evt) {
    if (!markStale(evt, true)) toast("Cannot reach the dashboard server", true);
  });
  document.addEventListener("htmx:afterSwap", function (evt) {
    localTimes(evt.detail.target);
  });

  // Toasts sent by the server with HX-Trigger: {"toast": "..."}.
  document.addEventListener("toast", function (evt) {
    toast(evt.detail && evt.detail.value ? evt.detail.value : String(evt.detail || ""), false);
  });

  // Copy buttons: <button data-copy="text">.
  document.addEventListener("click", function (evt) {
    var b = evt.target.closest && evt.target.closest("[data-copy]");
    if (!b) return;
    navigator.clipboard.writeText(b.getAttribute("data-copy")).then(function () {
      toast("Copied " + b.getAttribute("data-copy").slice(0, 40));
    });
  });

  // "Select all" checkbox: <input type=checkbox data-select-all="name">.
  document.addEventListener("change", function (evt) {
    var all = evt.target.closest && evt.target.closest("[data-select-all]");
    if (!all) return;
    var name = all.getAttribute("data-select-all");
    document.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (c) {
      c.checked = all.checked;
    });
  });
})();

// Error toasts sent by the server with HX-Trigger: {"toastError": "..."}.
document.addEventListener("toastError", function (evt) {
  var box = document.getElementById("toast");
  if (!box) return;
  var msg = document.createElement("div");
  msg.className = "msg error";
  msg.textContent = evt.detail && evt.detail.value ? evt.detail.value : String(evt.detail || "");
  box.appendChild(msg);
  setTimeout(function () { msg.remove(); }, 10000);
});

// A polled fragment holding checked rows (inputs marked data-hold-live)
// skips its polls, so a refresh does not drop the selection.
document.addEventListener("htmx:beforeRequest", function (evt) {
  var elt = evt.detail.elt;
  if (!elt || !elt.getAttribute) return;
  var polling = (elt.getAttribute("hx-trigger") || "").indexOf("every") === 0;
  if (polling && elt.querySelector("input[data-hold-live]:checked")) evt.preventDefault();
});
