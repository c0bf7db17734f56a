// asynqdeck page behaviour. No inline scripts (the CSP forbids them); htmx
// does the requests, this file adds what htmx leaves to the page. Held live
// updates: COMPATIBILITY.md#r0.
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

  // Live updates never swap out what the user is about to click (issue 12
  // R0): while the pointer is over a table, link, button or field of a
  // polled fragment, or keyboard focus is inside it, its polls are skipped
  // (and a poll answered meanwhile is not swapped in), so the row under the
  // pointer stays the same element and does not move. A badge says so; the
  // fragment refreshes as soon as the pointer or focus leaves it.
  var HOLD_POINTER = "table:hover, a:hover, button:hover, input:hover, select:hover, label:hover, summary:hover";
  function isPoll(evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.getAttribute) return false;
    var trig = evt.detail.requestConfig && evt.detail.requestConfig.triggeringEvent;
    return (elt.getAttribute("hx-trigger") || "").indexOf("every") >= 0 && !(trig && trig.type === "click");
  }
  function holding(elt) {
    if (!elt.classList || !elt.classList.contains("live")) return false;
    return !!elt.querySelector(HOLD_POINTER) || elt.matches(":focus-within");
  }
  function hold(elt) {
    var n = parseInt(elt.getAttribute("data-held-polls") || "0", 10) || 0;
    elt.setAttribute("data-held-polls", String(n + 1));
    if (!elt.querySelector(":scope > .held-badge")) {
      var badge = document.createElement("span");
      badge.className = "badge held-badge";
      badge.textContent = "live updates paused while the pointer or focus is here";
      elt.prepend(badge);
    }
  }
  function release(elt) {
    elt.removeAttribute("data-held-polls");
    var badge = elt.querySelector(":scope > .held-badge");
    if (badge) badge.remove();
  }
  document.addEventListener("htmx:beforeRequest", function (evt) {
    if (isPoll(evt) && holding(evt.detail.elt)) {
      evt.preventDefault();
      hold(evt.detail.elt);
    }
  });
  document.addEventListener("htmx:beforeSwap", function (evt) {
    if (isPoll(evt) && holding(evt.detail.elt)) {
      evt.detail.shouldSwap = false;
      hold(evt.detail.elt);
    }
  });
  function resumeLeft() {
    document.querySelectorAll(".live[data-held-polls]").forEach(function (elt) {
      if (holding(elt) || paused || typeof htmx === "undefined") return;
      release(elt);
      htmx.ajax("GET", elt.getAttribute("hx-get"), {
        source: elt,
        target: elt,
        swap: elt.getAttribute("hx-swap") || "outerHTML"
      });
    });
  }
  ["mouseout", "focusout"].forEach(function (type) {
    document.addEventListener(type, function () { setTimeout(resumeLeft, 0); });
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
    if (evt.detail.target && evt.detail.target.classList) release(evt.detail.target);
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
