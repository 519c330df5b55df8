// jobvisor's dashboard: a little progressive enhancement. Every page works
// without it; it adds "select all" on the jobs page and, on the overview, a
// switch to refresh the page every 10 s. The refresh is off until turned on
// (remembered in this browser), and runs only while the tab is visible, so a
// forgotten tab costs the database nothing.
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
  var slot = document.getElementById("refresh-slot");
  if (!slot) {
    return;
  }
  var KEY = "jobvisor.refresh", REFRESH_MS = 10000;
  var label = document.createElement("label");
  var box = document.createElement("input");
  box.type = "checkbox";
  box.id = "auto-refresh";
  box.checked = window.localStorage.getItem(KEY) === "1";
  label.appendChild(box);
  label.appendChild(document.createTextNode(" refresh every 10 s"));
  slot.appendChild(label);
  box.addEventListener("change", function () {
    window.localStorage.setItem(KEY, box.checked ? "1" : "0");
  });
  setInterval(function () {
    if (box.checked && document.visibilityState === "visible") {
      window.location.reload();
    }
  }, REFRESH_MS);
})();
