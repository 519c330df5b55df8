// jobvisor's dashboard: a little progressive enhancement. Every page works
// without it; it only adds "select all" and a refresh of the overview, which
// runs while the tab is visible, so a forgotten tab costs the database nothing.
(function () {
  "use strict";
  document.querySelectorAll("input.select-all").forEach(function (box) {
    box.addEventListener("change", function () {
      var form = box.closest("form");
      form.querySelectorAll('input[name="ids"]').forEach(function (row) {
        row.checked = box.checked;
      });
    });
  });
  if (document.getElementById("queues") || document.querySelector("svg.chart")) {
    var REFRESH_MS = 10000;
    setInterval(function () {
      if (document.visibilityState === "visible" && !document.querySelector("input:focus")) {
        window.location.reload();
      }
    }, REFRESH_MS);
  }
})();
