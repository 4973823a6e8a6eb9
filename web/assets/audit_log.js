// The account's audit log (GET /v1/audit-log): sign-ins, keys, SSH keys, the webhook, roles,
// payouts and admins' actions, newest first, a page at a time by cursor ("Older events" asks for
// the events before the last one shown). Every figure is the server's.
import { api } from './api.js';
import { h, $, replace, table, errorBox, empty } from './dom.js';
import { timestamp } from './format.js';

const kPageSize = 20;
let cursor = null;  // next_cursor of the last page shown; null: no more

function detailText(detail) {
  return Object.entries(detail || {})
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : v}`)
    .join('; ');
}

function eventsTable(events) {
  return table(
    [
      { label: 'When', cls: 'nowrap', cell: (e) => timestamp(e.at) },
      { label: 'Event', th: true, cell: (e) => e.kind.replaceAll('_', ' ') },
      { label: 'By', cell: (e) => e.actor },
      { label: 'From', cell: (e) => e.remote_address || '—' },
      { label: 'Client', cell: (e) => h('span', { class: 'muted', title: e.user_agent }, (e.user_agent || '—').slice(0, 40)) },
      { label: 'Detail', cell: (e) => detailText(e.detail) || '—' },
    ],
    events,
    { stack: true }
  );
}

// first: the newest page again (after sign-in, a refresh); else the page after the last one.
export async function loadAuditLog(first = true) {
  const slot = $('#audit-log-list');
  const more = $('#more-audit');
  let path = `/v1/audit-log?limit=${kPageSize}`;
  if (!first && cursor) path += `&before=${encodeURIComponent(cursor)}`;
  try {
    const data = await api('GET', path);
    cursor = data.next_cursor;
    more.hidden = !cursor;
    if (first) {
      if (!data.events.length) return replace(slot, empty('No events yet.'));
      replace(slot, eventsTable(data.events));
    } else {
      const body = slot.querySelector('tbody');
      const rows = eventsTable(data.events).querySelectorAll('tbody tr');
      for (const row of rows) body.append(row);
    }
  } catch (e) {
    replace(slot, errorBox('The audit log could not be loaded: ' + e.message));
  }
}

export function initAuditLog() {
  $('#more-audit').addEventListener('click', () => loadAuditLog(false));
}
