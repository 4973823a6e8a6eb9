// Spot market: per GPU model the order book (a hand-drawn SVG depth ladder), its price history
// (chart.js), recent trades, and for a signed-in customer the bid form with the cost of an hour and
// the wallet that pays it, their open bids and their leases with a stop button. The figures are the
// API's; the page scales bars and points to draw them and multiplies a price by a GPU count.
import { api, currentSession, newIdempotencyKey, RequestKey } from './api.js';
import { h, $, replace, table, showFormError, clearFormErrors, setBusy, errorBox, empty, stat } from './dom.js';
import { usd, money, amount, integer, timestamp } from './format.js';
import { priceHistoryChart } from './chart.js';
import { leaseConnection, provisioning } from './provisioning.js';
import { loadMarkets, bestAsk, bestBid } from './markets.js';
import { notifyMe } from './alerts.js';
import { loadImages, setUpImagePicker, launchBody, forgetCredential, launchCell } from './images.js';
import { sshKeyWarning } from './ssh_warning.js';

const REFRESH_MS = 10000;
const BOOK_LEVELS = 12;
const TRADES = 20;
// The chart reads up to this many of the newest trades, a page of 100 at a time (the API's cursor).
const HISTORY_PAGE = 100;
const HISTORY_MAX = 300;

const tabs = $('#market-tabs');
const form = $('#bid-form');
let markets = new Map();
let selected = null;
let session = null;
let refreshTimer = 0;
const bidKey = new RequestKey();

function priceText(p) {
  return p == null ? '—' : usd(p, 3);
}

// ---------- market selection ----------

// Scrolls the tab strip (not the page) so that the selected market is in view.
function revealSelectedTab() {
  const b = tabs.querySelector('[role="tab"][aria-selected="true"]');
  if (!b) return;
  const left = b.offsetLeft - tabs.offsetLeft;
  if (left < tabs.scrollLeft || left + b.offsetWidth > tabs.scrollLeft + tabs.clientWidth) {
    tabs.scrollLeft = Math.max(0, left - 12);
  }
}

function renderTabs() {
  const names = [...markets.keys()];
  if (!names.length) {
    replace(tabs, h('div', { class: 'empty' }, 'No GPU model trades on the exchange yet.'));
    return;
  }
  replace(
    tabs,
    names.map((name) => {
      const m = markets.get(name);
      const ask = bestAsk(m);
      const on = name === selected;
      return h(
        'button',
        {
          type: 'button',
          role: 'tab',
          id: 'tab-' + slug(name),
          'aria-selected': on ? 'true' : 'false',
          'aria-controls': 'market-panel',
          tabindex: on ? '0' : '-1',
          dataset: { gpu: name },
          onclick: () => select(name, true),
          onkeydown: onTabKey,
        },
        name,
        h('span', { class: 'ask' }, ask ? 'from ' + priceText(ask) + '/h' : 'no offers')
      );
    })
  );
}

function onTabKey(e) {
  const buttons = Array.from(tabs.querySelectorAll('[role="tab"]'));
  const i = buttons.indexOf(e.currentTarget);
  let j = null;
  if (e.key === 'ArrowRight') j = (i + 1) % buttons.length;
  else if (e.key === 'ArrowLeft') j = (i - 1 + buttons.length) % buttons.length;
  else if (e.key === 'Home') j = 0;
  else if (e.key === 'End') j = buttons.length - 1;
  if (j === null) return;
  e.preventDefault();
  buttons[j].focus();
  select(buttons[j].dataset.gpu, true);
}

function slug(s) {
  return String(s).toLowerCase().replace(/[^a-z0-9]+/g, '-');
}

function select(name, userAction) {
  if (!markets.has(name)) return;
  const changed = selected !== name;
  selected = name;
  const q = new URLSearchParams(location.search);
  q.set('gpu', name);
  history.replaceState(null, '', '?' + q);
  for (const b of tabs.querySelectorAll('[role="tab"]')) {
    const on = b.dataset.gpu === name;
    b.setAttribute('aria-selected', on ? 'true' : 'false');
    b.tabIndex = on ? 0 : -1;
  }
  $('#market-panel').setAttribute('aria-labelledby', 'tab-' + slug(name));
  revealSelectedTab();
  $('#market-title').textContent = `${name} order book`;
  form.elements.gpu.value = name;
  $('#bid-submit').textContent = `Place bid for ${name}`;
  if (changed) {
    replace($('#depth'), h('div', { class: 'loading', role: 'status' }, 'Loading the book…'));
    replace($('#trades'), h('div', { class: 'loading', role: 'status' }, 'Loading trades…'));
    replace($('#history'), h('div', { class: 'loading', role: 'status' }, 'Loading the price history…'));
    replace($('#bid-result'));
  }
  renderStats();
  if (changed || !$('#market-alert').hasChildNodes()) renderAlertControl();
  renderCost();
  loadBook();
  loadTrades();
}

// A price alert on the selected market (alerts.js): the way on when nobody offers, and a way to
// wait for a lower price. Drawn when the market is chosen, not on each refresh (an open form keeps
// what is typed).
function renderAlertControl() {
  const ask = bestAsk(markets.get(selected));
  replace($('#market-alert'),
    ask ? null : h('p', { class: 'muted small', 'data-testid': 'no-offers' }, `Nobody offers ${selected} GPU-hours right now.`),
    notifyMe({ kind: 'price', gpu: selected }, { label: ask ? 'Notify me of a lower price' : 'Notify me when offered' }));
}

// The market with the lowest best offer (ties: the API's order), else the first with any offer.
function cheapestMarket(names) {
  let best = null;
  for (const n of names) {
    const p = tickOf(bestAsk(markets.get(n)));
    if (p == null) continue;
    if (best === null || p < best.p) best = { n, p };
  }
  return best ? best.n : names[0];
}

// A decimal string with at most `places` decimals -> an integer count of 10^-places, exactly
// ("2.880" -> 2880 thousandths); null when it is not such a number.
function unitsOf(value, places) {
  const m = new RegExp(`^(\\d{1,9})(?:\\.(\\d{0,${places}}))?$`).exec(String(value ?? '').trim());
  return m ? Number(m[1]) * 10 ** places + Number((m[2] || '').padEnd(places, '0')) : null;
}

// A price as the book quotes it (tick 0.001) -> its thousandths.
function tickOf(price) {
  return unitsOf(price, 3);
}

// ---------- market data ----------

function renderStats() {
  const m = markets.get(selected);
  if (!m) return;
  const last = m.last_trade;
  replace(
    $('#stats'),
    stat('Best offer', priceText(bestAsk(m)), 'ask'),
    stat('Best bid', priceText(bestBid(m)), 'bid'),
    stat('GPUs on offer', integer(m.gpus_on_offer)),
    stat('Last trade', last ? priceText(last.price_usd_per_gpu_hour) : '—')
  );
}

const SVG = 'svg:';

// A depth ladder: asks above (highest price on top, best offer nearest the middle), bids below
// (best bid nearest the middle); each bar's length is that level's GPUs, scaled to the widest.
function depthChart(book) {
  const asks = book.asks.slice().reverse();
  const bids = book.bids;
  if (!asks.length && !bids.length) return empty('Nobody is offering or bidding right now.');
  const rowH = 24;
  const gap = 14;
  const labelW = 84;
  const countW = 84;
  // Drawn at the container's own width, so that text keeps its size on any screen.
  const width = Math.max(280, Math.round($('#depth').clientWidth || 640));
  const barMax = width - labelW - countW - 12;
  const rows = asks.length + bids.length;
  const height = rows * rowH + gap + 22;
  const maxGpus = Math.max(1, ...book.asks.map((l) => l.gpus), ...book.bids.map((l) => l.gpus));
  const desc = `${book.asks.length} ask levels${book.asks.length ? ' from ' + priceText(book.asks[0].price_usd_per_gpu_hour) : ''}, ${book.bids.length} bid levels${book.bids.length ? ' from ' + priceText(book.bids[0].price_usd_per_gpu_hour) : ''}`;
  const svg = h(SVG + 'svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': `Order book depth for ${book.gpu}: ${desc}` });
  svg.appendChild(h(SVG + 'title', null, `Order book depth for ${book.gpu}: ${desc}`));
  const header = h(SVG + 'g', { class: 'axis' });
  header.appendChild(h(SVG + 'text', { x: labelW - 8, y: 14, 'text-anchor': 'end' }, 'USD / GPU-h'));
  header.appendChild(h(SVG + 'text', { x: width - 4, y: 14, 'text-anchor': 'end' }, 'GPUs (orders)'));
  svg.appendChild(header);
  let y = 22;
  const drawRow = (level, side) => {
    const w = Math.max(2, (level.gpus / maxGpus) * barMax);
    const g = h(SVG + 'g', { class: 'level level-' + side });
    g.appendChild(h(SVG + 'rect', { x: labelW, y: y + 3, width: w.toFixed(1), height: rowH - 6, rx: 3, class: 'bar-' + side }));
    g.appendChild(h(SVG + 'text', { x: labelW - 8, y: y + rowH / 2 + 4, 'text-anchor': 'end', class: 'price-' + side }, priceText(level.price_usd_per_gpu_hour)));
    g.appendChild(h(SVG + 'text', { x: width - 4, y: y + rowH / 2 + 4, 'text-anchor': 'end' }, `${integer(level.gpus)} (${integer(level.orders)})`));
    svg.appendChild(g);
    y += rowH;
  };
  asks.forEach((l) => drawRow(l, 'ask'));
  svg.appendChild(h(SVG + 'line', { x1: 0, x2: width, y1: y + gap / 2, y2: y + gap / 2, class: 'spread-line' }));
  y += gap;
  bids.forEach((l) => drawRow(l, 'bid'));
  const legend = h(
    'p',
    { class: 'table-note' },
    h('span', { class: 'side-sell' }, '■ offers (asks)'),
    '  ',
    h('span', { class: 'side-buy' }, '■ bids'),
    ' — each bar is the GPUs available at that price; the dashed line is the spread.'
  );
  return [svg, legend];
}

let lastBook = null;

async function loadBook() {
  const gpu = selected;
  try {
    const book = await api('GET', `/v1/markets/${encodeURIComponent(gpu)}/book?levels=${BOOK_LEVELS}`);
    if (gpu !== selected) return;
    lastBook = book;
    replace($('#depth'), depthChart(book));
    $('#as-of').textContent = 'As of ' + timestamp(book.as_of);
  } catch (e) {
    if (gpu === selected) replace($('#depth'), errorBox('The order book could not be loaded: ' + e.message));
  }
}

let lastHistory = null;

// The newest trades, up to HISTORY_MAX, following the API's cursor.
async function fetchTrades(gpu) {
  const trades = [];
  let cursor = null;
  do {
    const q = `limit=${HISTORY_PAGE}` + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
    const data = await api('GET', `/v1/markets/${encodeURIComponent(gpu)}/trades?${q}`);
    trades.push(...data.trades);
    cursor = data.next_cursor;
  } while (cursor && trades.length < HISTORY_MAX);
  return trades;
}

function renderHistory() {
  if (!lastHistory || lastHistory.gpu !== selected) return;
  const width = Math.max(280, Math.round($('#history').clientWidth || 640));
  replace($('#history'), priceHistoryChart({ gpu: selected, trades: lastHistory.trades, bestAsk: bestAsk(markets.get(selected)), width }));
}

async function loadTrades() {
  const gpu = selected;
  try {
    const trades = await fetchTrades(gpu);
    if (gpu !== selected) return;
    lastHistory = { gpu, trades };
    renderHistory();
    if (!trades.length) return replace($('#trades'), empty('No trades yet in this market.'));
    replace(
      $('#trades'),
      table(
        [
          { label: 'Time', cls: 'nowrap', cell: (t) => timestamp(t.at) },
          { label: 'Price / GPU-h', num: true, cell: (t) => priceText(t.price_usd_per_gpu_hour) },
          { label: 'GPUs', num: true, cell: (t) => integer(t.gpus) },
          { label: 'Taker', cell: (t) => (t.maker === 'ask' ? h('span', { class: 'side-buy' }, 'buyer') : h('span', { class: 'side-sell' }, 'seller')) },
        ],
        trades.slice(0, TRADES),
        { stack: true }
      )
    );
  } catch (e) {
    if (gpu !== selected) return;
    replace($('#trades'), errorBox('Trades could not be loaded: ' + e.message));
    replace($('#history'), errorBox('The price history could not be loaded: ' + e.message));
  }
}

async function refreshMarkets() {
  markets = await loadMarkets({ refresh: true });
  if (!markets.has(selected)) return;
  renderTabs();
  renderStats();
  renderCost();
  loadBook();
  loadTrades();
}

function scheduleRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    if (!document.hidden) {
      await refreshMarkets();
      if (session) await Promise.all([loadLeases(), loadBids(), loadWallets()]);
    }
    scheduleRefresh();
  }, REFRESH_MS);
}

// ---------- bids ----------

function syncOrderType() {
  const limit = form.elements.order.value === 'limit';
  for (const el of form.querySelectorAll('[data-limit]')) el.hidden = !limit;
  form.elements.limit_usd_per_gpu_hour.disabled = !limit;
  form.elements.time_in_force.disabled = !limit;
  form.elements.expires_at.disabled = !limit || form.elements.time_in_force.value !== 'gtc';
}

// ---------- what an hour costs, before committing ----------

let wallets = null; // [{currency, available, held}] of the signed-in account

async function loadWallets() {
  try {
    wallets = (await api('GET', '/v1/wallets')).wallets;
  } catch (e) {
    wallets = null;
  }
  renderCost();
}

// The price an hour is bought at: the best offer for a market order (the fill may take a dearer
// offer when the best one has fewer GPUs), the limit for a limit order (the most it pays).
function costPrice() {
  const f = form.elements;
  if (f.order.value === 'limit') return { price: f.limit_usd_per_gpu_hour.value.trim(), how: 'at your limit, the most it pays' };
  return { price: bestAsk(markets.get(selected)), how: 'at the best offer' };
}

function renderCost() {
  if (form.hidden) return;
  const f = form.elements;
  const gpus = /^\d{1,3}$/.test(f.gpus.value.trim()) ? Number(f.gpus.value.trim()) : null;
  const { price, how } = costPrice();
  const tick = tickOf(price);
  const total = gpus && tick != null ? (tick * gpus) / 1000 : null;
  const totalText = total == null ? null : total.toFixed(3);
  $('#bid-total').textContent = totalText == null ? '—' : amount(totalText, 'USD') + '/h';
  $('#bid-total-how').textContent =
    totalText == null
      ? gpus
        ? f.order.value === 'limit' ? 'Enter your limit price to see the cost.' : 'No offer in this market now.'
        : 'Enter a whole number of GPUs.'
      : `${integer(gpus)} GPU${gpus === 1 ? '' : 's'} × ${priceText(price)}/GPU-h ${how}; billed hourly in advance, tax excluded.`;
  const currency = f.currency.value;
  const w = wallets && wallets.find((x) => x.currency === currency);
  $('#bid-balance').textContent = w ? `${amount(w.available, currency)} available in ${currency}` : wallets ? `no ${currency} wallet` : '—';
  const short = $('#bid-short');
  // Only a USD wallet compares directly; EUR and GBP convert at the rate of the fill.
  const lacks = w && currency === 'USD' && totalText != null && unitsOf(w.available, 6) < unitsOf(totalText, 3) * 1000;
  short.hidden = !lacks;
  if (lacks) {
    replace(short, `Your USD wallet (${amount(w.available, 'USD')}) does not cover one hour (${amount(totalText, 'USD')}): the bid would be refused. `, h('a', { href: '/account/#overview' }, 'Top up'));
  }
}

function bidBody() {
  const f = form.elements;
  const body = { gpu: f.gpu.value };
  const gpus = f.gpus.value.trim();
  body.gpus = /^\d{1,3}$/.test(gpus) ? Number(gpus) : gpus;
  if (f.region.value) body.region = f.region.value;
  if (f.order.value === 'market') {
    body.market = true;
    body.time_in_force = 'ioc';
  } else {
    body.limit_usd_per_gpu_hour = f.limit_usd_per_gpu_hour.value.trim();
    body.time_in_force = f.time_in_force.value;
    if (!f.expires_at.disabled && f.expires_at.value) {
      const t = new Date(f.expires_at.value);
      body.expires_at = Number.isNaN(t.getTime()) ? f.expires_at.value : t.toISOString();
    }
  }
  if (f.currency.value !== 'USD') body.currency = f.currency.value;
  return Object.assign(body, launchBody(f));
}

function bidOutcome(bid) {
  if (bid.status === 'filled' && bid.lease) {
    const l = bid.lease;
    return h(
      'div',
      { class: 'alert alert-ok', role: 'status' },
      h('strong', null, `Filled: lease #${l.id}. `),
      `${integer(l.gpus)} × ${l.gpu} at ${priceText(l.price_usd_per_gpu_hour)}/GPU-h — ${money(l.hourly_usd, 'USD')} per hour` +
        (bid.tax && bid.tax.hourly_tax_usd !== '0.000000'
          ? ` + ${money(bid.tax.hourly_tax_usd, 'USD')} tax (${bid.tax.note}) = ${money(bid.tax.hourly_gross_usd, 'USD')}`
          : '') +
        ', first hour paid. ',
      h('a', { class: 'btn btn-small', href: `/instances/?lease=${l.id}`, 'data-testid': 'bid-console' }, 'Open its console'), ' ',
      h('a', { href: '#leases-card' }, 'See your leases')
    );
  }
  if (bid.status === 'resting') {
    return h(
      'div',
      { class: 'alert alert-info', role: 'status' },
      h('strong', null, `Bid #${bid.id} is in the book `),
      `at up to ${priceText(bid.limit_usd_per_gpu_hour)}/GPU-h; ${money(bid.hold, bid.currency)} is held so that a fill can pay its first hour.`
    );
  }
  const why = {
    no_match: 'no offer matched it',
    insufficient_funds: 'your wallet cannot pay the first hour',
    no_fx_rate: 'no exchange rate converts your wallet to USD',
    expired: 'it expired',
  }[bid.close_reason] || (bid.close_reason || bid.status).replace(/_/g, ' ');
  return h('div', { class: 'alert alert-warn', role: 'status' }, h('strong', null, `Bid #${bid.id} ${bid.status}: `), why + '.');
}

async function onBid(e) {
  e.preventDefault();
  clearFormErrors(form);
  replace($('#bid-result'));
  const f = form.elements;
  if (f.order.value === 'limit' && !f.limit_usd_per_gpu_hour.value.trim()) {
    return showFormError(form, { field: 'limit_usd_per_gpu_hour', message: 'Enter the most you will pay per GPU-hour, such as 3.000.' });
  }
  const body = bidBody();
  const button = $('#bid-submit');
  setBusy(button, true);
  try {
    const bid = await api('POST', '/v1/bids', body, { idempotencyKey: bidKey.for(body) });
    bidKey.done();
    forgetCredential(f);
    replace($('#bid-result'), bidOutcome(bid));
    await Promise.all([refreshMarkets(), loadLeases(), loadBids(), loadWallets()]);
  } catch (err) {
    if (err.status === 401) {
      session = null;
      showSignedIn(false);
      return;
    }
    if (err.field === 'billing_country') {
      // Not a field of this form: say where it is set.
      return replace($('#bid-result'), h('div', { class: 'alert alert-warn', role: 'alert' },
        'Set your billing country first: prices exclude tax, and the tax of your country is added to each hour. ',
        h('a', { href: '/account/#billing' }, 'Billing details')));
    }
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

async function loadBids() {
  try {
    const data = await api('GET', '/v1/bids');
    const open = data.bids.filter((b) => b.status === 'resting');
    $('#my-bids-card').hidden = !open.length;
    if (!open.length) return replace($('#my-bids'));
    replace(
      $('#my-bids'),
      table(
        [
          { label: 'Bid', cell: (b) => `#${b.id} ${b.gpu}` },
          { label: 'GPUs', num: true, cell: (b) => integer(b.gpus) },
          { label: 'Limit', num: true, cell: (b) => priceText(b.limit_usd_per_gpu_hour) },
          { label: 'Held', num: true, cell: (b) => money(b.hold, b.currency) },
          { label: '', cell: (b) => h('button', { type: 'button', class: 'btn btn-small btn-danger', onclick: (e) => cancelBid(b, e.currentTarget) }, 'Cancel') },
        ],
        open,
        { stack: true }
      )
    );
  } catch (e) {
    /* customers only; a provider-only account has no bids */
    $('#my-bids-card').hidden = true;
  }
}

async function cancelBid(bid, button) {
  setBusy(button, true);
  try {
    await api('DELETE', '/v1/bids/' + bid.id);
    await Promise.all([loadBids(), refreshMarkets()]);
  } catch (e) {
    setBusy(button, false);
    button.replaceWith(h('span', { class: 'field-error', role: 'alert' }, e.message));
  }
}

// ---------- leases ----------

function leaseStatus(l) {
  if (l.status === 'active' && l.billing === 'provisioning') {
    // Nothing is billed until the host runs it: its first hour is only held.
    const until = l.start_deadline ? ` (until ${timestamp(l.start_deadline)}, then it ends and the hold is released)` : '';
    return h('span', { class: 'badge badge-warn', title: `Not billed yet: the first hour is held until the host runs it${until}` }, 'waiting for the host');
  }
  if (l.status === 'active' && l.billing === 'paused') {
    return l.workload_down
      ? h('span', { class: 'badge badge-warn', title: 'Its container stopped: nothing is billed until it runs again' }, 'paused: container stopped')
      : h('span', { class: 'badge badge-warn', title: 'The machine went offline: nothing is billed until it is back' }, 'paused: machine offline');
  }
  if (l.status === 'active') return h('span', { class: 'badge badge-good' }, 'running');
  const reason = { stopped: 'stopped', unpaid: 'ended: unpaid', no_fx_rate: 'ended: no exchange rate', window_ended: 'ended: offer window closed', not_started: 'ended: the host never ran it (nothing charged)' }[l.end_reason] || l.status;
  return h('span', { class: 'badge' }, reason);
}

function stopButton(lease) {
  if (lease.status !== 'active') return '';
  const cell = h('span', { class: 'form-actions' });
  const ask = h('button', {
    type: 'button',
    class: 'btn btn-small btn-danger',
    'aria-label': `Stop lease #${lease.id}`,
    onclick: () => {
      replace(
        cell,
        h('button', { type: 'button', class: 'btn btn-small btn-danger', 'aria-label': `Confirm: stop lease #${lease.id}`, onclick: (e) => stopLease(lease, e.currentTarget, cell) }, 'Confirm stop'),
        h('button', { type: 'button', class: 'btn btn-small btn-secondary', onclick: () => replace(cell, ask) }, 'Keep')
      );
      cell.querySelector('button').focus();
    },
  }, 'Stop');
  cell.appendChild(ask);
  return cell;
}

async function stopLease(lease, button, cell) {
  setBusy(button, true);
  try {
    await api('POST', `/v1/leases/${lease.id}/stop`, {}, { idempotencyKey: newIdempotencyKey() });
    await Promise.all([loadLeases(), refreshMarkets()]);
  } catch (e) {
    replace(cell, h('span', { class: 'field-error', role: 'alert' }, e.message));
  }
}

// While a lease's container is being provisioned the list is read again every few seconds, so
// each step shows as it happens and the SSH line the moment it is ready.
const PROVISIONING_REFRESH_MS = 2000;
let provisioningTimer;

async function loadLeases() {
  const card = $('#leases-card');
  try {
    const [data, images] = await Promise.all([api('GET', '/v1/leases'), loadImages()]);
    card.hidden = false;
    clearTimeout(provisioningTimer);
    if (data.leases.some(provisioning)) {
      provisioningTimer = setTimeout(() => {
        if (!document.hidden && session) loadLeases();
      }, PROVISIONING_REFRESH_MS);
    }
    if (!data.leases.length) return replace($('#leases'), empty('No leases yet. A filled bid opens one.'));
    replace(
      $('#leases'),
      table(
        [
          { label: 'Lease', th: true, cell: (l) => h('a', { href: `/instances/?lease=${l.id}`, 'aria-label': `Lease #${l.id}: open its console`, 'data-testid': 'lease-console' }, `#${l.id}`) },
          { label: 'GPUs', cls: 'nowrap', cell: (l) => `${integer(l.gpus)} × ${l.gpu}` },
          { label: 'Price / GPU-h', num: true, cell: (l) => priceText(l.price_usd_per_gpu_hour) },
          { label: 'Per hour', num: true, cell: (l) => money(l.hourly_usd, 'USD') },
          { label: 'Status', cell: leaseStatus },
          { label: 'Connect', cell: leaseConnection },
          { label: 'Image & ports', cell: (l) => launchCell(l, images.images) },
          { label: 'Paid until', cls: 'nowrap', cell: (l) => (l.status === 'active' ? timestamp(l.paid_until) : timestamp(l.ended_at)) },
          { label: 'Hours', num: true, cell: (l) => integer(l.hours_paid) },
          {
            label: 'Charged',
            num: true,
            cell: (l) =>
              Number(l.downtime_credit_usd) > 0
                ? h('span', null, money(l.charged_usd, 'USD'), h('div', { class: 'hint' }, `${money(l.downtime_credit_usd, 'USD')} credited back`))
                : money(l.charged_usd, 'USD'),
          },
          { label: '', cell: stopButton },
        ],
        data.leases,
        { rowClass: (l) => (l.status === 'active' ? null : 'muted'), stack: true }
      )
    );
  } catch (e) {
    if (e.status === 401) card.hidden = true;
    else replace($('#leases'), errorBox('Leases could not be loaded: ' + e.message));
  }
}

// ---------- session ----------

function showSignedIn(on) {
  $('#bid-signed-out').hidden = on;
  form.hidden = !on;
  if (!on) {
    $('#leases-card').hidden = true;
    $('#my-bids-card').hidden = true;
  }
}

async function loadRegions() {
  try {
    const catalog = await api('GET', '/v1/catalog');
    for (const r of catalog.regions) form.elements.region.appendChild(h('option', { value: r.code }, `${r.code} ${r.city}`));
  } catch (e) {
    /* "any region" still works */
  }
  // An answer elsewhere (the calculator, the catalog) links here with the card, the count and the
  // region: /market/?gpu=H100%20SXM&count=2&region=IAD-1.
  const q = new URLSearchParams(location.search);
  const n = Number(q.get('count'));
  if (Number.isInteger(n) && n >= 1 && n <= 8) form.elements.gpus.value = String(n);
  const region = q.get('region');
  if (region && [...form.elements.region.options].some((o) => o.value === region)) form.elements.region.value = region;
}

let resizeTimer = 0;
function redrawOnResize() {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (lastBook && lastBook.gpu === selected) replace($('#depth'), depthChart(lastBook));
    renderHistory();
    revealSelectedTab();
  }, 150);
}

async function main() {
  window.addEventListener('resize', redrawOnResize);
  form.addEventListener('submit', onBid);
  form.addEventListener('change', (e) => {
    if (['order', 'time_in_force'].includes(e.target.name)) syncOrderType();
    renderCost();
  });
  form.addEventListener('input', renderCost);
  syncOrderType();
  loadRegions();
  setUpImagePicker(form.elements.image_choice, form.elements.image, $('#bid-image-note'));
  const [m, s] = await Promise.all([loadMarkets(), currentSession()]);
  markets = m;
  session = s;
  showSignedIn(!!session);
  if (session) sshKeyWarning($('#bid-ssh-warning'));
  const wanted = new URLSearchParams(location.search).get('gpu');
  const names = [...markets.keys()];
  if (!names.length) {
    renderTabs();
    replace($('#depth'), empty('The exchange has no markets.'));
    replace($('#trades'));
    return;
  }
  // The URL's market, else the cheapest to buy now.
  selected = markets.has(wanted) ? wanted : cheapestMarket(names);
  renderTabs();
  select(selected, false);
  if (session) await Promise.all([loadLeases(), loadBids(), loadWallets()]);
  scheduleRefresh();
  document.addEventListener('gpuhub:session', (e) => {
    session = e.detail;
    showSignedIn(!!session);
    if (session) {
      sshKeyWarning($('#bid-ssh-warning'));
      loadWallets();
    }
  });
}

main();
