// A market's price history as SVG, drawn by this small module rather than a charting library: the
// chart is one polyline of trades, their points, one dashed line for the best offer and two axes,
// which a few dozen lines draw; a library would add a dependency (and its updates and size) to
// every page load for that. The figures are the API's decimal strings; they become numbers here
// only to place them on the screen, and every label is formatted from the strings (format.js).
import { h } from './dom.js';
import { perHour, timestamp, count } from './format.js';

const SVG = 'svg:';

// Decimal string -> thousandths (the book's tick), exactly: "2.880" -> 2880.
function milli(price) {
  const m = /^(\d+)(?:\.(\d{0,3}))?/.exec(String(price));
  if (!m) return NaN;
  return Number(m[1]) * 1000 + Number((m[2] || '').padEnd(3, '0'));
}

function fromMilli(v) {
  return (v / 1000).toFixed(3);
}

// Round tick values (in thousandths) for a y range: 3 to 5 of them, at 1, 2 or 5 × 10^k.
function ticks(lo, hi) {
  const span = Math.max(hi - lo, 1);
  const raw = span / 4;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * pow).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Math.round(v));
  return out;
}

// {gpu, trades: [{price_usd_per_gpu_hour, gpus, at}] (any order), bestAsk: string|null, width}
// -> a <figure> with the SVG (role img and a name), a caption that says the same in words, and a
// visually hidden table of the figures the caption summarises.
export function priceHistoryChart({ gpu, trades, bestAsk, width = 640 }) {
  const sorted = trades.slice().sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || a.id - b.id);
  const fig = h('figure', { class: 'price-chart', 'data-testid': 'price-chart' });
  if (!sorted.length) {
    const text = `No trades yet in the ${gpu} market, so there is no price history` + (bestAsk ? `; the best offer now is ${perHour(bestAsk, { book: true })}.` : '.');
    fig.appendChild(h('div', { class: 'empty', 'data-testid': 'price-chart-empty' }, text));
    return fig;
  }
  const prices = sorted.map((t) => milli(t.price_usd_per_gpu_hour));
  const ask = bestAsk == null ? null : milli(bestAsk);
  const lowTrade = Math.min(...prices);
  const highTrade = Math.max(...prices);
  let lo = Math.min(lowTrade, ask ?? lowTrade);
  let hi = Math.max(highTrade, ask ?? highTrade);
  const pad = Math.max(10, Math.round((hi - lo) * 0.12));
  lo = Math.max(0, lo - pad);
  hi += pad;

  const left = 74;
  const right = 12;
  const top = 14;
  const bottom = 40;
  const height = 220;
  const plotW = Math.max(40, width - left - right);
  const plotH = height - top - bottom;
  const t0 = Date.parse(sorted[0].at);
  const t1 = Date.parse(sorted[sorted.length - 1].at);
  // Trades in one instant (or one trade) are spread by their order so that each stays visible.
  const xOf = (t, i) => left + (t1 > t0 ? ((Date.parse(t.at) - t0) / (t1 - t0)) * plotW : sorted.length > 1 ? (i / (sorted.length - 1)) * plotW : plotW / 2);
  const yOf = (v) => top + plotH - ((v - lo) / (hi - lo)) * plotH;

  const last = sorted[sorted.length - 1];
  const range = `${timestamp(sorted[0].at)} to ${timestamp(last.at)}`;
  const summary =
    `${gpu} price per GPU-hour: last trade ${perHour(last.price_usd_per_gpu_hour, { book: true })}; ` +
    `over the ${count(sorted.length)} trade${sorted.length === 1 ? '' : 's'} from ${range}, low ${perHour(fromMilli(lowTrade), { book: true })}, high ${perHour(fromMilli(highTrade), { book: true })}` +
    (bestAsk ? `; best offer now ${perHour(bestAsk, { book: true })}.` : '; no offer now.');

  const svg = h(SVG + 'svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': summary });
  svg.appendChild(h(SVG + 'title', null, summary));

  const axis = h(SVG + 'g', { class: 'axis' });
  for (const v of ticks(lo, hi)) {
    const y = yOf(v).toFixed(1);
    axis.appendChild(h(SVG + 'line', { x1: left, x2: left + plotW, y1: y, y2: y, class: 'gridline' }));
    axis.appendChild(h(SVG + 'text', { x: left - 6, y: Number(y) + 4, 'text-anchor': 'end' }, perHour(fromMilli(v), { book: true })));
  }
  axis.appendChild(h(SVG + 'line', { x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH, class: 'axis-line' }));
  const xl = top + plotH + 16;
  axis.appendChild(h(SVG + 'text', { x: left, y: xl, 'text-anchor': 'start', 'data-testid': 'chart-x-first' }, timestamp(sorted[0].at)));
  if (sorted.length > 1 && t1 > t0) axis.appendChild(h(SVG + 'text', { x: left + plotW, y: xl + 14, 'text-anchor': 'end', 'data-testid': 'chart-x-last' }, timestamp(last.at)));
  svg.appendChild(axis);

  if (ask != null) {
    const y = yOf(ask).toFixed(1);
    svg.appendChild(h(SVG + 'line', { x1: left, x2: left + plotW, y1: y, y2: y, class: 'ask-line', 'data-testid': 'chart-ask' }));
    svg.appendChild(h(SVG + 'text', { x: left + plotW - 2, y: Number(y) - 5, 'text-anchor': 'end', class: 'ask-label' }, 'best offer ' + perHour(bestAsk, { book: true })));
  }
  const pts = sorted.map((t, i) => [xOf(t, i), yOf(prices[i])]);
  svg.appendChild(h(SVG + 'polyline', { points: pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' '), class: 'trade-line' }));
  const dots = h(SVG + 'g', { class: 'trade-points' });
  sorted.forEach((t, i) => {
    const c = h(SVG + 'circle', { cx: pts[i][0].toFixed(1), cy: pts[i][1].toFixed(1), r: 3.5, class: 'trade-point' });
    c.appendChild(h(SVG + 'title', null, `${timestamp(t.at)}: ${count(t.gpus)} GPU${t.gpus === 1 ? '' : 's'} at ${perHour(t.price_usd_per_gpu_hour, { book: true })}`));
    dots.appendChild(c);
  });
  svg.appendChild(dots);

  fig.appendChild(svg);
  fig.appendChild(
    h(
      'figcaption',
      { class: 'table-note' },
      h('span', { class: 'legend-trade' }, '● trades'),
      '  ',
      h('span', { class: 'legend-ask' }, '– – best offer now'),
      h('span', { class: 'chart-summary', 'data-testid': 'chart-summary' }, ' — ' + summary)
    )
  );
  // In a hidden box rather than a hidden table: a table's rows overflow its own 1 px box (on a
  // phone that widened the page to 519 px).
  fig.appendChild(
    h(
      'div',
      { class: 'visually-hidden' },
      h(
        'table',
        null,
        h('caption', null, `${gpu} price history summary`),
        h(
          'tbody',
          null,
          [
            ['Last trade', perHour(last.price_usd_per_gpu_hour, { book: true })],
            ['Lowest', perHour(fromMilli(lowTrade), { book: true })],
            ['Highest', perHour(fromMilli(highTrade), { book: true })],
            ['Best offer now', bestAsk ? perHour(bestAsk, { book: true }) : '—'],
            ['Trades', count(sorted.length)],
            ['Window', range],
          ].map(([k, v]) => h('tr', null, h('th', { scope: 'row' }, k), h('td', null, v)))
        )
      )
    )
  );
  return fig;
}

// A horizontal bar chart (the guide's cost per GB): one bar per row, longest = largest value, in
// the rows' order; each bar is labelled on its left with `label` and on its right with `text` (the
// figure as the page formats it). `value` (a number) only sizes the bar. -> a <figure> with the
// SVG (role img, a name saying the order and the extremes) and a caption with the same words;
// the figures themselves are in the page's table beside it.
export function barChart({ rows, summary, testid, width = 640 }) {
  const fig = h('figure', { class: 'bar-chart', 'data-testid': testid || 'bar-chart' });
  if (!rows.length) return fig;
  const rowH = 22;
  const labelW = Math.min(150, Math.round(width * 0.34));
  const textW = 96;
  const top = 4;
  const height = top + rows.length * rowH + 4;
  const barMax = Math.max(20, width - labelW - textW - 12);
  const max = Math.max(...rows.map((r) => r.value), 1e-9);
  const svg = h(SVG + 'svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': summary });
  svg.appendChild(h(SVG + 'title', null, summary));
  rows.forEach((r, i) => {
    const y = top + i * rowH;
    const w = Math.max(2, (r.value / max) * barMax);
    const g = h(SVG + 'g', { class: 'bar-row' + (r.highlight ? ' bar-highlight' : '') });
    g.appendChild(h(SVG + 'text', { x: labelW - 8, y: y + rowH / 2 + 4, 'text-anchor': 'end', class: 'bar-label' }, r.label));
    g.appendChild(h(SVG + 'rect', { x: labelW, y: y + 4, width: w.toFixed(1), height: rowH - 8, rx: 3, class: 'bar' }));
    g.appendChild(h(SVG + 'text', { x: labelW + w + 6, y: y + rowH / 2 + 4, 'text-anchor': 'start', class: 'bar-value' }, r.text));
    svg.appendChild(g);
  });
  fig.appendChild(svg);
  fig.appendChild(h('figcaption', { class: 'table-note', 'data-testid': (testid || 'bar-chart') + '-summary' }, summary));
  return fig;
}
