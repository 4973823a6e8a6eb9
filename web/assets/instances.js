// The instance console (/instances/): one page per machine a customer runs, a spot lease
// (?lease=ID, GET /v1/leases/{id}) or a term rental (?rental=ID, GET /v1/rentals/{id}): its state
// with the provisioning steps the host's agent reports, the SSH line with a Copy button, the image
// and ports, the GPUs, what is paid and until when with a countdown on the server's clock, its
// invoices, and stop (a lease) or release (a rental) behind a confirmation. Without a query: the
// list of both. Every figure is the API's.
import { api, currentSession, newIdempotencyKey } from './api.js';
import { h, $, replace, table, errorBox, empty, setBusy, copyableCommand } from './dom.js';
import { amount, perHour, count, timestamp, usd, timeUntil } from './format.js';
import { provisioningSteps, provisioning } from './provisioning.js';
import { loadImages, launchCell } from './images.js';

const FAST_MS = 2000;  // while a machine is being provisioned: each step as it happens
const SLOW_MS = 15000;
const RENTAL_BADGE = { provisioning: 'badge-warn', active: 'badge-good', stopped: 'badge-bad', released: 'badge' };
const NEXT_LABEL = {
  refund_unless_provisioned: 'refunded unless running by then',
  auto_renew: 'auto-renew pays the next term',
  renewal_invoice: 'the renewal invoice is issued',
  renews: 'the next term starts',
  stops: 'it stops unless the renewal is paid',
  released: 'it is released and its data destroyed',
  wipe_due: 'its disk is wiped',
};
const END_REASON = {
  stopped: 'stopped by you',
  unpaid: 'ended: the wallet could not pay the next hour',
  no_fx_rate: 'ended: no exchange rate for the wallet',
  window_ended: "ended: the provider's offer window closed",
  not_started: 'ended: the host never ran it (nothing charged)',
};

let serverClock = null;  // {at: the server's time in ms, seen: performance.now() then}
let timer = 0;
let session = null;

function serverNow() {
  return serverClock ? serverClock.at + (performance.now() - serverClock.seen) : Date.now();
}

function setServerClock(iso) {
  const at = Date.parse(iso || '');
  if (!Number.isNaN(at)) serverClock = { at, seen: performance.now() };
}

// "2 d 4 h", "3 h 12 min", "45 s" until `iso` on the server's clock (which may be a manual one).
export function until(iso) {
  return timeUntil(iso, serverNow());
}

function countdownEl(iso) {
  return h('strong', { class: 'countdown', dataset: { countdown: iso } }, until(iso));
}

function fact(label, ...value) {
  return [h('dt', null, label), h('dd', null, ...value)];
}

function card(title, testid, ...children) {
  return h('section', { class: 'card section', 'data-testid': testid, 'aria-label': title }, h('h2', null, title), ...children);
}

function connectBlock(ssh, what, state) {
  if (ssh) {
    return h('div', { class: 'connect', 'data-testid': 'ssh' }, copyableCommand(ssh, `the SSH command of ${what}`),
      h('p', { class: 'hint' }, 'Logs in as root with the SSH keys of your account. ', h('a', { href: '/account/#ssh-keys' }, 'Your SSH keys')));
  }
  return h('p', { class: 'muted', 'data-testid': 'ssh' }, state);
}

// ---------- a spot lease ----------

// The exchange's book quotes per-GPU-hour prices to 0.001: its prices keep three decimals.
function amountAt3(value) {
  return usd(value, 3);
}

function leaseBadge(l) {
  if (l.status !== 'active') return h('span', { class: 'badge' }, END_REASON[l.end_reason] || l.status);
  if (l.billing === 'provisioning') return h('span', { class: 'badge badge-warn' }, 'starting: not billed yet');
  if (l.billing === 'paused') return h('span', { class: 'badge badge-warn' }, l.workload_down ? 'paused: container stopped' : 'paused: machine offline');
  return h('span', { class: 'badge badge-good' }, 'running');
}

function leaseConnectText(l) {
  const c = l.connection || {};
  if (l.status !== 'active') return 'This lease has ended: its machine is no longer yours.';
  if (c.state === 'no_agent') return "The provider's machine has no host agent yet: it cannot start your container until one runs there. Nothing is billed until it does.";
  if (c.state === 'simulated') return 'A simulated host (demo): there is no real machine to connect to.';
  return 'The SSH line appears here as soon as your container answers.';
}

// A destructive action behind a confirmation: the button, then the question with the action and
// "keep" buttons; `run` calls the API, then `onDone` (errors shown under the buttons).
function confirmedAction({ testid, label, alertClass, title, question, detail, confirmLabel, keepLabel, run, onDone }) {
  const slot = h('div', { class: 'form-actions instance-actions' });
  const ask = h('button', {
    type: 'button',
    class: 'btn btn-danger',
    'data-testid': testid,
    onclick: () => {
      replace(
        slot,
        h('p', { class: `alert ${alertClass}`, role: 'alertdialog', 'aria-label': title },
          h('strong', null, question), detail),
        h('button', { type: 'button', class: 'btn btn-danger', 'data-testid': `confirm-${testid}`, onclick: (e) => act(e.currentTarget) }, confirmLabel),
        h('button', { type: 'button', class: 'btn btn-secondary', onclick: () => replace(slot, ask) }, keepLabel)
      );
      slot.querySelector(`[data-testid="confirm-${testid}"]`).focus();
    },
  }, label);
  async function act(button) {
    setBusy(button, true);
    try {
      await run();
      await onDone();
    } catch (err) {
      setBusy(button, false);
      slot.append(h('p', { class: 'field-error', role: 'alert' }, err.message));
    }
  }
  slot.appendChild(ask);
  return slot;
}

function stopControls(l, onDone) {
  if (l.status !== 'active') return null;
  return confirmedAction({
    testid: 'stop', label: 'Stop…', alertClass: 'alert-warn', title: 'Confirm stop',
    question: 'Stop this lease now?',
    detail: ' The hour already paid is not refunded; the container and its disk are removed.',
    confirmLabel: 'Stop, keep nothing', keepLabel: 'Keep it running', onDone,
    run: () => api('POST', `/v1/leases/${l.id}/stop`, {}, { idempotencyKey: newIdempotencyKey() }),
  });
}

async function showLease(id) {
  const [l, markets, images] = await Promise.all([
    api('GET', '/v1/leases/' + encodeURIComponent(id)),
    api('GET', '/v1/markets').catch(() => null),
    loadImages(),
  ]);
  if (markets) setServerClock(markets.as_of);
  const title = `Lease #${l.id}: ${count(l.gpus)} × ${l.gpu}`;
  $('#instance-title').textContent = title;
  $('#instance-sub').textContent = `A spot lease from the market, started ${timestamp(l.started_at)}.`;
  document.title = `${title} — gpuhub`;
  const active = l.status === 'active';
  replace(
    $('#instance'),
    h('div', { class: 'instance', dataset: { kind: 'lease', id: String(l.id), status: l.status } },
      card('State', 'state',
        h('p', null, leaseBadge(l)),
        active && l.provisioning && l.provisioning.step !== 'simulated' ? provisioningSteps(l) : null,
        connectBlock(active && l.connection && l.connection.ssh, `lease #${l.id}`, leaseConnectText(l)),
        stopControls(l, () => show())),
      h('div', { class: 'grid grid-2' },
        card('Machine', 'machine',
          h('dl', { class: 'facts' },
            fact('GPUs', `${count(l.gpus)} × ${l.gpu}`, h('span', { class: 'muted small' }, ` (machine #${l.machine_id}, GPU ${l.gpu_indices.join(', ')})`)),
            fact('Image and ports', launchCell(l, images.images)))),
        card('Paid', 'paid',
          h('dl', { class: 'facts' },
            fact('Price', amountAt3(l.price_usd_per_gpu_hour), ' per GPU-hour, ', h('strong', { 'data-testid': 'hourly' }, perHour(l.hourly_usd)), ' for the lease'),
            active && l.billing !== 'provisioning'
              ? fact('Paid until', h('span', { 'data-testid': 'paid-until' }, timestamp(l.paid_until)), ': the next hour is billed in ', countdownEl(l.paid_until))
              : active
                ? fact('Billing', 'starts when the host runs it; the first hour is held', l.start_deadline ? ` until ${timestamp(l.start_deadline)}` : '')
                : fact('Ended', timestamp(l.ended_at)),
            fact('Hours paid', h('span', { 'data-testid': 'hours-paid' }, count(l.hours_paid)), ', ', h('span', { 'data-testid': 'charged' }, amount(l.charged_usd)), ' charged',
              Number(l.downtime_credit_usd) > 0 ? `, ${amount(l.downtime_credit_usd)} credited back for downtime` : ''),
            l.tax && l.tax.hourly_gross_usd && l.tax.hourly_gross_usd !== l.tax.hourly_net_usd ? fact('With tax', perHour(l.tax.hourly_gross_usd), ` (${l.tax.note})`) : null,
            fact('Invoice', 'Spot hours are invoiced once a month, after it ends: ', h('a', { href: '/account/#billing', 'data-testid': 'invoice-link' }, 'your invoices'), '.'))))
    )
  );
  return active && (provisioning(l) || l.billing === 'provisioning');
}

// ---------- a term rental ----------

function releaseControls(r, onDone) {
  if (r.state === 'released') return null;
  return confirmedAction({
    testid: 'release', label: 'Release…', alertClass: 'alert-error', title: 'Confirm release',
    question: 'Release this rental now?',
    detail: " Nothing of the term is refunded. The machine stops at once and its disk's encryption key is destroyed: the data on it cannot be recovered.",
    confirmLabel: 'Release, no refund', keepLabel: 'Keep it', onDone,
    run: () => api('POST', `/v1/rentals/${r.id}/release`, { confirm: true }),
  });
}

function rentalConnectText(r) {
  if (r.state === 'released') return 'Released: the machine is gone and its data destroyed.';
  if (r.state === 'stopped') return 'On hold: pay the renewal to run it again.';
  if (r.instance.error) return `It failed to start: ${r.instance.error}`;
  if (r.state === 'provisioning') return 'Starting on its node: the SSH line appears here as soon as it runs.';
  return `Running on node ${r.node_id}. No SSH line is reported for it yet: it appears here once the node's host agent runs the machine.`;
}

function invoiceLinks(charges) {
  const withDoc = (charges || []).filter((c) => c.invoice && c.invoice.number);
  if (!withDoc.length) return h('span', { class: 'muted' }, 'none issued yet');
  return h('ul', { class: 'plain-list' }, withDoc.map((c) =>
    h('li', null,
      h('a', { href: c.invoice.html, 'data-testid': 'invoice-link' }, `${c.invoice.number.startsWith('CN-') ? 'Credit note' : 'Invoice'} ${c.invoice.number}`),
      ` (${c.kind.replace(/_/g, ' ')}, term ${c.period}, ${amount(c.amount.gross, c.amount.currency)}) · `,
      h('a', { href: c.invoice.pdf }, 'PDF'))));
}

async function showRental(id) {
  const [r, images] = await Promise.all([api('GET', '/v1/rentals/' + encodeURIComponent(id)), loadImages()]);
  setServerClock(r.as_of);
  const title = `Rental #${r.id}: ${count(r.count)} × ${r.gpu}`;
  $('#instance-title').textContent = title;
  $('#instance-sub').textContent = `A term rental of the fleet in ${r.region}, by the ${r.term}, since ${timestamp(r.created_at)}.`;
  document.title = `${title} — gpuhub`;
  const ssh = r.state === 'active' && r.instance.connection && r.instance.connection.ssh;
  const next = r.next_transition;
  const open = r.renewal && r.renewal.status === 'open' ? r.renewal : null;
  replace(
    $('#instance'),
    h('div', { class: 'instance', dataset: { kind: 'rental', id: String(r.id), status: r.state } },
      card('State', 'state',
        h('p', null, h('span', { class: 'badge ' + (RENTAL_BADGE[r.state] || '') }, r.state)),
        // The steps while it starts, or once the node's agent has reported any (as the account page).
        r.provisioning && (r.state === 'provisioning' || (r.state === 'active' && (r.provisioning.steps || []).length > 1)) ? provisioningSteps(r, 'rental') : null,
        connectBlock(ssh, `rental #${r.id}`, rentalConnectText(r)),
        releaseControls(r, () => show())),
      h('div', { class: 'grid grid-2' },
        card('Machine', 'machine',
          h('dl', { class: 'facts' },
            fact('GPUs', `${count(r.count)} × ${r.gpu}`, h('span', { class: 'muted small' }, ` in ${r.region} (node ${r.node_id}, card${r.cards.length === 1 ? '' : 's'} ${r.cards.join(', ')})`)),
            fact('Local NVMe', `${count(r.instance.nvme_gb)} GB`, r.instance.extra_nvme_gb ? ` (${count(r.instance.extra_nvme_gb)} GB extra)` : ''),
            fact('Image and ports', launchCell({ ...r, status: r.state === 'active' ? 'active' : r.state, connection: r.instance.connection }, images.images)))),
        card('Paid', 'paid',
          h('dl', { class: 'facts' },
            fact('Price', h('strong', { 'data-testid': 'term-net' }, amount(r.price.term_net || r.price.net)), ` net per ${r.term}`, r.price.discount_percent !== '0' ? ` (${r.price.discount_percent}% multi-card discount)` : ''),
            r.term_end ? fact('Paid until', h('span', { 'data-testid': 'paid-until' }, timestamp(r.term_end)), r.next_paid ? ' (and the next term is paid)' : '') : fact('Term', 'starts once the machine runs'),
            next ? fact('Next', h('span', { 'data-testid': 'next' }, `${NEXT_LABEL[next.what] || next.what} in `, countdownEl(next.at)), h('span', { class: 'muted small' }, ` (${timestamp(next.at)})`)) : null,
            fact('Auto-renew', r.auto_renew ? 'on: the next term is paid from your wallet' : 'off ', r.auto_renew ? '' : h('a', { href: '/account/#rental-' + r.id }, 'change it on your account')),
            open ? fact('Renewal', h('strong', null, `${amount(open.amount.gross, open.amount.currency)} due ${timestamp(open.due_at)}`), ' ', h('a', { href: '/account/#rental-' + r.id }, 'Pay it')) : null,
            r.state === 'stopped' && r.hold_until ? fact('On hold', `until ${timestamp(r.hold_until)}; after that its data is destroyed`) : null,
            fact('Invoices', invoiceLinks(r.charges)))))
    )
  );
  return r.state === 'provisioning' || (r.state === 'active' && !ssh && r.provisioning && r.provisioning.step !== 'simulated' && r.provisioning.step !== 'failed');
}

// ---------- the list ----------

async function showList() {
  const customer = session.user.roles.includes('customer');
  if (!customer) {
    replace($('#instance'), h('div', { class: 'card' }, empty('Instances are a customer\'s: this account sells GPU time. '), h('a', { href: '/sell/' }, 'Your machines on the sell page')));
    return false;
  }
  const [leases, rentals] = await Promise.all([api('GET', '/v1/leases?limit=100'), api('GET', '/v1/rentals?limit=100')]);
  setServerClock(rentals.as_of);
  const rows = [
    ...rentals.rentals.map((r) => ({ href: `/instances/?rental=${r.id}`, name: `Rental #${r.id}`, what: `${count(r.count)} × ${r.gpu}`, where: r.region, state: r.state, live: r.state !== 'released', until: r.term_end, at: r.created_at })),
    ...leases.leases.map((l) => ({ href: `/instances/?lease=${l.id}`, name: `Lease #${l.id}`, what: `${count(l.gpus)} × ${l.gpu}`, where: 'spot', state: l.status === 'active' ? l.billing : END_REASON[l.end_reason] || l.status, live: l.status === 'active', until: l.status === 'active' ? l.paid_until : null, at: l.started_at })),
  ].sort((a, b) => (a.live !== b.live ? (a.live ? -1 : 1) : Date.parse(b.at) - Date.parse(a.at)));
  if (!rows.length) {
    replace($('#instance'), h('div', { class: 'card' }, empty('No machines yet.'), h('p', null, h('a', { class: 'btn', href: '/' }, 'Rent by the week or month'), ' ', h('a', { class: 'btn btn-secondary', href: '/market/' }, 'Buy spot hours'))));
    return false;
  }
  replace($('#instance'), h('section', { class: 'card' },
    table([
      { label: 'Instance', th: true, cell: (x) => h('a', { href: x.href }, x.name) },
      { label: 'GPUs', cls: 'nowrap', cell: (x) => x.what },
      { label: 'Where', cell: (x) => x.where },
      { label: 'State', cell: (x) => h('span', { class: 'badge' + (x.live ? ' badge-good' : '') }, x.state) },
      { label: 'Paid until', cls: 'nowrap', cell: (x) => (x.until && x.live ? timestamp(x.until) : '—') },
      { label: '', cell: (x) => h('a', { class: 'btn btn-small btn-secondary', href: x.href, 'aria-label': `Open the console of ${x.name}` }, 'Open') },
    ], rows, { rowClass: (x) => (x.live ? null : 'muted'), stack: true })));
  return false;
}

// ---------- page ----------

async function show() {
  const q = new URLSearchParams(location.search);
  const lease = q.get('lease');
  const rental = q.get('rental');
  $('#all-instances').hidden = !(lease || rental);
  clearTimeout(timer);
  let fast = false;
  try {
    if (lease) fast = await showLease(lease);
    else if (rental) fast = await showRental(rental);
    else fast = await showList();
  } catch (err) {
    const what = lease ? `Lease #${lease}` : rental ? `Rental #${rental}` : 'Your instances';
    replace($('#instance'), errorBox(err.status === 404 ? `${what} is not one of yours (or does not exist).` : `${what} could not be loaded: ${err.message}`),
      h('p', null, h('a', { href: '/instances/' }, 'All your instances')));
    if (err.status === 401) return showSignedOut();
  }
  $('#instance').dataset.loads = String(Number($('#instance').dataset.loads || 0) + 1);
  timer = setTimeout(function again() {
    // Not while the page is hidden or a stop/release is being confirmed (it would vanish).
    if (document.hidden || document.querySelector('#instance [role="alertdialog"]')) timer = setTimeout(again, FAST_MS);
    else show();
  }, fast ? FAST_MS : SLOW_MS);
}

function showSignedOut() {
  $('#instance-signed-out').hidden = false;
  $('#instance-login').href = '/account/?next=' + encodeURIComponent(location.pathname + location.search);
  replace($('#instance'));
}

async function main() {
  session = await currentSession();
  if (!session) return showSignedOut();
  setInterval(() => {
    for (const el of document.querySelectorAll('[data-countdown]')) el.textContent = until(el.dataset.countdown);
  }, 1000);
  await show();
}

main();
