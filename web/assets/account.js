// Account: sign up, log in, log out (cookie session), wallets, top-up invoices, billing details
// and tax documents (billing.js) and the transfer history. Balances and amounts are the API's decimal strings, formatted for display only.
import { api, currentSession, logIn, logOut, newIdempotencyKey, RequestKey } from './api.js';
import { h, $, replace, table, showFormError, clearFormErrors, setBusy, errorBox, empty } from './dom.js';
import { money, timestamp } from './format.js';
import { startRentals } from './rentals.js';
import { initSshKeys, loadSshKeys } from './ssh_keys.js';
import { initApiKeys, loadApiKeys } from './api_keys.js';
import { initAuditLog, loadAuditLog } from './audit_log.js';
import { initTwoFactor, loadTwoFactor } from './two_factor.js';
import { initBilling, loadBillingProfile, loadDocuments } from './billing.js';
import { startStorage } from './storage.js';
import { initAccountTabs } from './account_tabs.js';
import { startAlertsTab } from './alerts.js';
import { loadQuoteRequests } from './quote_requests.js';

const POLL_MS = 3000;
const OPEN_INVOICE = new Set(['new', 'processing']);
const TRANSFER_LABEL = {
  topup: 'Top-up',
  manual_credit: 'Manual credit',
  fx: 'Currency conversion',
};
const ROLE_LABEL = { customer: 'Customer', provider: 'Provider', admin: 'Admin' };
const STATUS_BADGE = {
  new: 'badge-accent',
  processing: 'badge-warn',
  settled: 'badge-good',
  expired: 'badge',
  invalid: 'badge-bad',
};

let nextCursor = null;
let pollTimer = 0;
const topupKey = new RequestKey();

function show(which) {
  $('#account-loading').hidden = true;
  $('#signed-out').hidden = which !== 'out';
  $('#signed-in').hidden = which !== 'in';
}

// ---------- signed out ----------

async function onLogin(e) {
  e.preventDefault();
  const form = e.currentTarget;
  clearFormErrors(form);
  const username = form.elements.username.value.trim();
  const password = form.elements.password.value;
  if (!username) return showFormError(form, { field: 'username', message: 'Enter your username.' });
  if (!password) return showFormError(form, { field: 'password', message: 'Enter your password.' });
  const button = form.querySelector('button[type="submit"]');
  setBusy(button, true);
  try {
    const session = await logIn(username, password, form.elements.totp_code.value.trim());
    form.reset();
    $('#login-totp').hidden = true;
    if (goNext()) return;
    await showAccount(session);
  } catch (err) {
    // Two-factor: the password was right and the code is missing or wrong; ask for it.
    if (err.field === 'totp_code') {
      $('#login-totp').hidden = false;
      showFormError(form, err);
      form.elements.totp_code.focus();
      return;
    }
    // A wrong username or password is one answer for both (the API does not say which).
    showFormError(form, err.status === 401 ? { message: err.message } : err);
  } finally {
    setBusy(button, false);
  }
}

async function onSignup(e) {
  e.preventDefault();
  const form = e.currentTarget;
  clearFormErrors(form);
  const username = form.elements.username.value.trim();
  const password = form.elements.password.value;
  if (!username) return showFormError(form, { field: 'username', message: 'Choose a username.' });
  if (!password) return showFormError(form, { field: 'password', message: 'Choose a password.' });
  const roles = form.elements.provider.checked ? ['customer', 'provider'] : ['customer'];
  const button = form.querySelector('button[type="submit"]');
  setBusy(button, true);
  try {
    await api('POST', '/v1/accounts', { username, password, roles }, { idempotencyKey: newIdempotencyKey() });
    const session = await logIn(username, password);
    form.reset();
    if (goNext()) return;
    await showAccount(session, `Welcome, ${session.user.username}! Your account is ready: top up a wallet to rent GPUs.`);
  } catch (err) {
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

// ---------- signed in ----------

async function showAccount(session, welcome) {
  show('in');
  $('#who').textContent = session.user.username;
  const roles = session.user.roles;
  replace(
    $('#roles'),
    h('span', { class: 'role-badges', 'aria-label': 'Roles' }, roles.map((r) => h('span', { class: 'badge badge-accent' }, ROLE_LABEL[r] || r))),
    ` Signed in until ${timestamp(session.expires_at)}. `,
    roles.includes('provider')
      ? h('a', { href: '/sell/' }, 'Sell GPU time')
      : h('a', { href: '/sell/' }, 'Want to sell GPU time?')
  );
  if (welcome) $('#roles').prepend(h('span', { class: 'badge badge-good' }, 'Account created'), ' ');
  document.title = `${session.user.username} — gpuhub`;
  await Promise.all([
    loadWallets(),
    loadTopups(),
    loadTransfers(true),
    startRentals(() => Promise.all([loadWallets(), loadTransfers(true)]), roles.includes('customer')),
    startStorage(() => Promise.all([loadWallets(), loadTransfers(true)]), roles.includes('customer')),
    loadSshKeys(),
    loadApiKeys(),
    loadAuditLog(true),
    loadTwoFactor(),
    loadBillingProfile(),
    loadDocuments(),
    startAlertsTab(),
    loadQuoteRequests(),
  ]);
}

// After signing in from a page that sent the visitor here (/account/?next=/rent/?gpu=...): back
// there. Only a path of this site, never another origin.
function goNext() {
  const next = new URLSearchParams(location.search).get('next');
  if (next && next.startsWith('/') && !next.startsWith('//') && !next.includes('\\')) {
    location.assign(next);
    return true;
  }
  return false;
}

async function loadWallets() {
  const slot = $('#wallets');
  try {
    const data = await api('GET', '/v1/wallets');
    // The header's balance follows (layout.js).
    document.dispatchEvent(new CustomEvent('gpuhub:wallets'));
    if (!data.wallets.length) return replace(slot, empty('No wallets yet: your first top-up opens one.'));
    replace(
      slot,
      h(
        'div',
        { class: 'wallets' },
        data.wallets.map((w) =>
          h(
            'div',
            { class: 'wallet', dataset: { currency: w.currency } },
            h('div', { class: 'currency' }, w.currency),
            h('div', { class: 'available', 'data-testid': 'balance-' + w.currency }, money(w.available, w.currency)),
            h('div', { class: 'held' }, money(w.held, w.currency) + ' held for open bids')
          )
        )
      )
    );
  } catch (err) {
    replace(slot, errorBox('Wallets could not be loaded: ' + err.message));
  }
}

function invoiceBadge(status) {
  return h('span', { class: 'badge ' + (STATUS_BADGE[status] || '') }, status);
}

function renderInvoice(inv) {
  const open = OPEN_INVOICE.has(inv.status);
  replace(
    $('#invoice'),
    h(
      'div',
      { class: 'invoice', dataset: { invoice: inv.invoice_id, status: inv.status } },
      h('strong', null, 'Invoice for ', money(inv.amount, inv.currency)),
      ' ',
      invoiceBadge(inv.status),
      h(
        'dl',
        null,
        h('dt', null, 'Invoice'),
        h('dd', { class: 'mono' }, inv.invoice_id),
        h('dt', null, 'Created'),
        h('dd', null, timestamp(inv.created_at))
      ),
      open
        ? [
            h('a', { class: 'btn', href: inv.checkout_url, target: '_blank', rel: 'noopener noreferrer' }, 'Pay with crypto'),
            h('p', { class: 'muted small' }, 'This page updates by itself when the payment is confirmed.'),
          ]
        : inv.status === 'settled'
          ? h('p', { class: 'alert alert-ok', role: 'status' }, `Paid: ${money(inv.credited || inv.amount, inv.currency)} added to your ${inv.currency} wallet.`)
          : h('p', { class: 'alert alert-warn', role: 'status' },
              `This invoice is ${inv.status}` +
                (inv.credited && inv.credited !== '0.00' ? `; ${money(inv.credited, inv.currency)} that arrived was credited` : '') +
                (inv.held && inv.held !== '0.00' ? `; ${money(inv.held, inv.currency)} is held for review` : '') +
                '; create a new one to top up.')
    )
  );
}

function pollInvoice(id) {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(async () => {
    try {
      const inv = await api('GET', '/v1/topups/' + encodeURIComponent(id));
      renderInvoice(inv);
      if (OPEN_INVOICE.has(inv.status)) return pollInvoice(id);
      await Promise.all([loadWallets(), loadTopups(), loadTransfers(true)]);
    } catch (err) {
      if (err.status !== 401) pollInvoice(id);
    }
  }, POLL_MS);
}

async function onTopup(e) {
  e.preventDefault();
  const form = e.currentTarget;
  clearFormErrors(form);
  const amount = form.elements.amount.value.trim();
  if (!amount) return showFormError(form, { field: 'amount', message: 'Enter an amount, such as 100.00.' });
  const button = form.querySelector('button[type="submit"]');
  setBusy(button, true);
  // One key per distinct request: a double submit of the same amount creates one invoice.
  const body = { amount, currency: form.elements.currency.value };
  try {
    const inv = await api('POST', '/v1/topups', body, { idempotencyKey: topupKey.for(body) });
    topupKey.done();
    form.reset();
    renderInvoice(inv);
    loadTopups();
    pollInvoice(inv.invoice_id);
  } catch (err) {
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

async function loadTopups() {
  const slot = $('#topups');
  try {
    const data = await api('GET', '/v1/topups');
    if (!data.topups.length) return replace(slot, empty('No invoices yet.'));
    replace(
      slot,
      table(
        [
          { label: 'Created', cls: 'nowrap', cell: (i) => timestamp(i.created_at) },
          { label: 'Invoice', cell: (i) => h('span', { class: 'mono' }, i.invoice_id) },
          { label: 'Amount', num: true, cell: (i) => money(i.amount, i.currency) },
          { label: 'Status', cell: (i) => invoiceBadge(i.status) },
          {
            label: '',
            cell: (i) => (OPEN_INVOICE.has(i.status) ? h('a', { href: i.checkout_url, target: '_blank', rel: 'noopener noreferrer' }, 'Pay') : ''),
          },
        ],
        data.topups,
        { stack: true }
      )
    );
  } catch (err) {
    replace(slot, errorBox('Invoices could not be loaded: ' + err.message));
  }
}

function transferLabel(t) {
  if (TRANSFER_LABEL[t.code]) return TRANSFER_LABEL[t.code];
  const s = String(t.code || t.kind).replace(/_/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

const TRANSFER_COLUMNS = [
  { label: 'Date', cls: 'nowrap', cell: (t) => timestamp(t.created_at) },
  { label: 'What', cell: (t) => [transferLabel(t), t.memo ? h('div', { class: 'muted small' }, t.memo) : null] },
  {
    label: 'Amount',
    num: true,
    cell: (t) => h('span', { class: t.direction === 'in' ? 'amount-in' : 'amount-out' }, (t.direction === 'in' ? '+' : '−') + money(t.amount, t.currency)),
  },
  { label: 'Account', cell: (t) => t.account.replace(/_/g, ' ') },
  { label: 'State', cell: (t) => h('span', { class: 'badge ' + (t.state === 'posted' ? 'badge-good' : t.state === 'pending' ? 'badge-warn' : '') }, t.state) },
];

async function loadTransfers(reset) {
  const slot = $('#transfers');
  const more = $('#more-transfers');
  if (reset) nextCursor = null;
  try {
    const q = new URLSearchParams({ limit: '25' });
    if (nextCursor) q.set('cursor', nextCursor);
    const data = await api('GET', '/v1/transfers?' + q);
    nextCursor = data.next_cursor;
    more.hidden = !nextCursor;
    if (reset) {
      if (!data.transfers.length) return replace(slot, empty('No transfers yet. Top up a wallet to get started.'));
      replace(slot, table(TRANSFER_COLUMNS, data.transfers, { stack: true }));
    } else {
      const tbody = slot.querySelector('tbody');
      const extra = table(TRANSFER_COLUMNS, data.transfers, { stack: true }).querySelector('tbody');
      for (const row of Array.from(extra.children)) tbody.appendChild(row);
    }
  } catch (err) {
    replace(slot, errorBox('Transfers could not be loaded: ' + err.message));
  }
}

// Demo mode or the coins the payment processor accepts (GET /v1/payments/methods).
async function loadPaymentMode() {
  const slot = $('#payment-mode');
  try {
    const data = await api('GET', '/v1/payments/methods');
    if (data.mode === 'demo') {
      slot.dataset.mode = 'demo';
      replace(slot, h('span', { class: 'badge badge-warn' }, 'demo'), ' No payment processor is configured: invoices are settled by hand (demo mode).');
    } else {
      slot.dataset.mode = 'btcpay';
      const coins = data.methods.map((m) => m.label).join(', ');
      replace(slot, 'Accepted: ', h('strong', null, coins || 'no coin is enabled at the processor'), ' (through BTCPay Server).');
    }
  } catch (err) {
    replace(slot, 'The accepted coins could not be loaded: ' + err.message);
  }
}

async function onLogout() {
  const button = $('#logout');
  setBusy(button, true);
  try {
    await logOut();
  } catch (err) {
    /* the cookie is cleared either way */
  } finally {
    setBusy(button, false);
  }
  clearTimeout(pollTimer);
  replace($('#invoice'));
  document.title = 'Your account — gpuhub';
  show('out');
  $('#login-username').focus();
}

async function main() {
  $('#login-form').addEventListener('submit', onLogin);
  $('#signup-form').addEventListener('submit', onSignup);
  $('#topup-form').addEventListener('submit', onTopup);
  $('#logout').addEventListener('click', onLogout);
  initSshKeys();
  initApiKeys();
  initAuditLog();
  initTwoFactor();
  $('#refresh-wallets').addEventListener('click', () => Promise.all([loadWallets(), loadTopups(), loadTransfers(true)]));
  $('#more-transfers').addEventListener('click', () => loadTransfers(false));
  initBilling();
  initAccountTabs();
  document.addEventListener('gpuhub:session', (e) => {
    if (!e.detail && !$('#signed-in').hidden) show('out');
  });
  const session = await currentSession();
  loadPaymentMode();
  if (session) await showAccount(session);
  else show('out');
}

main();
