// The quote request form (/quote/): a job larger than one 8-card node, sent to the operators for a
// price (POST /v1/quote-requests). Pages link here with the job in the query string
// (/quote/?model=405b&workload=full...), so the form opens filled in; the server recomputes the
// job and the page shows its figures. A signed-in account is needed (the answer arrives on it).
import { api, currentSession, RequestKey } from './api.js';
import { h, $, replace, showFormError, clearFormErrors, setBusy } from './dom.js';
import { decimal } from './format.js';
import { nodesTable, statusBadge } from './quote_requests.js';

const form = $('#quote-form');
const key = new RequestKey();
const TEXT = ['model', 'workload', 'precision', 'contact', 'note'];
const NUMBERS = ['context', 'batch', 'seq', 'tokens', 'epochs', 'tokens_per_day'];

// The job from the query string into the form (only the fields the form has).
function fillFromQuery() {
  const q = new URLSearchParams(location.search);
  for (const name of [...TEXT, ...NUMBERS]) {
    const v = q.get(name);
    const field = form.elements.namedItem(name);
    if (v !== null && field) field.value = v.slice(0, 200);
  }
}

function body() {
  const out = {};
  for (const name of TEXT) {
    const v = form.elements.namedItem(name).value.trim();
    if (v) out[name] = v;
  }
  for (const name of NUMBERS) {
    const v = form.elements.namedItem(name).value.trim();
    if (v) out[name] = /^\d+$/.test(v) ? Number(v) : v;  // a wrong value is the server's to name
  }
  return out;
}

function showResult(q) {
  replace(
    $('#quote-result'),
    h(
      'section',
      { class: 'card section', 'aria-labelledby': 'quote-sent-title', id: 'quote-sent' },
      h('div', { class: 'card-head' }, h('h2', { id: 'quote-sent-title' }, `Quote request #${q.id} sent`), statusBadge(q)),
      h('p', { class: 'quote-summary' }, h('strong', null, q.summary)),
      h('p', { class: 'muted small' }, `The server's own recomputation: ${decimal(q.required_gb, 0)} GB for the whole job. The operators answer with a price and terms on your account`, q.contact ? ` and at ${q.contact}` : '', '.'),
      nodesTable(q.sizing),
      h('p', null, h('a', { href: '/account/#quote-requests' }, 'Your quote requests'))
    )
  );
}

async function onSubmit(e) {
  e.preventDefault();
  clearFormErrors(form);
  const button = form.querySelector('button[type="submit"]');
  const job = body();
  setBusy(button, true);
  try {
    const q = await api('POST', '/v1/quote-requests', job, { idempotencyKey: key.for(job) });
    key.done();
    showResult(q);
    $('#quote-sent').scrollIntoView();
  } catch (err) {
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

async function main() {
  fillFromQuery();
  form.addEventListener('submit', onSubmit);
  const session = await currentSession();
  const notice = $('#quote-signin');
  if (!session) {
    const next = encodeURIComponent(location.pathname + location.search);
    replace(notice, 'Sign in to send it: the answer arrives on your account. ', h('a', { href: `/account/?next=${next}` }, 'Log in or create an account'));
    notice.hidden = false;
    form.querySelector('button[type="submit"]').disabled = true;
  }
}

main();
