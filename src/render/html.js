// Draws the attention maps of the embedded JSON and wires the layer and head menus, the
// overview (every layer x head as a small map; a click opens it in the large view) and the
// shared 0-1 colour scale toggle. No network, no libraries: the page is one file that works
// from disk. A page holds one trace, or one section per sentence of a batch: each section's
// data block is `data` + a suffix that ends every element id of that section ("" on a page
// of one trace), so the sections share this script and nothing else.
"use strict";

// The viridis anchors `c` interpolated linearly at t in [0, 1]: the terminal heatmap's scale
// (html_generation.js, in the same script, uses it too).
function viridisAt(c, t) {
    t = Math.min(1, Math.max(0, isFinite(t) ? t : 0)) * (c.length - 1);
    const i = Math.min(c.length - 2, Math.floor(t));
    const f = t - i;
    return [0, 1, 2].map((k) => Math.round(c[i][k] + (c[i + 1][k] - c[i][k]) * f));
}

function option(sel, value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  sel.appendChild(o);
}

function drawSection(sfx) {
  const byId = (id) => document.getElementById(id + sfx);
  const data = JSON.parse(byId("data").textContent);
  const layerSel = byId("layer");
  const headSel = byId("head");
  const mapsDiv = byId("maps");
  const tip = byId("tip");
  const shared = byId("shared");
  const overview = byId("overview-grid");
  const scaleRule = byId("scale-rule");
  // Rows are the queries' labels, columns the keys': the same labels unless the keys are
  // another sequence's tokens (non-square maps, rows x cols), when `data.keys` holds them.
  const labels = data.labels;
  const keys = data.keys || labels;
  const n = labels.length;
  const cols = keys.length;
  // With --pad-to: which labels are pads (drawn greyed, their keys hatched).
  const pad = data.pad || labels.map(() => false);
  const keyPad = data.keys ? (data.key_pad || keys.map(() => false)) : pad;

  // The viridis anchors, interpolated linearly: the same scale as the terminal heatmap.
  function rgbOf(t) {
    return viridisAt(data.colors, t);
  }

  function colour(t) {
    return "rgb(" + rgbOf(t).join(",") + ")";
  }

  function maxOf(m) {
    let max = 0;
    m.values.forEach((row) => row.forEach((v) => { if (isFinite(v) && v > max) max = v; }));
    return max;
  }

  // Where a weight sits on the colour scale: 0 to the map's largest weight, or, with the
  // shared scale, 0 to 1 for every map (so that heads compare by colour).
  function scaleOf(v, max) {
    if (shared.checked) return v;
    return max > 0 ? v / max : 0;
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
    const max = maxOf(m);
    h.textContent = "layer " + layer + " · " + m.label + " (max " + max.toFixed(data.precision) + ")";
    box.appendChild(h);
    const grid = document.createElement("div");
    grid.className = "grid";
    grid.style.gridTemplateColumns = "auto repeat(" + cols + ", 22px)";
    grid.appendChild(document.createElement("div"));
    keys.forEach((l, k) => {
      const d = document.createElement("div");
      d.className = keyPad[k] ? "klabel pad" : "klabel";
      d.textContent = l;
      grid.appendChild(d);
    });
    m.values.forEach((row, q) => {
      const ql = document.createElement("div");
      ql.className = pad[q] ? "qlabel pad" : "qlabel";
      ql.textContent = q + " " + labels[q];
      grid.appendChild(ql);
      row.forEach((v, k) => {
        const c = document.createElement("div");
        c.className = keyPad[k] ? "cell padkey" : "cell";
        // The colour alone, so that the stylesheet's hatching of a pad key stays on top.
        c.style.backgroundColor = colour(scaleOf(v, max));
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

  // One small map: a canvas of cols x n pixels (one per weight), scaled up by the stylesheet.
  function drawSmall(m, layer) {
    const box = document.createElement("figure");
    box.className = "small";
    const canvas = document.createElement("canvas");
    canvas.width = cols;
    canvas.height = n;
    // The stylesheet draws it 64 px square; a non-square map keeps its shape, its longer side 64.
    if (cols !== n) {
      canvas.style.width = Math.round(64 * cols / Math.max(n, cols)) + "px";
      canvas.style.height = Math.round(64 * n / Math.max(n, cols)) + "px";
    }
    canvas.dataset.layer = layer;
    canvas.dataset.head = m.head;
    canvas.title = "layer " + layer + " · " + m.label + ": click to open";
    const ctx = canvas.getContext("2d");
    const img = ctx.createImageData(cols, n);
    const max = maxOf(m);
    m.values.forEach((row, q) => row.forEach((v, k) => {
      const rgb = rgbOf(scaleOf(v, max));
      img.data.set([rgb[0], rgb[1], rgb[2], 255], (q * cols + k) * 4);
    }));
    ctx.putImageData(img, 0, 0);
    box.appendChild(canvas);
    const cap = document.createElement("figcaption");
    cap.textContent = m.head === "mean" ? "mean" : "h" + m.head;
    box.appendChild(cap);
    return box;
  }

  // Every layer x head: a row per layer, its label first.
  function drawOverview() {
    overview.textContent = "";
    const cols = Math.max(1, ...data.layers.map((l) => l.maps.length));
    overview.style.gridTemplateColumns = "auto repeat(" + cols + ", max-content)";
    data.layers.forEach((l) => {
      const label = document.createElement("div");
      label.className = "olabel";
      label.textContent = "layer " + l.layer;
      overview.appendChild(label);
      l.maps.forEach((m) => overview.appendChild(drawSmall(m, l.layer)));
      for (let i = l.maps.length; i < cols; i++) overview.appendChild(document.createElement("div"));
    });
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
    const padded = (ls, ps, i) => i + " " + ls[i] + (ps[i] ? " (pad)" : "");
    tip.textContent = "layer " + c.dataset.layer + " · " + head + " · " + padded(labels, pad, q) +
      " → " + padded(keys, keyPad, k) + ": " + v.toFixed(data.precision);
  });

  overview.addEventListener("click", (e) => {
    const c = e.target;
    if (!c.dataset || c.dataset.layer === undefined) return;
    layerSel.value = c.dataset.layer;
    fillHeads();
    headSel.value = c.dataset.head;
    draw();
    byId("attention").scrollIntoView();
  });

  function rescale() {
    scaleRule.textContent = shared.checked
      ? "Rows are queries, columns keys; colour runs from 0 to 1 in every map (shared scale)."
      : "Rows are queries, columns keys; colour runs from 0 to each map's largest weight.";
    drawOverview();
    draw();
  }

  data.layers.forEach((l) => option(layerSel, l.layer, "layer " + l.layer));
  layerSel.addEventListener("change", () => { fillHeads(); draw(); });
  headSel.addEventListener("change", draw);
  shared.addEventListener("change", rescale);
  fillHeads();
  rescale();
}

document.querySelectorAll("script[type='application/json'][id^='data']").forEach((d) => drawSection(d.id.slice(4)));
