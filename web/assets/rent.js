// Rent: one card of the term fleet for a week or a month. The choices (count, term, region, wallet)
// live in the URL; every change asks the server for the exact quote (POST /v1/rentals/quote: list,
// discount, net, tax, gross, the amount in the wallet's currency, live stock per region), and
// "Rent" orders it (POST /v1/rentals) with one Idempotency-Key per distinct order. A short wallet
// gets the server's top-up invoice for the shortfall.
import { api, currentSession, RequestKey } from './api.js';
import { h, $, replace, showFormError, clearFormErrors, setBusy, errorBox } from './dom.js';
import { money, timestamp } from './format.js';
import { sshKeyWarning } from './ssh_warning.js';
import { notifyMe } from './alerts.js';
import { loadSpotNames, spotHref } from './actions.js';

const form = $('#rent-form');
const orderKey = new RequestKey();
let card = null;
let regions = [];
let session = null;
let quoteSeq = 0;
let lastQuote = null;
let spotNames = new Map();  // term card -> spot market (actions.js)

function params() {
  return new URLSearchParams(location.search);
}

function choices() {
  return {
    gpu: form.elements.gpu.value,
    count: Number(form.elements.count.value),
    term: form.elements.term.value,
    region: form.elements.region.value,
    currency: form.elements.currency.value,
    auto_renew: form.elements.auto_renew.checked,
    extra_nvme_tb: form.elements.extra_nvme_tb.value === '' ? 0 : Number(form.elements.extra_nvme_tb.value),
  };
}

// The order's fields for the API (the server checks every one and names the field it refuses).
function orderBody(c, order) {
  const body = { gpu: c.gpu, count: c.count, term: c.term, currency: c.currency };
  if (order) body.auto_renew = c.auto_renew;
  if (c.region) body.region = c.region;
  if (c.extra_nvme_tb !== 0) body.extra_nvme_tb = c.extra_nvme_tb;
  return body;
}

function writeUrl() {
  const c = choices();
  const q = new URLSearchParams({ gpu: c.gpu, count: String(c.count), term: c.term });
  if (c.region) q.set('region', c.region);
  if (c.currency !== 'USD') q.set('currency', c.currency);
  if (c.extra_nvme_tb) q.set('extra_nvme_tb', String(c.extra_nvme_tb));
  history.replaceState(null, '', '?' + q.toString());
}

function fillForm() {
  const q = params();
  form.elements.gpu.value = card.name;
  replace(
    $('#rent-count'),
    card.counts.map((n) => h('option', { value: String(n) }, n === 1 ? '1 card' : `${n} cards`))
  );
  const count = Number(q.get('count'));
  $('#rent-count').value = String(card.counts.includes(count) ? count : card.counts[0]);
  const term = q.get('term') === 'week' ? 'week' : 'month';
  for (const r of form.querySelectorAll('input[name="term"]')) r.checked = r.value === term;
  const region = q.get('region') || '';
  renderRegions(null);
  $('#rent-region').value = card.regions.includes(region) ? region : '';
  const currency = q.get('currency');
  if (['USD', 'EUR', 'GBP'].includes(currency)) $('#rent-currency').value = currency;
  const nvme = q.get('extra_nvme_tb');
  if (nvme && /^\d{1,2}$/.test(nvme)) $('#rent-nvme').value = nvme;
}

// Region options with the sets free now for the chosen count (from the last quote's stock).
function renderRegions(stock) {
  const select = $('#rent-region');
  const keep = select.value;
  const sets = new Map((stock || []).map((s) => [s.region, s.sets]));
  const total = stock ? stock.reduce((a, s) => a + s.sets, 0) : null;
  const count = Number(form.elements.count.value) || 1;
  const label = (text, n) =>
    n == null ? text : `${text} — ${count === 1 ? `${n} free now` : `${n} ${n === 1 ? 'set' : 'sets'} of ${count} free now`}`;
  replace(
    select,
    h('option', { value: '' }, label('Any region', total)),
    card.regions.map((code) => {
      const city = (regions.find((r) => r.code === code) || {}).city;
      return h('option', { value: code }, label(city ? `${code} ${city}` : code, sets.get(code)));
    })
  );
  select.value = keep;
}

// A line of the quote: its label with the note under it, the amount on the right (two columns, so
// that the table fits a phone without scrolling).
function row(label, value, note) {
  return h('tr', null, h('th', { scope: 'row' }, label, note ? h('span', { class: 'quote-note muted small' }, note) : null), h('td', { class: 'num' }, value));
}

function renderQuote(q) {
  const a = q.amount;
  const c = q.charge;
  const lines = [
    row('List price', money(q.list_price_per_card, 'USD'), `per card per ${q.term}` + (q.list_price_derived ? ' (derived from the fleet\'s weekly/monthly ratio)' : '')),
    row('Subtotal', money(q.subtotal, 'USD'), `${q.count} × ${money(q.list_price_per_card, 'USD')}`),
    row('Multi-card discount', '−' + money(q.discount, 'USD'), q.count > 1 ? `${q.discount_percent}% at ${q.count} cards` : 'none for one card'),
    q.extra_nvme && q.extra_nvme.tb > 0
      ? row('Extra NVMe', money(q.extra_nvme.net, 'USD'), `${q.extra_nvme.tb} TB × ${money(q.extra_nvme.per_tb, 'USD')} per ${q.term}`)
      : null,
    row('Net', money(a.net, 'USD')),
    a.tax.map((t) => row(t.name, money(t.amount, 'USD'), t.rate_percent + '%')),
    row('Tax', money(a.tax_total, 'USD'), a.tax.length ? '' : 'no tax applies'),
  ];
  const total = h('tr', { class: 'total' }, h('th', { scope: 'row' }, 'Total'), h('td', { class: 'num', 'data-testid': 'quote-total' }, money(a.gross, 'USD')));
  const paid =
    c.currency === 'USD'
      ? null
      : c.amount
        ? h('p', { class: 'small' }, `Paid from your ${c.currency} wallet: `, h('strong', null, money(c.amount, c.currency)), ` at 1 ${c.fx.base} = ${c.fx.mid} ${c.fx.quote}, ${c.fx.spread_bps / 100}% spread.`)
        : null;
  const availability = q.available
    ? h('p', { class: 'alert alert-ok', 'data-testid': 'quote-available' }, `Available now in ${q.region}. The term would run ${timestamp(q.term_start)} – ${timestamp(q.term_end)} if started now.`)
    : h('div', { class: 'alert alert-warn dead-end' }, h('p', { 'data-testid': 'quote-unavailable' }, q.reason.message.charAt(0).toUpperCase() + q.reason.message.slice(1)), nextSteps(q));
  replace(
    $('#quote'),
    h('div', { class: 'table-wrap' }, h('table', { class: 'quote-table' }, h('tbody', null, lines, total))),
    paid,
    availability,
    h('details', null, h('summary', null, 'Show the arithmetic'), h('p', { class: 'mono small' }, q.formula))
  );
  renderRegions(q.stock);
  const button = $('#rent-submit');
  button.disabled = !q.available || !session;
  button.textContent = q.available ? `Rent for ${money(c.amount || a.gross, c.currency)}` : 'Not available';
}

// Not available: what can be done instead. Without stock (none free, or none in the chosen region)
// a stock alert for this count and region, and the card's spot hours where it trades.
function nextSteps(q) {
  if (q.reason.code !== 'no_stock' && q.reason.code !== 'not_in_region') return null;
  const c = choices();
  const spot = spotNames.get(card.name);
  return h('div', { class: 'next-steps' },
    notifyMe({ kind: 'stock', gpu: card.name, count: c.count, region: c.region, counts: card.counts, regions: card.regions },
      { label: `Notify me when ${c.count === 1 ? 'one is' : c.count + ' are'} free` }),
    spot ? h('a', { class: 'btn btn-small btn-secondary', href: spotHref(spot, c.count, { region: c.region }) }, 'Buy spot hours instead') : null,
    h('a', { class: 'btn btn-small btn-secondary', href: '/?stock=1' }, 'Cards free now'));
}

async function updateQuote() {
  writeUrl();
  const body = orderBody(choices(), false);
  const seq = ++quoteSeq;
  try {
    const q = await api('POST', '/v1/rentals/quote', body);
    if (seq !== quoteSeq) return;  // an older answer after a newer request
    lastQuote = q;
    clearFormErrors(form);
    renderQuote(q);
  } catch (err) {
    if (seq !== quoteSeq) return;
    lastQuote = null;
    $('#rent-submit').disabled = true;
    if (!showFormError(form, err)) replace($('#quote'), errorBox(err.message));
  }
}

function shortWallet(err) {
  const e = err.details || {};
  const s = e.shortfall || {};
  const topup = e.topup;
  return h(
    'div',
    { class: 'alert alert-warn', role: 'alert', 'data-testid': 'rent-shortfall' },
    h('p', null, err.message),
    s.amount ? h('p', null, 'You need ', h('strong', null, money(s.amount, s.currency)), ` more in your ${s.currency} wallet.`) : null,
    topup
      ? h('p', null, h('a', { class: 'btn', href: topup.checkout_url, target: '_blank', rel: 'noopener noreferrer' }, `Pay a top-up of ${money(topup.amount, topup.currency)}`), ' then rent again: the top-up is also on ', h('a', { href: '/account/' }, 'your account page'), '.')
      : e.topup_note
        ? h('p', { class: 'small' }, e.topup_note)
        : null
  );
}

async function onSubmit(e) {
  e.preventDefault();
  if (!session) return;
  clearFormErrors(form);
  const body = orderBody(choices(), true);
  const button = $('#rent-submit');
  setBusy(button, true);
  try {
    const rental = await api('POST', '/v1/rentals', body, { idempotencyKey: orderKey.for(body) });
    orderKey.done();
    replace(
      $('#rent-result'),
      h(
        'div',
        { class: 'alert alert-ok', role: 'status', 'data-testid': 'rent-done', dataset: { rental: String(rental.id) } },
        h('p', null, h('strong', null, `Rented: ${rental.count}× ${rental.gpu} in ${rental.region}`), ` until ${timestamp(rental.term_end)}.`),
        h('p', null, h('a', { class: 'btn btn-small', href: '/instances/?rental=' + rental.id, 'data-testid': 'rent-console' }, 'Open its console'), ' (how to connect, its state, time paid) · ',
          h('a', { href: '/account/#rental-' + rental.id }, 'See it on your account page'), ' (renewals, auto-renew, release).'),
        rental.invoice
          ? h('p', null, 'Tax invoice ', h('a', { href: rental.invoice.html, target: '_blank', rel: 'noopener', 'data-testid': 'rent-invoice' }, rental.invoice.number),
              ' (', h('a', { href: rental.invoice.pdf }, 'PDF'), ').')
          : null
      )
    );
    updateQuote();
  } catch (err) {
    if (err.status === 402) replace($('#rent-result'), shortWallet(err));
    else if (err.field === 'billing_country') {
      // Not a field of this form: say where it is set.
      replace($('#rent-result'), h('div', { class: 'alert alert-warn', role: 'alert', 'data-testid': 'rent-billing' },
        'Set your billing country first: prices exclude tax, and the tax of your country is added to the rental. ',
        h('a', { href: '/account/#billing' }, 'Billing details')));
    } else if (!showFormError(form, err)) replace($('#rent-result'), errorBox(err.message));
  } finally {
    setBusy(button, false);
    if (lastQuote) button.disabled = !lastQuote.available;
  }
}

async function main() {
  const gpu = params().get('gpu');
  let catalog;
  try {
    [catalog, session, spotNames] = await Promise.all([api('GET', '/v1/catalog'), currentSession(), loadSpotNames()]);
  } catch (err) {
    return replace($('#quote'), errorBox('The catalog could not be loaded: ' + err.message));
  }
  regions = catalog.regions || [];
  const norm = (s) => String(s || '').toLowerCase().replace(/[\s_.-]/g, '');
  card = catalog.term.find((c) => norm(c.name) === norm(gpu));
  if (!card) {
    replace($('#quote'), errorBox(gpu ? `"${gpu}" is not a card of the term fleet.` : 'Choose a card in the catalog first.'), h('p', null, h('a', { href: '/' }, 'Back to the catalog')));
    return;
  }
  document.title = `Rent ${card.name} — gpuhub`;
  $('#rent-title').textContent = `Rent ${card.name}`;
  $('#rent-card').textContent = `${card.vram_gb} GB ${card.memory} per card, ${card.link}` + (card.local_nvme_tb ? `, ${card.local_nvme_tb} TB local NVMe per card` : '') + `. ${card.regions.join(', ')}.`;
  fillForm();
  if (session) sshKeyWarning($('#rent-ssh-warning'));
  if (!session) {
    $('#rent-signin').hidden = false;
    $('#rent-signin-link').href = '/account/?next=' + encodeURIComponent(location.pathname + location.search);
  }
  form.addEventListener('change', (ev) => {
    if (ev.target.name !== 'auto_renew') updateQuote();
  });
  form.addEventListener('submit', onSubmit);
  document.addEventListener('gpuhub:session', (ev) => {
    session = ev.detail;
    if (session) sshKeyWarning($('#rent-ssh-warning'));
    if (lastQuote) renderQuote(lastQuote);
  });
  await updateQuote();
}

main();
