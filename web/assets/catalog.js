// Home: the term fleet as cards (specs, monthly/weekly/hourly, live stock per region, live spot
// offer, a Rent action) with filters and sorting kept in the URL, and the spot-exchange cards with
// their live best offers.
import { api } from './api.js';
import { h, replace, $, errorBox, table } from './dom.js';
import { usd, decimal, integer } from './format.js';
import { loadMarkets, bestAsk, gpusOnOffer } from './markets.js';
import { notifyMe } from './alerts.js';

const form = $('#filters');
const list = $('#term-list');
let catalog = null;
let markets = new Map();
let stock = null;  // GET /v1/stock by card name: live free cards per region; null when it failed

// Free cards now: live from the fleet's nodes, else the catalog's published figure.
function freeNow(card) {
  const live = stock && stock.get(card.name);
  return live ? live.regions.reduce((a, r) => a + r.cards_free, 0) : card.free_now;
}

function stockLine(card) {
  const live = stock && stock.get(card.name);
  if (!live) return null;
  const parts = live.regions.filter((r) => r.nodes > 0).map((r) => `${r.region} ${integer(r.cards_free)}`);
  return [h('dt', null, 'Free now'), h('dd', { class: 'stock', 'data-testid': 'stock-' + slug(card.name) }, parts.length ? parts.join(' · ') : 'none')];
}

function words(s) {
  return String(s || '').replace(/-/g, ' ');
}

function readFilters() {
  const q = new URLSearchParams(location.search);
  for (const el of form.elements) {
    if (!el.name) continue;
    if (el.type === 'checkbox') el.checked = q.get(el.name) === '1';
    else if (q.has(el.name)) el.value = q.get(el.name);
  }
}

function writeFilters() {
  const q = new URLSearchParams();
  for (const el of form.elements) {
    if (!el.name) continue;
    if (el.type === 'checkbox') {
      if (el.checked) q.set(el.name, '1');
    } else if (el.value && !(el.name === 'sort' && el.value === 'price')) {
      q.set(el.name, el.value);
    }
  }
  const s = q.toString();
  history.replaceState(null, '', s ? '?' + s : location.pathname);
}

const SORTS = {
  price: (a, b) => a.monthly_usd - b.monthly_usd,
  'price-desc': (a, b) => b.monthly_usd - a.monthly_usd,
  vram: (a, b) => b.vram_gb - a.vram_gb || a.monthly_usd - b.monthly_usd,
  'per-gb': (a, b) => a.usd_per_gb_month - b.usd_per_gb_month,
  bandwidth: (a, b) => b.gb_s_per_usd_month - a.gb_s_per_usd_month,
};

function spotNameFor(card) {
  const spot = (catalog.spot || []).find((s) => s.term === card.name);
  return spot ? spot.name : null;
}

function gpuCard(card) {
  const spotName = spotNameFor(card);
  const market = spotName ? markets.get(spotName) : null;
  const ask = bestAsk(market);
  const spotLine = spotName
    ? h(
        'div',
        { class: 'live-offer' },
        ask
          ? h('span', null, 'Spot: from ', h('strong', null, usd(ask, 3) + '/h'), ' per GPU')
          : h('span', { class: 'muted' }, 'Spot: no offers right now'),
        h('a', { href: '/market/?gpu=' + encodeURIComponent(spotName) }, 'Market →')
      )
    : h('div', { class: 'live-offer' }, h('span', { class: 'muted' }, 'Term rental only'));
  const free = freeNow(card);
  const stockBadge = free > 0
    ? h('span', { class: 'badge badge-good' }, `${integer(free)} free now`)
    : h('span', { class: 'badge' }, 'On request');
  return h(
    'article',
    { class: 'gpu-card', 'aria-labelledby': 'gpu-' + slug(card.name), dataset: { gpu: card.name } },
    h(
      'header',
      null,
      h(
        'div',
        null,
        h('h3', { id: 'gpu-' + slug(card.name) }, card.name),
        h(
          'div',
          { class: 'badges' },
          h('span', { class: 'badge' }, card.stack),
          card.fp8 ? h('span', { class: 'badge badge-accent' }, 'FP8') : null,
          stockBadge
        )
      ),
      h('div', { class: 'vram', 'aria-label': `${decimal(card.vram_gb, 0)} GB of memory` }, decimal(card.vram_gb, 0), h('small', null, ' GB'))
    ),
    h(
      'dl',
      { class: 'specs' },
      h('dt', null, 'Memory'),
      h('dd', null, card.memory),
      h('dt', null, 'Bandwidth'),
      h('dd', null, card.bandwidth_gb_per_s == null ? 'not published' : integer(card.bandwidth_gb_per_s) + ' GB/s'),
      h('dt', null, 'Link'),
      h('dd', null, card.link),
      h('dt', null, 'Sharded training'),
      h('dd', null, words(card.sharded_training)),
      h('dt', null, 'Rented as'),
      h('dd', null, countsText(card.counts)),
      h('dt', null, 'Regions'),
      h('dd', null, card.regions.join(', ')),
      card.local_nvme_tb ? [h('dt', null, 'Local NVMe'), h('dd', null, card.local_nvme_tb + ' TB per card')] : null,
      stockLine(card)
    ),
    h(
      'div',
      { class: 'prices' },
      h('div', null, h('span', { class: 'label' }, 'Monthly'), h('span', { class: 'value' }, usd(card.exact.monthly_usd))),
      h(
        'div',
        null,
        h('span', { class: 'label' }, 'Weekly'),
        h('span', { class: 'value' }, usd(card.exact.weekly_usd), card.weekly_derived ? h('span', { title: 'Derived from the fleet\'s weekly/monthly ratio', 'aria-label': ' (derived)' }, '*') : null)
      ),
      h('div', null, h('span', { class: 'label' }, 'Hourly'), h('span', { class: 'value' }, usd(card.exact.hourly_usd)))
    ),
    spotLine,
    free > 0
      ? h(
          'div',
          { class: 'rent-action' },
          h('a', { class: 'btn btn-small rent', href: '/rent/?gpu=' + encodeURIComponent(card.name), 'aria-label': `Rent ${card.name} by the week or the month` }, 'Rent'),
          h('span', { class: 'muted small' }, 'by the week or the month')
        )
      : onRequestAction(card, spotName, ask)
  );
}

// None free in the fleet now: renting would answer "not available", so the card leads to what
// can be had: its spot hours when the exchange has an offer, else the cards with as much memory
// that are free now; Rent stays, second, for the quote and its reason; "Notify me when free" makes
// a stock alert (alerts.js).
function onRequestAction(card, spotName, ask) {
  const vram = [141, 80, 48, 24].find((v) => Number(card.vram_gb) >= v);
  const similar = '/?' + new URLSearchParams({ stock: '1', ...(vram ? { vram: String(vram) } : {}) });
  return h(
    'div',
    { class: 'rent-action on-request', 'data-testid': 'on-request' },
    ask && spotName
      ? h('a', { class: 'btn btn-small buy-spot', href: '/market/?' + new URLSearchParams({ gpu: spotName, count: '1' }), 'aria-label': `Buy spot from ${usd(ask, 3)}/h: ${card.name} per GPU-hour on the market` }, `Buy spot from ${usd(ask, 3)}/h`)
      : h('a', { class: 'btn btn-small similar', href: similar, 'aria-label': `Free cards like it: ${vram || card.vram_gb} GB or more, free now` }, 'Free cards like it'),
    h('a', { class: 'btn btn-small btn-secondary rent', href: '/rent/?gpu=' + encodeURIComponent(card.name), 'aria-label': `Rent ${card.name}: none free now` }, 'Rent'),
    h('span', { class: 'muted small' }, 'none free in the fleet now'),
    notifyMe({ kind: 'stock', gpu: card.name, count: card.counts[0], counts: card.counts, regions: card.regions })
  );
}

// [1, 2, 4, 8] -> "1, 2, 4 or 8 cards"
function countsText(counts) {
  if (counts.length === 1) return counts[0] === 1 ? 'single card' : `${counts[0]} cards`;
  return counts.slice(0, -1).join(', ') + ' or ' + counts[counts.length - 1] + ' cards';
}

function slug(s) {
  return String(s).toLowerCase().replace(/[^a-z0-9]+/g, '-');
}

function renderTerm() {
  const f = Object.fromEntries(new FormData(form).entries());
  let cards = catalog.term.slice();
  if (f.vram) cards = cards.filter((c) => c.vram_gb >= Number(f.vram));
  if (f.price) cards = cards.filter((c) => c.monthly_usd <= Number(f.price));
  if (f.region) cards = cards.filter((c) => c.regions.includes(f.region));
  if (f.fp8) cards = cards.filter((c) => c.fp8);
  if (f.stock) cards = cards.filter((c) => freeNow(c) > 0);
  cards.sort(SORTS[f.sort] || SORTS.price);
  $('#count').textContent = `${cards.length} of ${catalog.term.length} cards`;
  list.removeAttribute('aria-busy');
  if (!cards.length) {
    replace(list, h('div', { class: 'empty card' }, 'No card matches these filters. ', h('button', { type: 'button', class: 'btn-link', onclick: resetFilters }, 'Clear the filters')));
    return;
  }
  replace(list, cards.map(gpuCard));
}

function resetFilters() {
  form.reset();
  writeFilters();
  renderTerm();
}

function renderSpot() {
  const rows = catalog.spot || [];
  const columns = [
    { label: 'Card', th: true, cell: (s) => h('a', { href: '/market/?gpu=' + encodeURIComponent(s.name) }, s.name) },
    { label: 'VRAM', num: true, cell: (s) => decimal(s.vram_gb, 0) + ' GB' },
    { label: 'Memory', cell: (s) => s.memory },
    { label: 'Bandwidth', num: true, cell: (s) => (s.bandwidth_gb_per_s == null ? h('span', { class: 'muted' }, 'not published') : integer(s.bandwidth_gb_per_s) + ' GB/s') },
    { label: 'BF16 TFLOPS', num: true, cell: (s) => (s.bf16_dense_tflops == null ? h('span', { class: 'muted' }, 'not published') : integer(s.bf16_dense_tflops)) },
    {
      label: 'Best offer /h',
      num: true,
      cell: (s) => {
        const ask = bestAsk(markets.get(s.name));
        return ask ? h('strong', null, usd(ask, 3)) : h('span', { class: 'muted' }, 'none');
      },
    },
    {
      label: 'GPUs on offer',
      num: true,
      cell: (s) => {
        const n = gpusOnOffer(markets.get(s.name));
        return n == null ? h('span', { class: 'muted' }, '—') : integer(n);
      },
    },
    { label: 'Opening ask /h', num: true, cell: (s) => usd(s.opening_ask_usd_per_hour, 2) },
    { label: 'Trains (1 / 8 GPUs)', num: true, cell: (s) => `${s.largest_full_train_b_1gpu}B / ${s.largest_full_train_b_8gpu}B` },
  ];
  replace($('#spot-list'), table(columns, rows), h('p', { class: 'table-note' }, 'Full training: the largest model one or eight GPUs can fully fine-tune (80% of memory / 16 B per parameter).'));
}

function fillRegions() {
  const select = $('#f-region');
  for (const r of catalog.regions) select.appendChild(h('option', { value: r.code }, `${r.code} ${r.city}`));
}

async function main() {
  readFilters();
  form.addEventListener('change', () => {
    writeFilters();
    renderTerm();
  });
  form.addEventListener('submit', (e) => e.preventDefault());
  try {
    let live;
    [catalog, markets, live] = await Promise.all([
      api('GET', '/v1/catalog'),
      loadMarkets(),
      api('GET', '/v1/stock').catch(() => null),  // the catalog still shows without it
    ]);
    stock = live ? new Map(live.stock.map((c) => [c.gpu, c])) : null;
  } catch (e) {
    list.removeAttribute('aria-busy');
    replace(list, errorBox('The catalog could not be loaded: ' + e.message));
    replace($('#spot-list'), '');
    return;
  }
  fillRegions();
  readFilters();
  const d = catalog.multi_card_discounts.map((x) => `${decimal(x.percent, 0)}% at ${x.count}`).join(', ');
  $('#discounts').textContent = `a discount (${d})`;
  $('#term-notes').textContent =
    '* Weekly price derived from the fleet\'s published weekly/monthly ratio. ' +
    (stock ? 'Free now: live from the fleet\'s nodes, per region.' : 'Free-now counts are the published figures, fleet-wide across the listed regions.');
  renderTerm();
  renderSpot();
}

main();
