// quire's opt-in page script (site.toml: hover_previews = true). Served from the
// binary at /_static/quire.js and allowed by its SHA-256 in the page's CSP. It loads
// nothing from another origin: previews are this site's own pages, fetched
// same-origin, and only their title and description are shown, as text.
(() => {
  "use strict";
  const cache = new Map();
  let box = null, timer = 0, current = null;

  const local = a => {
    try {
      // getAttribute: an SVG <a> (a graph's node) has no string `href` property.
      const u = new URL(a.getAttribute("href"), location.href);
      return u.origin === location.origin && !u.pathname.startsWith("/_static/") &&
        !u.pathname.startsWith("/attachments/") && u.pathname !== location.pathname
        ? u : null;
    } catch (e) { return null; }
  };

  const preview = async url => {
    const key = url.pathname;
    if (!cache.has(key)) {
      cache.set(key, fetch(key, { credentials: "same-origin", redirect: "follow" })
        .then(r => (r.ok && (r.headers.get("content-type") || "").startsWith("text/html")) ? r.text() : null)
        .then(html => {
          if (!html) return null;
          const doc = new DOMParser().parseFromString(html, "text/html");
          const meta = sel => (doc.querySelector(sel) || {}).content || "";
          const title = meta('meta[property="og:title"]') ||
            ((doc.querySelector("article.note h1") || {}).textContent || "").trim();
          const text = meta('meta[name="description"]');
          return title ? { title, text } : null;
        })
        .catch(() => null));
    }
    return cache.get(key);
  };

  const hide = () => {
    clearTimeout(timer);
    current = null;
    if (box) box.hidden = true;
  };

  const show = (a, p) => {
    if (!box) {
      box = document.createElement("div");
      box.className = "popover";
      box.setAttribute("role", "tooltip");
      document.body.appendChild(box);
    }
    box.replaceChildren();
    const h = document.createElement("strong");
    h.textContent = p.title;
    box.appendChild(h);
    if (p.text) {
      const t = document.createElement("p");
      t.textContent = p.text;
      box.appendChild(t);
    }
    box.hidden = false;
    const r = a.getClientRects()[0] || a.getBoundingClientRect();
    const w = Math.min(360, document.documentElement.clientWidth - 16);
    box.style.width = w + "px";
    box.style.left = Math.max(8, Math.min(r.left + window.scrollX, window.scrollX + document.documentElement.clientWidth - w - 8)) + "px";
    box.style.top = (r.bottom + window.scrollY + 6) + "px";
  };

  const enter = e => {
    const a = e.target.closest && e.target.closest("main a[href]");
    if (!a || a === current) return;
    const url = local(a);
    if (!url) return;
    hide();
    current = a;
    timer = setTimeout(async () => {
      const p = await preview(url);
      if (p && current === a) show(a, p);
    }, 300);
  };

  const leave = e => {
    const a = e.target.closest && e.target.closest("main a[href]");
    if (a && a === current && !a.contains(e.relatedTarget)) hide();
  };

  document.addEventListener("mouseover", enter);
  document.addEventListener("mouseout", leave);
  document.addEventListener("focusin", enter);
  document.addEventListener("focusout", leave);
  document.addEventListener("keydown", e => { if (e.key === "Escape") hide(); });

  // The site graph: drag to pan, wheel (or the buttons) to zoom, by its viewBox.
  const svg = document.querySelector("svg.graph-site");
  if (!svg) return;
  const vb = svg.viewBox.baseVal;
  const home = [vb.x, vb.y, vb.width, vb.height];
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  svg.classList.add("zoomable");
  const zoom = (f, cx, cy) => {
    const w = vb.width * f, h = vb.height * f;
    if (w < home[2] / 20 || w > home[2] * 4) return;
    vb.x = cx - (cx - vb.x) * f;
    vb.y = cy - (cy - vb.y) * f;
    vb.width = w;
    vb.height = h;
  };
  const point = e => {
    const r = svg.getBoundingClientRect();
    return [vb.x + (e.clientX - r.left) / r.width * vb.width, vb.y + (e.clientY - r.top) / r.height * vb.height];
  };
  svg.addEventListener("wheel", e => {
    e.preventDefault();
    const [x, y] = point(e);
    zoom(e.deltaY > 0 ? 1.15 : 1 / 1.15, x, y);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", e => {
    if (e.target.closest("a")) return;
    drag = [e.clientX, e.clientY];
    svg.setPointerCapture(e.pointerId);
  });
  svg.addEventListener("pointermove", e => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    vb.x -= (e.clientX - drag[0]) / r.width * vb.width;
    vb.y -= (e.clientY - drag[1]) / r.height * vb.height;
    drag = [e.clientX, e.clientY];
  });
  svg.addEventListener("pointerup", () => { drag = null; });
  const bar = document.createElement("div");
  bar.className = "graph-zoom";
  for (const [label, act] of [["+", () => zoom(1 / 1.4, vb.x + vb.width / 2, vb.y + vb.height / 2)],
                              ["\u2212", () => zoom(1.4, vb.x + vb.width / 2, vb.y + vb.height / 2)],
                              ["Reset", () => { [vb.x, vb.y, vb.width, vb.height] = home; }]]) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", act);
    bar.appendChild(b);
  }
  svg.parentNode.insertBefore(bar, svg);
})();
