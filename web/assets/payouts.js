// The sell page's payouts: where the money goes (GET/POST /v1/payout-destinations, DELETE
// /v1/payout-destinations/{id}: a Bitcoin, USDT or USDC address or a bank reference, each checked
// by its shape on the server, which names the field it refuses), the payout request that names
// one (POST /v1/payouts {amount, destination_id}), and the history (GET /v1/payouts). A payout is
// never requested without saying where it is sent: with no destination the form asks for one first.
import { api, RequestKey } from './api.js';
import { h, $, replace, table, showFormError, clearFormErrors, setBusy, errorBox, empty } from './dom.js';
import { money, timestamp } from './format.js';

const PAYOUT_BADGE = { pending: 'badge-warn', paid: 'badge-good', rejected: 'badge-bad' };
const KIND = { btc: 'Bitcoin', usdt: 'USDT', usdc: 'USDC', bank: 'Bank' };
const payoutKey = new RequestKey();
const destinationKey = new RequestKey();
let destinations = [];
let onPaid = () => {};

function badge(text, cls) {
  return h('span', { class: 'badge ' + (cls || '') }, text);
}

function destinationText(d) {
  return `${d.label} (${KIND[d.kind] || d.kind} ${d.address.length > 18 ? d.address.slice(0, 10) + '…' + d.address.slice(-6) : d.address})`;
}

export async function loadPayouts() {
  const slot = $('#payouts');
  try {
    const data = await api('GET', '/v1/payouts');
    if (!data.payouts.length) return replace(slot, empty('No payouts yet.'));
    replace(
      slot,
      table(
        [
          { label: 'Payout', th: true, cell: (p) => `#${p.id}` },
          { label: 'Requested', cls: 'nowrap', cell: (p) => timestamp(p.created_at) },
          { label: 'Amount', num: true, cell: (p) => money(p.amount, p.currency) },
          { label: 'To', cell: (p) => (p.destination ? destinationText(p.destination) : h('span', { class: 'muted' }, 'not named')) },
          { label: 'Status', cell: (p) => badge(p.status, PAYOUT_BADGE[p.status]) },
        ],
        data.payouts,
        { stack: true }
      )
    );
  } catch (err) {
    replace(slot, errorBox('Payouts could not be loaded: ' + err.message));
  }
}

// The destinations, each with Remove, and the payout form's "Send to" choices.
export async function loadDestinations() {
  const slot = $('#destinations');
  try {
    destinations = (await api('GET', '/v1/payout-destinations')).payout_destinations;
  } catch (err) {
    replace(slot, errorBox('Payout destinations could not be loaded: ' + err.message));
    return;
  }
  const select = $('#p-destination');
  const keep = select.value;
  replace(select, destinations.length ? destinations.map((d) => h('option', { value: String(d.id), selected: String(d.id) === keep }, destinationText(d))) : h('option', { value: '' }, 'Add a destination first'));
  select.disabled = !destinations.length;
  $('#payout-submit').disabled = !destinations.length;
  $('#payout-needs-destination').hidden = destinations.length > 0;
  if (!destinations.length) return replace(slot, empty('No destination yet: add where your payouts go.'));
  replace(
    slot,
    h('ul', { class: 'destinations' }, destinations.map((d) => h('li', { dataset: { destination: String(d.id) } },
      h('span', null, h('strong', null, d.label), ' ', badge(KIND[d.kind] || d.kind), ' ', h('code', { class: 'connection-line' }, d.address)),
      h('button', {
        type: 'button', class: 'btn btn-small btn-secondary', 'aria-label': `Remove the payout destination ${d.label}`,
        onclick: async (e) => {
          setBusy(e.currentTarget, true);
          try {
            await api('DELETE', `/v1/payout-destinations/${d.id}`);
          } catch (err) {
            replace(slot, errorBox(err.message));
            return;
          }
          await loadDestinations();
        },
      }, 'Remove'))))
  );
}

async function onDestination(e) {
  e.preventDefault();
  const form = e.currentTarget;
  clearFormErrors(form);
  const f = form.elements;
  const body = { kind: f.kind.value, address: f.address.value.trim(), label: f.label.value.trim() };
  if (!body.address) return showFormError(form, { field: 'address', message: 'Paste the address or the bank reference.' });
  if (!body.label) return showFormError(form, { field: 'label', message: 'Give it a name, such as "cold wallet".' });
  if (!f.totp_code.closest('.field').hidden && f.totp_code.value.trim()) body.totp_code = f.totp_code.value.trim();
  const button = form.querySelector('button[type="submit"]');
  setBusy(button, true);
  try {
    const d = await api('POST', '/v1/payout-destinations', body, { idempotencyKey: destinationKey.for(body) });
    destinationKey.done();
    form.reset();
    f.totp_code.closest('.field').hidden = true;
    await loadDestinations();
    $('#p-destination').value = String(d.id);
  } catch (err) {
    // An account with two-factor sign-in confirms a new destination with a fresh code.
    if (err.field === 'totp_code') f.totp_code.closest('.field').hidden = false;
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

async function onPayout(e) {
  e.preventDefault();
  const form = e.currentTarget;
  clearFormErrors(form);
  replace($('#payout-result'));
  const amount = form.elements.amount.value.trim();
  if (!amount) return showFormError(form, { field: 'amount', message: 'Enter an amount, such as 100.00.' });
  const id = form.elements.destination_id.value;
  if (!id) return showFormError(form, { field: 'destination_id', message: 'Add where the payout goes first.' });
  const body = { amount, destination_id: Number(id) };
  const button = $('#payout-submit');
  setBusy(button, true);
  try {
    const p = await api('POST', '/v1/payouts', body, { idempotencyKey: payoutKey.for(body) });
    payoutKey.done();
    form.elements.amount.value = '';
    replace(
      $('#payout-result'),
      h('div', { class: 'alert alert-ok', role: 'status' }, h('strong', null, `Payout #${p.id} requested: `), `${money(p.amount, p.currency)} to ${p.destination ? destinationText(p.destination) : 'your destination'}, ${p.status}.`)
    );
    await Promise.all([loadPayouts(), onPaid()]);
  } catch (err) {
    if (err.status === 401 || err.status === 403) throw err;
    // A refused amount (too small, more than is available) belongs to the amount.
    const aboutAmount = (err.status === 400 || err.status === 402) && !err.field;
    showFormError(form, aboutAmount ? { field: 'amount', message: err.message } : err);
  } finally {
    setBusy(button, false);
    $('#payout-submit').disabled = !destinations.length;
  }
}

// `paid`: what else to reload after a payout (the earnings); `signedOut`: called when the session
// is gone.
export function initPayouts({ paid, signedOut }) {
  onPaid = paid;
  $('#payout-form').addEventListener('submit', (e) => onPayout(e).catch(signedOut));
  $('#destination-form').addEventListener('submit', onDestination);
}
