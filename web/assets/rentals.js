// The account page's term rentals and notifications: each rental with its state, a countdown to
// its next transition (counted from the server's own clock, which may be a manual one), the
// renewal invoice with a pay button, the auto-renew switch, and release behind a confirmation that
// says no refund is made and the data is destroyed. Notifications are the account's newest.
import { api } from './api.js';
import { h, $, replace, errorBox, empty, setBusy, copyableCommand } from './dom.js';
import { money, timestamp, timeUntil } from './format.js';
import { provisioningSteps } from './provisioning.js';

const REFRESH_MS = 10000;
const STATE_BADGE = { provisioning: 'badge-warn', active: 'badge-good', stopped: 'badge-bad', released: 'badge' };
const NEXT_LABEL = {
  refund_unless_provisioned: 'refunded unless running',
  auto_renew: 'auto-renew debits the next term',
  renewal_invoice: 'renewal invoice',
  renews: 'the next term starts',
  stops: 'stops unless the renewal is paid',
  released: 'released, data destroyed',
  wipe_due: 'disk wipe due',
};

let serverNow = null;  // {at: ms of the server's clock, seen: performance.now() when it was read}
let started = false;
let customer = true;  // the signed-in account has the customer role
let loads = 0;  // #rentals' data-loads: how many answers it has shown (tests wait for the next)
let reload = () => {};

function now() {
  return serverNow ? serverNow.at + (performance.now() - serverNow.seen) : Date.now();
}

// "2 d 4 h", "3 h 12 min", "45 s", from the server's clock.
export function countdown(iso) {
  return timeUntil(iso, now());
}

function tickCountdowns() {
  for (const el of document.querySelectorAll('[data-countdown]')) el.textContent = countdown(el.dataset.countdown);
}

async function act(button, method, path, body) {
  const box = button.closest('.rental');
  const alert = box.querySelector('.rental-alert');
  setBusy(button, true);
  try {
    await api(method, path, body);
    await reload();
  } catch (err) {
    replace(alert, h('div', { class: 'alert alert-error', role: 'alert' }, err.message, err.status === 402 ? [' ', h('a', { href: '#topup-title' }, 'Top up')] : null));
  } finally {
    setBusy(button, false);
  }
}

function renewalBlock(r) {
  const n = r.renewal;
  if (!n || r.state === 'released') return null;
  const due = `due ${timestamp(n.due_at)}`;
  if (n.status === 'paid') {
    return h('p', { class: 'small renewal', dataset: { status: 'paid' } }, `Next term paid: ${money(n.paid.amount, n.paid.currency)}${n.by_auto_renew ? ' (auto-renew)' : ''}; it starts ${timestamp(r.term_end)}.`);
  }
  if (n.status !== 'open') return null;
  return h(
    'div',
    { class: 'renewal alert alert-warn', dataset: { status: 'open' } },
    h('p', null, h('strong', null, `Renewal invoice: ${money(n.amount.gross, n.amount.currency)}`), ` for the next ${r.term}, ${due}.`),
    h('button', { type: 'button', class: 'btn btn-small pay-renewal', onclick: (e) => act(e.currentTarget, 'POST', `/v1/rentals/${r.id}/renew`, {}) }, `Pay ${money(n.amount.gross, n.amount.currency)}`)
  );
}

function releaseControls(r) {
  if (r.state === 'released') return null;
  const confirm = h(
    'div',
    { class: 'alert alert-error release-confirm', role: 'alertdialog', 'aria-label': 'Confirm release', hidden: true },
    h('p', null, h('strong', null, 'Release this rental now?'), ' Nothing of the term is refunded. The machine stops at once and its disk\'s encryption key is destroyed: the data on it cannot be recovered.'),
    h(
      'div',
      { class: 'form-actions' },
      h('button', { type: 'button', class: 'btn btn-danger confirm-release', onclick: (e) => act(e.currentTarget, 'POST', `/v1/rentals/${r.id}/release`, { confirm: true }) }, 'Release, no refund'),
      h('button', { type: 'button', class: 'btn btn-secondary', onclick: (e) => (e.currentTarget.closest('.release-confirm').hidden = true) }, 'Keep it')
    )
  );
  const open = h('button', { type: 'button', class: 'btn btn-small btn-secondary release', onclick: () => { confirm.hidden = false; confirm.querySelector('.confirm-release').focus(); } }, 'Release…');
  return [open, confirm];
}

// How to reach the instance: its SSH line once the node's agent runs it.
function connectFact(r) {
  const ssh = r.instance.connection && r.instance.connection.ssh;
  if (r.state === 'released') return null;
  if (ssh && r.state === 'active') return [h('dt', null, 'Connect'), h('dd', { class: 'connect' }, copyableCommand(ssh, `the SSH command of rental #${r.id}`))];
  // The node's agent reports each step (waiting for host, pulling, starting, ready).
  const reported = r.provisioning && r.provisioning.steps && r.provisioning.steps.length > 1;
  if (r.state === 'provisioning' || (r.state === 'active' && reported)) {
    const steps = r.provisioning ? provisioningSteps(r, 'rental') : null;
    return [h('dt', null, 'Connect'), h('dd', { class: 'connect muted' }, steps || '', r.instance.error ? `failed: ${r.instance.error}` : steps ? '' : 'starting on its node…')];
  }
  return null;
}

function rentalItem(r) {
  const next = r.next_transition;
  const held = r.state === 'stopped';
  return h(
    'article',
    { class: 'rental card', id: 'rental-' + r.id, dataset: { rental: String(r.id), state: r.state } },
    h(
      'header',
      { class: 'card-head' },
      h('h3', null, `${r.count}× ${r.gpu}`, h('span', { class: 'muted small' }, ` · ${r.region} · ${r.term} · ${money(r.price.net, 'USD')} net`)),
      h('span', { class: 'badge state ' + (STATE_BADGE[r.state] || '') }, r.state),
      h('a', { class: 'btn btn-small btn-secondary', href: `/instances/?rental=${r.id}`, 'data-testid': 'rental-console', 'aria-label': `Rental #${r.id}: open its console` }, 'Console')
    ),
    h(
      'dl',
      { class: 'rental-facts' },
      h('dt', null, 'Term'),
      h('dd', { class: 'term' }, r.term_start ? `${r.period}: ${timestamp(r.term_start)} – ${timestamp(r.term_end)}` : 'starts once the machine runs'),
      next ? [h('dt', null, 'Next'), h('dd', { class: 'next' }, `${NEXT_LABEL[next.what] || next.what} in `, h('strong', { dataset: { countdown: next.at } }, countdown(next.at)), h('span', { class: 'muted small' }, ` (${timestamp(next.at)})`))] : null,
      h('dt', null, 'Machine'),
      h('dd', null, `node ${r.node_id}, cards ${r.cards.join(', ')}, ${r.instance.nvme_gb} GB NVMe, ${r.instance.state}`),
      r.image ? [h('dt', null, 'Image'), h('dd', { class: 'image' }, h('code', { class: 'image-ref' }, r.image), r.ports && r.ports.length ? h('span', { class: 'muted small' }, ` · ports ${r.ports.join(', ')}`) : '')] : null,
      connectFact(r),
      r.downtime_credit && Number(r.downtime_credit.total_usd) > 0
        ? [h('dt', null, 'Downtime'), h('dd', { class: 'downtime' }, `${money(r.downtime_credit.total_usd, 'USD')} credited: the node was offline ${r.downtime_credit.credits.map((c) => `${Number(c.hours).toFixed(2)} h`).join(' + ')}`, h('div', { class: 'hint' }, r.downtime_credit.credits.map((c) => c.formula).join('; ')))]
        : null,
      r.state === 'released' ? [h('dt', null, 'Released'), h('dd', null, `${timestamp(r.released_at)} (${String(r.release_reason).replace(/_/g, ' ')}); data destroyed`)] : null
    ),
    held ? h('p', { class: 'alert alert-error hold' }, `On hold: the renewal was not paid. Pay it before ${timestamp(r.hold_until)} to run again (the new term counts from the old end); after that the disk's data is destroyed.`) : null,
    renewalBlock(r),
    r.state === 'released'
      ? null
      : h(
          'div',
          { class: 'rental-actions' },
          h(
            'label',
            { class: 'check' },
            h('input', { type: 'checkbox', class: 'auto-renew', checked: r.auto_renew, onchange: (e) => act(e.currentTarget, 'POST', `/v1/rentals/${r.id}/auto-renew`, { enabled: e.currentTarget.checked }) }),
            ' Auto-renew'
          ),
          r.state !== 'provisioning' && !(r.renewal && r.renewal.status === 'open') && !r.next_paid
            ? h('button', { type: 'button', class: 'btn btn-small btn-secondary pay-renewal', onclick: (e) => act(e.currentTarget, 'POST', `/v1/rentals/${r.id}/renew`, {}) }, 'Pay the next term now')
            : null,
          releaseControls(r)
        ),
    h('div', { class: 'rental-alert', 'aria-live': 'polite' })
  );
}

export async function loadRentals() {
  const slot = $('#rentals');
  if (!customer) {
    // Rentals are a customer's: a provider-only account would get a 403 here.
    replace(slot, empty('Term rentals need the customer role.'));
    slot.dataset.loads = String(++loads);
    return;
  }
  try {
    const data = await api('GET', '/v1/rentals?limit=50');
    serverNow = { at: Date.parse(data.as_of), seen: performance.now() };
    if (!data.rentals.length) {
      replace(slot, empty('No term rentals yet. '), h('a', { href: '/' }, 'Rent from the catalog'));
    } else {
      replace(slot, data.rentals.map(rentalItem));
    }
    slot.dataset.loads = String(++loads);
  } catch (err) {
    replace(slot, errorBox('Rentals could not be loaded: ' + err.message));
  }
}

// A notification's message is the server's text; the times in it (RFC 3339, UTC) are shown in the
// reader's locale like every other date on the pages.
function localTimes(message) {
  return String(message).replace(/\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z\b/g, (iso) => timestamp(iso));
}

export async function loadNotifications() {
  const slot = $('#notifications');
  try {
    const data = await api('GET', '/v1/notifications?limit=10');
    if (!data.notifications.length) return replace(slot, empty('Nothing yet.'));
    replace(
      slot,
      h(
        'ul',
        { class: 'notifications' },
        data.notifications.map((n) =>
          h('li', { dataset: { type: n.type } }, h('span', { class: 'muted small' }, timestamp(n.created_at) + ' '), localTimes(n.message))
        )
      )
    );
  } catch (err) {
    replace(slot, errorBox('Notifications could not be loaded: ' + err.message));
  }
}

// Loads both and keeps them current while the page is open; `refresh` also reloads the wallets.
// `isCustomer`: the signed-in account may rent (only a customer's rentals are asked for).
export function startRentals(refresh, isCustomer = true) {
  customer = isCustomer;
  reload = async () => {
    await Promise.all([loadRentals(), loadNotifications(), refresh()]);
  };
  if (!started) {
    started = true;
    setInterval(() => {
      if (!document.hidden && !$('#signed-in').hidden) tickCountdowns();
    }, 1000);
    setInterval(() => {
      if (!document.hidden && !$('#signed-in').hidden) Promise.all([loadRentals(), loadNotifications()]);
    }, REFRESH_MS);
    $('#refresh-rentals').addEventListener('click', () => reload());
  }
  return Promise.all([loadRentals(), loadNotifications()]);
}
