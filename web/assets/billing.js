// The account page's billing part: the billing details form (PUT /v1/billing-profile) and the
// list of tax documents (GET /v1/invoices), each with its printable page and its PDF.
// Amounts are the API's decimal strings, formatted for display only.
import { api } from './api.js';
import { h, $, replace, table, showFormError, clearFormErrors, setBusy, errorBox, empty } from './dom.js';
import { money, timestamp } from './format.js';

const PAGE = 20;
let before = null;
let countriesLoaded = false;
// The page's first read of the profile may answer after the user already chose a country (the
// country list arrives first) or even saved it: a read started before a save is dropped, and the
// form keeps what the user typed or chose (found by the e2e suite: the read put the old, empty
// country back into the form just before the click on Save).
let saves = 0;
let edited = false;

async function loadCountries() {
  if (countriesLoaded) return;
  const select = $('#billing-country');
  const data = await api('GET', '/v1/countries');
  for (const c of data.countries) {
    const rate = c.rate_percent !== '0' ? ` — VAT ${c.rate_percent}%` : '';
    select.appendChild(h('option', { value: c.code }, `${c.name} (${c.code})${rate}`));
  }
  countriesLoaded = true;
}

function renderStatus(p) {
  const slot = $('#billing-status');
  if (p.wallet_hold) {
    return replace(slot, h('span', { class: 'alert alert-error', role: 'alert' },
      `Your wallet is on hold since ${timestamp(p.wallet_hold.since)}: ${p.wallet_hold.reason}. Purchases are paused until an administrator reviews it.`));
  }
  if (!p.complete) {
    slot.dataset.state = 'missing';
    return replace(slot, h('span', { class: 'badge badge-warn' }, 'needed'), ' Choose your billing country before your first purchase.');
  }
  slot.dataset.state = 'complete';
  const tax = p.tax.reverse_charge
    ? 'reverse charge (you account for the VAT)'
    : p.tax.rate_percent === '0' ? 'no tax applies' : `${p.tax.rate_percent}% is added to each purchase`;
  replace(slot, h('span', { class: 'badge badge-good' }, 'saved'), ` ${p.country_name}: ${tax}.`);
}

function fill(p) {
  const f = $('#billing-form').elements;
  f.billing_country.value = p.billing_country || '';
  f.business_name.value = p.business_name || '';
  f.vat_id.value = p.vat_id || '';
  f.address.value = p.address || '';
}

export async function loadBillingProfile() {
  const savesBefore = saves;
  edited = false;  // a new load (another sign-in): only what is typed from now on is kept
  try {
    await loadCountries();
    const p = await api('GET', '/v1/billing-profile');
    if (saves !== savesBefore) return;
    if (!edited) fill(p);
    renderStatus(p);
  } catch (err) {
    replace($('#billing-status'), errorBox('Billing details could not be loaded: ' + err.message));
  }
}

async function onSave(e) {
  e.preventDefault();
  const form = e.currentTarget;
  clearFormErrors(form);
  const f = form.elements;
  if (!f.billing_country.value) {
    return showFormError(form, { field: 'billing_country', message: 'Choose the country you are billed in.' });
  }
  const body = {
    billing_country: f.billing_country.value,
    business_name: f.business_name.value.trim(),
    vat_id: f.vat_id.value.trim(),
    address: f.address.value.trim(),
  };
  const button = form.querySelector('button[type="submit"]');
  setBusy(button, true);
  saves += 1;
  try {
    const p = await api('PUT', '/v1/billing-profile', body);
    fill(p);
    edited = false;
    renderStatus(p);
  } catch (err) {
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

const KIND = { invoice: 'Invoice', credit_note: 'Credit note' };

const DOCUMENT_COLUMNS = [
  { label: 'Issued', cls: 'nowrap', cell: (d) => timestamp(d.issued_at) },
  {
    label: 'Number',
    cell: (d) => [h('a', { class: 'mono', href: d.links.html, target: '_blank', rel: 'noopener' }, d.number), h('div', { class: 'muted small' }, KIND[d.kind] || d.kind)],
  },
  { label: 'What', cell: (d) => [d.title, d.corrects ? h('div', { class: 'muted small' }, 'corrects ' + d.corrects) : null] },
  { label: 'Net', num: true, cell: (d) => money(d.net, d.currency) },
  { label: 'Tax', num: true, cell: (d) => (d.reverse_charge ? 'reverse charge' : money(d.tax, d.currency)) },
  { label: 'Gross', num: true, cell: (d) => h('strong', null, money(d.gross, d.currency)) },
  { label: '', cell: (d) => h('a', { class: 'btn btn-small btn-secondary', href: d.links.pdf, download: `gpuhub-${d.number}.pdf` }, 'PDF') },
];

export async function loadDocuments(reset = true) {
  const slot = $('#documents');
  const more = $('#more-documents');
  if (reset) before = null;
  try {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (before) q.set('before', String(before));
    const data = await api('GET', '/v1/invoices?' + q);
    before = data.next_before;
    more.hidden = !before;
    if (reset) {
      if (!data.invoices.length) {
        return replace(slot, empty('No invoices yet. Spot GPU-hours are invoiced after each month ends; every document appears here.'));
      }
      replace(slot, table(DOCUMENT_COLUMNS, data.invoices, { stack: true }));
    } else {
      const tbody = slot.querySelector('tbody');
      const extra = table(DOCUMENT_COLUMNS, data.invoices, { stack: true }).querySelector('tbody');
      for (const row of Array.from(extra.children)) tbody.appendChild(row);
    }
  } catch (err) {
    replace(slot, errorBox('Invoices could not be loaded: ' + err.message));
  }
}

export function initBilling() {
  $('#billing-form').addEventListener('submit', onSave);
  $('#billing-form').addEventListener('input', () => { edited = true; });
  $('#billing-form').addEventListener('change', () => { edited = true; });
  $('#more-documents').addEventListener('click', () => loadDocuments(false));
}
