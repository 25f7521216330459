// Draws the attention maps of the embedded JSON and wires the layer and head menus.
// No network, no libraries: the page is one file that works from disk.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const layerSel = document.getElementById("layer");
  const headSel = document.getElementById("head");
  const mapsDiv = document.getElementById("maps");
  const tip = document.getElementById("tip");
  const labels = data.labels;
  const n = labels.length;

  // The viridis anchors, interpolated linearly: the same scale as the terminal heatmap.
  function colour(t) {
    const c = data.colors;
    t = Math.min(1, Math.max(0, isFinite(t) ? t : 0)) * (c.length - 1);
    const i = Math.min(c.length - 2, Math.floor(t));
    const f = t - i;
    const rgb = [0, 1, 2].map((k) => Math.round(c[i][k] + (c[i + 1][k] - c[i][k]) * f));
    return "rgb(" + rgb.join(",") + ")";
  }

  function option(sel, value, text) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = text;
    sel.appendChild(o);
  }

  function layerData() {
    return data.layers.find((l) => String(l.layer) === layerSel.value) || data.layers[0];
  }

  function fillHeads() {
    const keep = headSel.value;
    headSel.textContent = "";
    const maps = layerData() ? layerData().maps : [];
    if (maps.length > 1) option(headSel, "all", "all heads");
    maps.forEach((m) => option(headSel, m.head, m.label));
    if ([...headSel.options].some((o) => o.value === keep)) headSel.value = keep;
  }

  function drawMap(m, layer) {
    const box = document.createElement("div");
    box.className = "map";
    const h = document.createElement("h4");
    let max = 0;
    m.values.forEach((row) => row.forEach((v) => { if (isFinite(v) && v > max) max = v; }));
    h.textContent = "layer " + layer + " · " + m.label + " (max " + max.toFixed(data.precision) + ")";
    box.appendChild(h);
    const grid = document.createElement("div");
    grid.className = "grid";
    grid.style.gridTemplateColumns = "auto repeat(" + n + ", 22px)";
    grid.appendChild(document.createElement("div"));
    labels.forEach((l) => {
      const d = document.createElement("div");
      d.className = "klabel";
      d.textContent = l;
      grid.appendChild(d);
    });
    m.values.forEach((row, q) => {
      const ql = document.createElement("div");
      ql.className = "qlabel";
      ql.textContent = q + " " + labels[q];
      grid.appendChild(ql);
      row.forEach((v, k) => {
        const c = document.createElement("div");
        c.className = "cell";
        c.style.background = colour(max > 0 ? v / max : 0);
        c.dataset.layer = layer;
        c.dataset.head = m.head;
        c.dataset.q = q;
        c.dataset.k = k;
        c.dataset.value = v;
        grid.appendChild(c);
      });
    });
    box.appendChild(grid);
    return box;
  }

  function draw() {
    const l = layerData();
    mapsDiv.textContent = "";
    if (!l) return;
    l.maps
      .filter((m) => headSel.value === "all" || m.head === headSel.value)
      .forEach((m) => mapsDiv.appendChild(drawMap(m, l.layer)));
  }

  mapsDiv.addEventListener("mouseover", (e) => {
    const c = e.target;
    if (!c.classList || !c.classList.contains("cell")) return;
    const v = Number(c.dataset.value);
    const q = Number(c.dataset.q), k = Number(c.dataset.k);
    const head = c.dataset.head === "mean" ? "mean over heads" : "head " + c.dataset.head;
    tip.textContent = "layer " + c.dataset.layer + " · " + head + " · " + q + " " + labels[q] +
      " → " + k + " " + labels[k] + ": " + v.toFixed(data.precision);
  });

  data.layers.forEach((l) => option(layerSel, l.layer, "layer " + l.layer));
  layerSel.addEventListener("change", () => { fillHeads(); draw(); });
  headSel.addEventListener("change", draw);
  fillHeads();
  draw();
})();
