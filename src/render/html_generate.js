// The generation view (--generate): hovering a generated token (or clicking it, which keeps
// it) colours every token before it by the attention row of the step that chose it, for the
// layer and head of the menus (or their means), and the grid beside draws that step's row
// for every layer and head as a strip; a click on a strip shows it. The rows come from the
// section's `gen-data` block (render/html_generation.rs); this script only draws them.
function drawGeneration(sfx) {
  const byId = (id) => document.getElementById(id + sfx);
  const data = JSON.parse(byId("gen-data").textContent);
  const layerSel = byId("gen-layer");
  const headSel = byId("gen-head");
  const shared = byId("gen-shared");
  const sink = byId("gen-sink");
  const tip = byId("gen-tip");
  const grid = byId("gen-grid");
  const rule = byId("gen-scale-rule");
  const spans = [...byId("gen-text").querySelectorAll(".tok")];
  const gens = spans.filter((s) => s.dataset.gen !== undefined);
  // The token whose step is shown, and whether a click keeps it while others are hovered.
  let shown = 0;
  let pinned = false;

  // The page's viridis scale (as html.js draws the maps), and dark or light text on it.
  function rgbOf(t) {
    return viridisAt(data.colors, t);
  }
  function darkText(rgb) {
    const lin = (c) => { const s = c / 255; return s <= 0.04045 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4); };
    return 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2]) > 0.179;
  }

  // The row of token `t` for a layer ("mean": over layers and heads) and a head ("mean").
  function rowOf(t, layer, head) {
    if (layer === "mean") return t.mean;
    const li = data.layers.indexOf(Number(layer));
    return head === "mean" ? t.mean_heads[li] : t.heads[li][data.heads.indexOf(Number(head))];
  }

  // Where a weight sits on the scale: 0 to the row's largest weight (after the first token
  // with the sink toggle, the first then drawn at the top), or 0 to 1 with the shared scale.
  function scaler(row) {
    if (shared.checked) return (v) => v;
    const rest = sink.checked && row.length > 1 ? row.slice(1) : row;
    const max = Math.max(0, ...rest.filter(isFinite));
    return (v) => (max > 0 ? v / max : 0);
  }

  function paintText() {
    const t = data.tokens[shown];
    const row = t ? rowOf(t, layerSel.value, headSel.value) : [];
    const scale = scaler(row);
    spans.forEach((s) => {
      const pos = Number(s.dataset.pos);
      s.classList.toggle("chosen", pos === data.prompt + shown);
      s.classList.toggle("pinned", pinned && pos === data.prompt + shown);
      s.classList.toggle("later", pos > data.prompt + shown);
      if (pos < row.length) {
        const rgb = rgbOf(scale(row[pos]));
        s.style.backgroundColor = "rgb(" + rgb.join(",") + ")";
        s.style.color = darkText(rgb) ? "#000" : "#fff";
        s.dataset.weight = row[pos];
      } else {
        s.style.backgroundColor = "";
        s.style.color = "";
        delete s.dataset.weight;
      }
    });
  }

  // The grid: a row per layer, a strip per head and one for their mean, then the mean over
  // layers; each strip one pixel per earlier token, scaled by the stylesheet.
  function buildGrid() {
    grid.textContent = "";
    grid.style.gridTemplateColumns = "auto repeat(" + (data.heads.length + 1) + ", max-content)";
    const label = (text) => {
      const d = document.createElement("div");
      d.className = "glabel";
      d.textContent = text;
      grid.appendChild(d);
    };
    const strip = (layer, head) => {
      const c = document.createElement("canvas");
      c.dataset.layer = layer;
      c.dataset.head = head;
      const what = layer === "mean" ? "mean over layers and heads" : "layer " + layer + " · " +
        (head === "mean" ? "mean over heads" : "head " + head);
      c.title = what + ": click to show";
      grid.appendChild(c);
    };
    label("");
    data.heads.forEach((h) => label("h" + h));
    label("mean");
    data.layers.forEach((l) => {
      label("layer " + l);
      data.heads.forEach((h) => strip(l, String(h)));
      strip(l, "mean");
    });
    label("all layers");
    data.heads.forEach(() => grid.appendChild(document.createElement("div")));
    strip("mean", "mean");
  }

  function paintGrid() {
    const t = data.tokens[shown];
    grid.querySelectorAll("canvas").forEach((c) => {
      const row = t ? rowOf(t, c.dataset.layer, c.dataset.head) : [];
      const scale = scaler(row);
      const keys = Math.max(1, row.length);
      c.width = keys;
      c.height = 1;
      // Three pixels a token, 36 to 72 px wide: crisp when enlarged, shrunk smoothly past 72 tokens.
      const width = Math.max(36, Math.min(keys * 3, 72));
      c.style.width = width + "px";
      c.style.imageRendering = keys <= width ? "pixelated" : "auto";
      const ctx = c.getContext("2d");
      const img = ctx.createImageData(keys, 1);
      row.forEach((v, k) => img.data.set([...rgbOf(scale(v)), 255], k * 4));
      ctx.putImageData(img, 0, 0);
      const on = c.dataset.layer === layerSel.value && (layerSel.value === "mean" || c.dataset.head === headSel.value);
      c.classList.toggle("on", on);
    });
  }

  function paint() {
    rule.textContent = "Each token before the chosen one is coloured by its weight, from 0 to " + (shared.checked
      ? "1 (shared scale)."
      : sink.checked ? "the row's largest weight after the first token (the first is drawn at the top)."
        : "the row's largest weight.");
    headSel.disabled = layerSel.value === "mean";
    if (headSel.disabled) headSel.value = "mean";
    paintText();
    paintGrid();
  }

  function show(i) {
    shown = i;
    paint();
  }

  function tipFor(s) {
    const pos = Number(s.dataset.pos);
    const label = (p) => p + " " + spans[p].textContent;
    if (s.dataset.weight !== undefined) {
      const layer = layerSel.value === "mean" ? "mean over layers" : "layer " + layerSel.value;
      const head = headSel.value === "mean" ? "mean over heads" : "head " + headSel.value;
      return "generated token " + (shown + 1) + " (" + label(data.prompt + shown) + ") · " + layer + " · " + head +
        " → " + label(pos) + ": " + Number(s.dataset.weight).toFixed(data.precision);
    }
    return s.title || label(pos) + " (after the token shown)";
  }

  byId("gen-text").addEventListener("mouseover", (e) => {
    const s = e.target.closest(".tok");
    if (!s) return;
    if (!pinned && s.dataset.gen !== undefined) show(Number(s.dataset.gen));
    tip.textContent = tipFor(s);
  });
  function pick(s) {
    const i = Number(s.dataset.gen);
    pinned = !(pinned && shown === i);
    show(i);
    tip.textContent = tipFor(s);
  }
  gens.forEach((s) => {
    s.addEventListener("click", () => pick(s));
    s.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(s); }
    });
  });
  grid.addEventListener("click", (e) => {
    const c = e.target;
    if (c.tagName !== "CANVAS") return;
    layerSel.value = c.dataset.layer;
    headSel.value = c.dataset.head;
    paint();
  });

  data.layers.forEach((l) => option(layerSel, l, "layer " + l));
  option(layerSel, "mean", "mean over layers");
  data.heads.forEach((h) => option(headSel, h, "head " + h));
  option(headSel, "mean", "mean over heads");
  headSel.value = "mean";
  [layerSel, headSel, shared, sink].forEach((el) => el.addEventListener("change", paint));
  buildGrid();
  paint();
}

document.querySelectorAll("script[type='application/json'][id^='gen-data']").forEach((d) => drawGeneration(d.id.slice(8)));
