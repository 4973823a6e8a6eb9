// What to do with an answer (issue 29): every configuration a page recommends carries its action,
// Rent (the term page with the card, the count and the region filled in from the query string) or
// Buy spot (the market with the card and the count). The spot market of a term card is the
// catalog's spot entry of the same card (GET /v1/catalog "spot": {name, term}), looked up once.
import { api } from './api.js';
import { h } from './dom.js';

let spotNames = null;

// term card name -> spot market name, once per page load (empty when the catalog cannot be read).
export function loadSpotNames() {
  if (!spotNames) {
    spotNames = api('GET', '/v1/catalog')
      .then((c) => new Map((c.spot || []).map((s) => [s.term, s.name])))
      .catch(() => new Map());
  }
  return spotNames;
}

export function rentHref(gpu, count, { region, term = 'month' } = {}) {
  const q = new URLSearchParams({ gpu, count: String(count || 1), term });
  if (region) q.set('region', region);
  return '/rent/?' + q;
}

// The quote request form (/quote/) with a job filled in (quote.js reads these names): for a job no
// single node of the fleet holds, priced by the operators (POST /v1/quote-requests). Only the fields
// the form has, and only plain values (a pasted config, or batch "max", cannot be carried).
const QUOTE_FIELDS = ['model', 'workload', 'precision', 'context', 'seq', 'batch', 'tokens', 'epochs', 'tokens_per_day'];
export function quoteHref(job) {
  const q = new URLSearchParams();
  for (const name of QUOTE_FIELDS) {
    const v = job ? job[name] : undefined;
    if (v === undefined || v === null || typeof v === 'object') continue;
    if (name === 'batch' && typeof v !== 'number') continue;
    q.set(name, String(v));
  }
  return '/quote/?' + q;
}

export function spotHref(market, count, { region } = {}) {
  const q = new URLSearchParams({ gpu: market, count: String(count || 1) });
  if (region) q.set('region', region);
  return '/market/?' + q;
}

// "Rent" and, where the card trades on the exchange, "Buy spot" links for `count` × `gpu`.
// `spot`: the spot market's name (null: no spot action); `prefer`: 'spot' puts it first;
// `rentable` false: a card the term fleet does not rent (spot only), so no Rent.
export function actionLinks({ gpu, count, region, term, spot, prefer, rentable = true }) {
  const name = count === 1 ? gpu : `${count}× ${gpu}`;
  if (!rentable) {
    return spot ? h('span', { class: 'actions' }, h('a', { class: 'btn btn-small action-spot', href: spotHref(spot, count, { region }), 'aria-label': `Buy spot hours of ${name} on the market` }, 'Buy spot')) : null;
  }
  const rent = h('a', { class: 'btn btn-small action-rent', href: rentHref(gpu, count, { region, term }), 'aria-label': `Rent ${name} by the ${term || 'month'}` }, 'Rent');
  const buy = spot
    ? h('a', { class: 'btn btn-small btn-secondary action-spot', href: spotHref(spot, count, { region }), 'aria-label': `Buy spot hours of ${name} on the market`, title: `Buy spot hours of ${name} on the market` }, 'Buy spot')
    : null;
  if (buy && prefer === 'spot') {
    buy.className = 'btn btn-small action-spot';
    rent.className = 'btn btn-small btn-secondary action-rent';
    return h('span', { class: 'actions' }, buy, ' ', rent);
  }
  return h('span', { class: 'actions' }, rent, buy ? [' ', buy] : null);
}
