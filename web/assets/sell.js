// Sell GPU time: a provider lists machines (POST /v1/machines), offers their GPUs on the spot
// exchange with an ask (POST /v1/asks), cancels it (DELETE /v1/asks/{id}), follows the leases on
// their machines and their earnings (GET /v1/earnings), and requests payouts (POST /v1/payouts).
// These endpoints need the provider role: an account without it is shown why, and can add it
// itself (POST /v1/accounts/me/roles). Every figure is the API's; the page only formats it.
import { api, currentSession, RequestKey } from './api.js';
import { h, $, replace, table, showFormError, clearFormErrors, setBusy, errorBox, empty, stat, copyableCommand } from './dom.js';
import { usd, money, integer, percent, timestamp } from './format.js';
import { loadMarkets, bestAsk } from './markets.js';
import { initPayouts, loadPayouts, loadDestinations } from './payouts.js';

const REFRESH_MS = 15000;
const ASK_WINDOW_DAYS = 30;
const ASK_BADGE = { open: 'badge-good', cancelled: '', expired: '' };
const LEASE_END = { stopped: 'stopped by customer', unpaid: 'ended: unpaid', no_fx_rate: 'ended: no exchange rate', window_ended: 'ended: ask window closed', not_started: 'ended: your host never ran it (nothing charged)' };

const machineForm = $('#machine-form');
const askForm = $('#ask-form');
const machineKey = new RequestKey();
const askKey = new RequestKey();

let markets = new Map();
let machines = [];
let feePpm = null;  // the exchange's fee per hour (GET /v1/earnings fee_percent), for the estimate
const enrolCommands = new Map();  // machine id -> the enrol command made on this page (a secret: memory only)
let refreshTimer = 0;

function show(which) {
  $('#sell-loading').hidden = true;
  $('#sell-signed-out').hidden = which !== 'out';
  $('#sell-not-provider').hidden = which !== 'customer';
  $('#sell-provider').hidden = which !== 'provider';
}

function isProvider(session) {
  return !!(session && session.user && session.user.roles.includes('provider'));
}

function priceText(p) {
  return p == null ? '—' : usd(p, 3);
}

// A whole number as the API wants it; anything else is sent as typed, so the API's message says
// what is wrong with it, next to the field.
function wholeNumber(text) {
  const t = String(text).trim();
  return /^\d{1,9}$/.test(t) ? Number(t) : t;
}

function badge(text, cls) {
  return h('span', { class: 'badge ' + (cls || '') }, text);
}

// ---------- the provider role ----------

async function onBecomeProvider(e) {
  e.preventDefault();
  const form = e.currentTarget;
  clearFormErrors(form);
  const button = $('#become-provider');
  setBusy(button, true);
  try {
    await api('POST', '/v1/accounts/me/roles', { role: 'provider' });
    const session = await currentSession({ refresh: true });
    await start(session, 'You are now a provider: list your first machine below.');
  } catch (err) {
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

// ---------- earnings ----------

async function loadEarnings() {
  const slot = $('#earnings');
  try {
    const e = await api('GET', '/v1/earnings');
    const fee = percent(e.fee_percent);
    feePpm = ppmOf(e.fee_percent);
    renderEstimate();
    $('#fee-note').textContent = `Platform fee: ${fee} of each hour`;
    $('#earnings-hint').textContent = `USD, after the platform's ${fee}`;
    $('#help-p-amount').textContent = `Available now: ${money(e.available, 'USD')}.`;
    replace(
      slot,
      stat('Available to pay out', money(e.available, 'USD'), 'good'),
      stat('Earned', money(e.net, 'USD')),
      stat('GPU-hours sold', integer(e.gpu_hours)),
      stat('Leases running', integer(e.active_leases))
    );
    replace(
      $('#earnings-detail'),
      `Customers paid ${money(e.gross, 'USD')}; the platform fee (${fee}) was ${money(e.fees, 'USD')}. `,
      `Payouts: ${money(e.pending_payouts, 'USD')} pending, ${money(e.paid_out, 'USD')} paid out.`
    );
    slot.dataset.available = e.available;
  } catch (err) {
    replace(slot, errorBox('Earnings could not be loaded: ' + err.message));
  }
}

// ---------- machines ----------

function machineLabel(m) {
  return `#${m.id} · ${integer(m.gpus)} × ${m.gpu} · ${m.region}`;
}

function fillMachineSelect(preferred) {
  const select = askForm.elements.machine_id;
  const keep = preferred != null ? String(preferred) : select.value;
  const options = machines.map((m) =>
    h(
      'option',
      { value: String(m.id), disabled: m.open_ask_id != null, dataset: { gpu: m.gpu } },
      machineLabel(m) + (m.open_ask_id != null ? ` (ask #${m.open_ask_id} open)` : '')
    )
  );
  const free = machines.filter((m) => m.open_ask_id == null);
  if (!machines.length) options.unshift(h('option', { value: '' }, 'List a machine first'));
  else if (!free.length) options.unshift(h('option', { value: '' }, 'Every machine has an open ask'));
  replace(select, options);
  const wanted = free.find((m) => String(m.id) === keep) || free[free.length - 1];
  select.value = wanted ? String(wanted.id) : '';
  select.disabled = !machines.length;
  if (machines.length && !free.length) {
    replace($('#help-a-price'), 'Every machine has an open ask: cancel one below to change its price.');
  } else {
    syncPriceHelp();
  }
  renderEstimate();
}

// "10.00" (percent) -> 100000 (parts per million), exactly; null when it is not such a decimal.
function ppmOf(percentText) {
  const m = /^(\d{1,3})(?:\.(\d{1,4}))?$/.exec(String(percentText));
  return m ? Number(m[1]) * 10000 + Number((m[2] || '').padEnd(4, '0')) : null;
}

// micro-USD (BigInt) -> "12.345678"
function microsText(micros) {
  const neg = micros < 0n;
  const v = neg ? -micros : micros;
  return (neg ? '-' : '') + (v / 1000000n).toString() + '.' + (v % 1000000n).toString().padStart(6, '0');
}

// What an ask at the typed price would pay while all the chosen machine's GPUs are leased: the
// exchange's own arithmetic on exact integers (per hour: GPUs × price, the platform's fee rounded
// half-even on that total, the rest to the provider), then a day and 30 days of such hours. An
// estimate: a provider earns the hours that are leased.
function renderEstimate() {
  const slot = $('#ask-estimate');
  const m = machines.find((x) => String(x.id) === askForm.elements.machine_id.value);
  const price = askForm.elements.price_usd_per_gpu_hour.value.trim();
  const p = /^(\d{1,4})(?:\.(\d{1,3}))?$/.exec(price);
  if (!m || !p || feePpm == null || !(Number(p[1]) > 0 || Number(p[2] || 0) > 0)) return replace(slot);
  const milli = BigInt(p[1]) * 1000n + BigInt((p[2] || '').padEnd(3, '0'));
  const total = milli * 1000n * BigInt(m.gpus);
  const scaled = total * BigInt(feePpm);
  let fee = scaled / 1000000n;
  const rest = scaled % 1000000n;
  if (rest * 2n > 1000000n || (rest * 2n === 1000000n && fee % 2n === 1n)) fee += 1n;
  const net = total - fee;
  replace(slot,
    h('strong', null, `You get ${money(microsText(net), 'USD')} an hour`),
    ` while all ${integer(m.gpus)} GPUs of machine #${m.id} are leased at ${priceText(microsText(milli * 1000n))}/GPU-h (customers pay ${money(microsText(total), 'USD')}, the platform's fee is ${money(microsText(fee), 'USD')}): `,
    `${money(microsText(net * 24n), 'USD')} a day, ${money(microsText(net * 720n), 'USD')} for 30 days. An estimate: you earn the hours that are leased.`);
}

function syncPriceHelp() {
  const m = machines.find((x) => String(x.id) === askForm.elements.machine_id.value);
  const help = $('#help-a-price');
  if (!m) return replace(help, 'Up to 3 decimals.');
  const best = bestAsk(markets.get(m.gpu));
  replace(
    help,
    best ? `Up to 3 decimals. Best offer in the ${m.gpu} market now: ${priceText(best)}. ` : `Up to 3 decimals. Nobody offers ${m.gpu} right now. `,
    h('a', { href: '/market/?gpu=' + encodeURIComponent(m.gpu) }, 'See the book')
  );
}

function offerButton(m) {
  if (m.open_ask_id != null) {
    // An open ask of a machine that is offline or held offers nothing until that clears.
    const held = m.offline_since || m.hold_reason;
    return h('span', { class: 'nowrap' }, held ? badge('held off the book', 'badge-warn') : badge('on the book', 'badge-good'), ` ask #${m.open_ask_id}`);
  }
  return h(
    'button',
    {
      type: 'button',
      class: 'btn btn-small btn-secondary',
      'aria-label': `Offer the GPUs of machine #${m.id}`,
      onclick: () => {
        askForm.elements.machine_id.value = String(m.id);
        syncPriceHelp();
        renderEstimate();
        askForm.elements.price_usd_per_gpu_hour.focus();
      },
    },
    'Offer'
  );
}

async function loadMachines(preferred) {
  const slot = $('#machines');
  try {
    const data = await api('GET', '/v1/machines');
    machines = data.machines;
    fillMachineSelect(preferred);
    if (!machines.length) return replace(slot, empty('No machines yet. List one above: its GPUs can then be offered on the market.'));
    replace(
      slot,
      table(
        [
          { label: 'Machine', th: true, cell: (m) => `#${m.id}` },
          { label: 'GPUs', cls: 'nowrap', cell: (m) => listedAndMeasured(`${integer(m.gpus)} × ${m.gpu}`, measuredGpus(m)) },
          { label: 'Region', cell: (m) => m.region },
          { label: 'vCPUs', num: true, cell: (m) => listedAndMeasured(integer(m.vcpus), measuredVcpus(m)) },
          { label: 'RAM', num: true, cell: (m) => listedAndMeasured(integer(m.ram_gb) + ' GB', measuredRam(m)) },
          { label: 'Disk', num: true, cell: (m) => listedAndMeasured(integer(m.disk_gb) + ' GB', measuredDisk(m)) },
          { label: 'Leased', num: true, cell: (m) => `${integer(m.gpus_leased)} of ${integer(m.gpus)}` },
          { label: 'Agent', cell: agentCell },
          { label: 'Selling', cell: sellingCell },
          { label: 'Ask', cell: offerButton },
        ],
        machines,
        { stack: true }
      )
    );
  } catch (err) {
    replace(slot, errorBox('Machines could not be loaded: ' + err.message));
  }
}

// ---------- the host agent of each machine ----------

const AGENT_BADGE = { online: 'badge-good', offline: 'badge-bad', revoked: 'badge-bad', simulated: 'badge-warn' };

// What the last heartbeat measured, beside what the listing says (null without an agent).
function inventoryOf(m) {
  return (m.agent && m.agent.inventory) || null;
}
function measuredGpus(m) {
  const inv = inventoryOf(m);
  if (!inv) return null;
  const models = {};
  for (const g of inv.gpus || []) models[g.name] = (models[g.name] || 0) + 1;
  return Object.entries(models).map(([name, n]) => `${integer(n)} × ${name}`).join(', ') || 'no GPU';
}
function measuredVcpus(m) {
  const inv = inventoryOf(m);
  return inv && inv.vcpus ? integer(inv.vcpus) : null;
}
function measuredRam(m) {
  const inv = inventoryOf(m);
  // MiB as the kernel counts them, in GB (10^9 bytes) as listings are.
  return inv && inv.ram_mib ? integer(Math.floor((inv.ram_mib * 1048576) / 1e9)) + ' GB' : null;
}
function measuredDisk(m) {
  const inv = inventoryOf(m);
  return inv && inv.disk_total_gb ? `${integer(inv.disk_total_gb)} GB (${integer(inv.nvme_free_gb)} GB free)` : null;
}
function listedAndMeasured(listed, measured) {
  if (measured == null) return listed;
  return h('span', null, listed, h('div', { class: 'hint' }, 'measured: ' + measured));
}

// What the machine's agent measured, and the enrol / revoke actions.
function agentCell(m) {
  const a = m.agent || { status: 'none' };
  if (a.status === 'simulated') {
    // The demo: nobody runs this machine; it trades as if a host did.
    return h(
      'div',
      null,
      badge('simulated host', AGENT_BADGE.simulated),
      h('span', { class: 'hint' }, ' ' + (a.label || 'demo: simulated host, no real machine')),
      h('div', { class: 'form-actions' }, h('button', { type: 'button', class: 'btn btn-small btn-secondary', 'aria-label': `Enrol an agent on machine #${m.id}`, onclick: (e) => enrolToken(m, e.currentTarget) }, 'Enrol an agent')),
      enrolCommand(m)
    );
  }
  if (a.status === 'none') {
    return h('div', null, h('button', { type: 'button', class: 'btn btn-small btn-secondary', 'aria-label': `Enrol an agent on machine #${m.id}`, onclick: (e) => enrolToken(m, e.currentTarget) }, 'Enrol an agent'), enrolCommand(m));
  }
  const gpus = (a.inventory && a.inventory.gpus) || [];
  const models = {};
  for (const g of gpus) models[g.name] = (models[g.name] || 0) + 1;
  const measured = Object.entries(models).map(([name, n]) => `${integer(n)} × ${name}`).join(', ') || 'no GPU';
  const parts = [
    badge(`agent ${a.status}`, AGENT_BADGE[a.status]),
    h('span', { class: 'hint' }, ` ${a.hostname || ''} · measured: ${measured}` + (a.last_seen ? ` · last seen ${timestamp(a.last_seen)}` : '')),
  ];
  for (const g of gpus) {
    if (!g.healthy) parts.push(h('div', { class: 'field-error' }, `GPU ${g.index} unhealthy: ${(g.health || []).join('; ')}`));
  }
  const actions = h('span', { class: 'form-actions' });
  if (a.status !== 'revoked') {
    const revoke = h('button', {
      type: 'button',
      class: 'btn btn-small btn-danger',
      'aria-label': `Revoke the agent of machine #${m.id}`,
      onclick: () => {
        replace(
          actions,
          h('button', { type: 'button', class: 'btn btn-small btn-danger', 'aria-label': `Confirm: revoke the agent of machine #${m.id}`, onclick: (e) => revokeAgent(m, e.currentTarget, actions) }, 'Confirm revoke'),
          h('button', { type: 'button', class: 'btn btn-small btn-secondary', onclick: () => replace(actions, revoke) }, 'Keep')
        );
      },
    }, 'Revoke');
    actions.appendChild(revoke);
  } else {
    actions.appendChild(h('button', { type: 'button', class: 'btn btn-small btn-secondary', onclick: (e) => enrolToken(m, e.currentTarget) }, 'Enrol again'));
  }
  return h('div', null, ...parts, actions, enrolCommand(m));
}

// Why GPUs of the machine are not sold: offline, held (the host reports fewer or other GPUs than
// listed), or blocked (unhealthy).
function sellingCell(m) {
  const why = [];
  if (m.offline_since) why.push(h('div', { class: 'field-error' }, `offline since ${timestamp(m.offline_since)}: its ask is off the book and its leases are not billed`));
  if (m.hold_reason) why.push(h('div', { class: 'field-error', role: 'note' }, 'held: ' + m.hold_reason));
  if (why.length) return h('div', null, ...why);
  if (m.blocked_gpus && m.blocked_gpus.length) return h('span', { class: 'hint' }, `GPU ${m.blocked_gpus.join(', ')} not sold (unhealthy)`);
  const status = m.agent && m.agent.status;
  return h('span', { class: 'hint' }, status === 'online' ? 'as listed' : status === 'simulated' ? 'as listed (simulated host)' : '—');
}

// A one-time enrol command for the machine, shown under it (in its agent cell, with a Copy
// button) until its agent is online; kept in memory only, so a refresh of the table keeps it.
async function enrolToken(m, button) {
  setBusy(button, true);
  try {
    // No Idempotency-Key: the answer is a secret the server does not keep; a retry makes another.
    const t = await api('POST', `/v1/machines/${m.id}/enrolment-tokens`, {});
    enrolCommands.set(m.id, { command: `gpuhub agent enroll --server ${location.origin} --token ${t.token}`, expires_at: t.expires_at });
    await loadMachines();
    $(`[data-testid="enrol-${m.id}"]`)?.scrollIntoView({ block: 'nearest' });
  } catch (err) {
    replace($('#machine-result'), errorBox(err.message));
  } finally {
    setBusy(button, false);
  }
}

function enrolCommand(m) {
  const e = enrolCommands.get(m.id);
  if (!e) return null;
  if (m.agent && m.agent.status === 'online') {
    enrolCommands.delete(m.id);
    return null;
  }
  return h('div', { class: 'enrol-command', 'data-testid': `enrol-${m.id}` },
    h('p', { class: 'small' }, 'Run this once on the machine (the token works once, until ', timestamp(e.expires_at), '), then ', h('code', null, 'gpuhub agent run'), ':'),
    copyableCommand(e.command, `the enrol command of machine #${m.id}`));
}

async function revokeAgent(m, button, cell) {
  setBusy(button, true);
  try {
    await api('DELETE', `/v1/machines/${m.id}/agent`);
    await loadMachines();
  } catch (err) {
    replace(cell, h('span', { class: 'field-error', role: 'alert' }, err.message));
  }
}

async function onMachine(e) {
  e.preventDefault();
  clearFormErrors(machineForm);
  replace($('#machine-result'));
  const f = machineForm.elements;
  for (const [name, what] of [['vcpus', 'the number of vCPUs'], ['ram_gb', 'the RAM in GB'], ['disk_gb', 'the disk size in GB'], ['gpus', 'the number of GPUs']]) {
    if (!f[name].value.trim()) return showFormError(machineForm, { field: name, message: `Enter ${what}.` });
  }
  const body = {
    gpu: f.gpu.value,
    gpus: wholeNumber(f.gpus.value),
    region: f.region.value,
    vcpus: wholeNumber(f.vcpus.value),
    ram_gb: wholeNumber(f.ram_gb.value),
    disk_gb: wholeNumber(f.disk_gb.value),
  };
  const button = $('#machine-submit');
  setBusy(button, true);
  try {
    const m = await api('POST', '/v1/machines', body, { idempotencyKey: machineKey.for(body) });
    machineKey.done();
    replace(
      $('#machine-result'),
      h(
        'div',
        { class: 'alert alert-ok', role: 'status' },
        h('strong', null, `Machine #${m.id} listed: `),
        `${integer(m.gpus)} × ${m.gpu} in ${m.region}. It is selected under “Offer its GPUs”: set your price to put it on the book.`
      )
    );
    await loadMachines(m.id);
  } catch (err) {
    if (err.status === 401 || err.status === 403) return main(true);
    showFormError(machineForm, err);
  } finally {
    setBusy(button, false);
  }
}

// ---------- asks ----------

// datetime-local wants "YYYY-MM-DDTHH:MM" in local time.
function localInputValue(date) {
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function defaultUntil() {
  const d = new Date(Date.now() + ASK_WINDOW_DAYS * 86400e3);
  d.setMinutes(0, 0, 0);
  return localInputValue(d);
}

async function onAsk(e) {
  e.preventDefault();
  clearFormErrors(askForm);
  replace($('#ask-result'));
  const f = askForm.elements;
  if (!f.machine_id.value) {
    const message = machines.length
      ? 'Every machine has an open ask: cancel one under “Your asks” to change its price, or list another machine.'
      : 'List a machine first, then offer its GPUs.';
    return showFormError(askForm, { field: 'machine_id', message });
  }
  const price = f.price_usd_per_gpu_hour.value.trim();
  if (!price) return showFormError(askForm, { field: 'price_usd_per_gpu_hour', message: 'Enter your price per GPU-hour, such as 2.900.' });
  if (!f.available_until.value) return showFormError(askForm, { field: 'available_until', message: 'Choose until when the GPUs are available.' });
  const until = new Date(f.available_until.value);
  const body = {
    machine_id: Number(f.machine_id.value),
    price_usd_per_gpu_hour: price,
    available_until: Number.isNaN(until.getTime()) ? f.available_until.value : until.toISOString(),
  };
  if (f.min_gpus.value.trim()) body.min_gpus = wholeNumber(f.min_gpus.value);
  const button = $('#ask-submit');
  setBusy(button, true);
  try {
    const ask = await api('POST', '/v1/asks', body, { idempotencyKey: askKey.for(body) });
    askKey.done();
    const filled = ask.filled_lease_ids || [];
    replace(
      $('#ask-result'),
      h(
        'div',
        { class: 'alert alert-ok', role: 'status' },
        h('strong', null, `Ask #${ask.id} is on the ${ask.gpu} book `),
        `at ${priceText(ask.price_usd_per_gpu_hour)}/GPU-h with ${integer(ask.gpus_offered)} GPUs offered until ${timestamp(ask.available_until)}. `,
        filled.length ? `It filled ${filled.length === 1 ? 'a waiting bid at once (lease #' + filled[0] + ')' : filled.length + ' waiting bids at once'}. ` : '',
        h('a', { href: '/market/?gpu=' + encodeURIComponent(ask.gpu) }, 'See it on the market')
      )
    );
    f.price_usd_per_gpu_hour.value = '';
    markets = await loadMarkets({ refresh: true });
    await Promise.all([loadMachines(), loadAsks(), loadEarnings(), loadLeases()]);
  } catch (err) {
    if (err.status === 401 || err.status === 403) return main(true);
    showFormError(askForm, err);
  } finally {
    setBusy(button, false);
  }
}

function cancelButton(ask) {
  if (ask.status !== 'open') return '';
  return h(
    'button',
    { type: 'button', class: 'btn btn-small btn-danger', 'aria-label': `Cancel ask #${ask.id}`, onclick: (e) => cancelAsk(ask, e.currentTarget) },
    'Cancel'
  );
}

async function cancelAsk(ask, button) {
  setBusy(button, true);
  try {
    await api('DELETE', '/v1/asks/' + ask.id);
    markets = await loadMarkets({ refresh: true });
    await Promise.all([loadAsks(), loadMachines()]);
    // The focus was on the button that is gone: keep it in the table.
    $('#asks-title').setAttribute('tabindex', '-1');
    $('#asks-title').focus();
  } catch (err) {
    setBusy(button, false);
    button.replaceWith(h('span', { class: 'field-error', role: 'alert' }, err.message));
  }
}

async function loadAsks() {
  const slot = $('#asks');
  try {
    const data = await api('GET', '/v1/asks');
    if (!data.asks.length) return replace(slot, empty('No asks yet. Offer a machine’s GPUs above to put them on the book.'));
    // Open asks first, then the closed ones, newest first.
    const asks = data.asks.slice().sort((a, b) => (a.status === 'open') !== (b.status === 'open') ? (a.status === 'open' ? -1 : 1) : b.id - a.id);
    replace(
      slot,
      table(
        [
          { label: 'Ask', th: true, cell: (a) => `#${a.id}` },
          { label: 'Machine', cell: (a) => `#${a.machine_id}` },
          { label: 'GPU', cls: 'nowrap', cell: (a) => a.gpu },
          { label: 'Price / GPU-h', num: true, cell: (a) => priceText(a.price_usd_per_gpu_hour) },
          { label: 'Smallest rental', num: true, cell: (a) => integer(a.min_gpus) },
          { label: 'GPUs offered', num: true, cell: (a) => integer(a.gpus_offered) },
          { label: 'Until', cls: 'nowrap', cell: (a) => timestamp(a.available_until) },
          { label: 'Status', cell: (a) => badge(a.status, ASK_BADGE[a.status]) },
          { label: '', cell: cancelButton },
        ],
        asks,
        { stack: true, rowClass: (a) => (a.status === 'open' ? null : 'muted') }
      )
    );
  } catch (err) {
    replace(slot, errorBox('Asks could not be loaded: ' + err.message));
  }
}

// ---------- leases on my machines ----------

function leaseStatus(l) {
  if (l.status === 'active' && l.billing === 'provisioning') return badge('waiting for your host', 'badge-warn');
  if (l.status === 'active' && l.billing === 'paused') return badge(l.workload_down ? 'paused: container stopped' : 'paused: machine offline', 'badge-warn');
  if (l.status === 'active') return badge('running', 'badge-good');
  return badge(LEASE_END[l.end_reason] || l.status);
}

async function loadLeases() {
  const slot = $('#provider-leases');
  try {
    const data = await api('GET', '/v1/leases?as=provider');
    if (!data.leases.length) return replace(slot, empty('No leases yet. When a customer’s bid meets one of your asks, the lease shows here.'));
    replace(
      slot,
      table(
        [
          { label: 'Lease', th: true, cell: (l) => `#${l.id}` },
          { label: 'GPUs', cls: 'nowrap', cell: (l) => `${integer(l.gpus)} × ${l.gpu}` },
          { label: 'Machine', cell: (l) => `#${l.machine_id}` },
          { label: 'Price / GPU-h', num: true, cell: (l) => priceText(l.price_usd_per_gpu_hour) },
          { label: 'You get / hour', num: true, cell: (l) => money(l.net_usd_per_hour, 'USD') },
          { label: 'Status', cell: leaseStatus },
          { label: 'Started', cls: 'nowrap', cell: (l) => timestamp(l.started_at) },
          { label: 'Hours paid', num: true, cell: (l) => integer(l.hours_paid) },
          { label: 'Earned', num: true, cell: (l) => money(l.earned_usd, 'USD') },
        ],
        data.leases,
        { stack: true, rowClass: (l) => (l.status === 'active' ? null : 'muted') }
      )
    );
  } catch (err) {
    replace(slot, errorBox('Leases could not be loaded: ' + err.message));
  }
}

// ---------- page ----------

async function loadChoices() {
  const gpuSelect = machineForm.elements.gpu;
  const regionSelect = machineForm.elements.region;
  const [m, catalog] = await Promise.all([loadMarkets(), api('GET', '/v1/catalog').catch(() => null)]);
  markets = m;
  const names = [...markets.values()].filter((x) => x.listed !== false).map((x) => x.gpu);
  replace(gpuSelect, names.map((n) => h('option', { value: n }, n)));
  if (markets.has('H100 SXM')) gpuSelect.value = 'H100 SXM';
  const regions = catalog ? catalog.regions : [];
  replace(regionSelect, regions.map((r) => h('option', { value: r.code }, `${r.code} (${r.city})`)));
  if (!names.length) replace(machineForm.querySelector('.form-alert'), 'The exchange lists no GPU models right now, so no machine can be listed.');
}

function scheduleRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    if (!document.hidden && !$('#sell-provider').hidden) await Promise.all([loadEarnings(), loadLeases(), loadMachines()]);
    scheduleRefresh();
  }, REFRESH_MS);
}

async function start(session, welcome) {
  if (!session) return show('out');
  if (!isProvider(session)) {
    $('#np-who').textContent = session.user.username;
    $('#np-roles').textContent = session.user.roles.join(', ');
    return show('customer');
  }
  show('provider');
  if (welcome) replace($('#machine-result'), h('div', { class: 'alert alert-ok', role: 'status' }, welcome));
  if (!askForm.elements.available_until.value) askForm.elements.available_until.value = defaultUntil();
  await loadChoices();
  await Promise.all([loadEarnings(), loadMachines(), loadAsks(), loadLeases(), loadPayouts(), loadDestinations()]);
  scheduleRefresh();
}

let wired = false;

async function main(refresh = false) {
  if (!wired) {
    wired = true;
    $('#provider-form').addEventListener('submit', onBecomeProvider);
    machineForm.addEventListener('submit', onMachine);
    askForm.addEventListener('submit', onAsk);
    askForm.elements.machine_id.addEventListener('change', () => {
      syncPriceHelp();
      renderEstimate();
    });
    initPayouts({ paid: () => loadEarnings(), signedOut: () => main(true) });
    askForm.elements.price_usd_per_gpu_hour.addEventListener('input', renderEstimate);
    document.addEventListener('gpuhub:session', (e) => {
      if (!e.detail) show('out');
    });
  }
  await start(await currentSession({ refresh }));
}

main();
