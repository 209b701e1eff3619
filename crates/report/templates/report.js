// Sortable tables; the body's data-script says whether this ran cleanly
// (tests look for "ok"; an error anywhere on the page makes it "error").
(function () {
  "use strict";
  window.addEventListener("error", function () {
    document.body.dataset.script = "error";
  });
  function key(cell, numeric) {
    var v = cell.getAttribute("data-sort");
    if (v === null) { v = cell.textContent; }
    return numeric ? parseFloat(v) || 0 : v.toLowerCase();
  }
  function sortBy(table, th, column) {
    var numeric = th.getAttribute("data-type") === "num";
    var descending = !th.classList.contains("desc");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[column], numeric), y = key(b.cells[column], numeric);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    });
    var fragment = document.createDocumentFragment();
    rows.forEach(function (r) { fragment.appendChild(r); });
    body.appendChild(fragment);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) {
      c.classList.remove("asc", "desc");
    });
    th.classList.add(descending ? "desc" : "asc");
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      th.addEventListener("click", function () { sortBy(table, th, column); });
    });
  });
  if (document.body.dataset.script !== "error") {
    document.body.dataset.script = "ok";
  }
})();
