// Multi-node quote requests (POST/GET /v1/quote-requests): how a request reads on the quote page
// and in the account's list, and the list itself (/account/#quote-requests). Every figure is the
// server's recomputation of the job (fit/quote.h), never one computed here.
import { api } from './api.js';
import { h, $, replace, table, errorBox, empty, setBusy } from './dom.js';
import { usd, decimal, integer, timestamp } from './format.js';

const STATUS_BADGE = { open: 'badge-warn', answered: 'badge-good', declined: '', withdrawn: '' };

export function statusBadge(q) {
  return h('span', { class: 'badge ' + (STATUS_BADGE[q.status] || '') }, q.status);
}

// The nodes of each card that hold the job, cheapest first, as the server worked them out.
export function nodesTable(sizing) {
  if (!sizing || !sizing.nodes || !sizing.nodes.length) return empty('No card of the fleet rents 8-card nodes for this job.');
  return table(
    [
      { label: 'Nodes', th: true, cell: (n) => n.configuration },
      { label: 'Memory', num: true, cell: (n) => decimal(n.vram_gb, 0) + ' GB' },
      { label: 'Per card', num: true, cell: (n) => decimal(n.per_card_gb, 1) + ' GB' },
      { label: 'List price', num: true, cell: (n) => usd(n.exact.monthly_usd) + '/month' },
      { label: 'Arithmetic', cell: (n) => h('span', { class: 'muted small' }, n.formula) },
    ],
    sizing.nodes,
    { stack: true, caption: 'The nodes that hold it (list prices, before the quote)' }
  );
}

function answerOf(q) {
  if (!q.answer) return h('span', { class: 'muted' }, q.status === 'withdrawn' ? 'withdrawn' : 'waiting for the operators');
  return [
    q.answer.price ? h('strong', { class: 'quote-price' }, q.answer.price) : null,
    q.answer.terms ? h('div', { class: 'small quote-terms' }, q.answer.terms) : null,
    h('div', { class: 'muted small' }, timestamp(q.answer.answered_at)),
  ];
}

async function withdraw(q, button) {
  setBusy(button, true);
  try {
    await api('POST', `/v1/quote-requests/${q.id}/withdraw`);
    await loadQuoteRequests();
  } catch (e) {
    replace($('#quote-requests'), errorBox('The request could not be withdrawn: ' + e.message));
  }
}

export async function loadQuoteRequests() {
  const slot = $('#quote-requests');
  if (!slot) return;
  try {
    const data = await api('GET', '/v1/quote-requests?limit=50');
    if (!data.quote_requests.length) {
      return replace(slot, empty('No quote requests. A job larger than one 8-card node can be sent from the calculator or the guide.'));
    }
    replace(
      slot,
      table(
        [
          { label: 'Request', th: true, cell: (q) => [`#${integer(q.id)} `, statusBadge(q), q.username ? h('div', { class: 'muted small' }, q.username) : null] },
          { label: 'Job', cell: (q) => [q.summary, q.contact ? h('div', { class: 'muted small' }, 'contact: ' + q.contact) : null] },
          { label: 'Sent', cls: 'nowrap', cell: (q) => timestamp(q.created_at) },
          { label: 'Answer', cell: answerOf },
          {
            label: '',
            cell: (q) =>
              q.status === 'open' && !q.username
                ? h('button', { type: 'button', class: 'btn btn-small btn-secondary', 'aria-label': `Withdraw quote request ${q.id}`, onclick: (e) => withdraw(q, e.currentTarget) }, 'Withdraw')
                : null,
          },
        ],
        data.quote_requests,
        { stack: true, rowClass: (q) => 'quote-row', caption: null }
      )
    );
  } catch (e) {
    replace(slot, errorBox('Quote requests could not be loaded: ' + e.message));
  }
}
