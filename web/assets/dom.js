// Small DOM helpers. Text from the API is only ever inserted as text nodes (never as HTML), so a
// model name or a memo cannot inject markup.
import { errorSentence } from './errors.js';

// h('td', {class: 'num'}, '1.00') -> <td class="num">1.00</td>. Attributes: class, text, on<event>,
// dataset {..}, aria-*/other attributes as strings; booleans set/omit the attribute.
export function h(tag, attrs, ...children) {
  const el = tag.startsWith('svg:')
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') el.setAttribute('class', value);
      else if (key === 'text') el.textContent = value;
      else if (key === 'dataset') Object.assign(el.dataset, value);
      else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
      else if (value === true) el.setAttribute(key, '');
      else el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}

export function $$(selector, root = document) {
  return Array.from(root.querySelectorAll(selector));
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

export function loading(text = 'Loading…') {
  return h('div', { class: 'loading', role: 'status' }, text);
}

export function empty(text) {
  return h('div', { class: 'empty' }, text);
}

export function errorBox(message) {
  return h('div', { class: 'alert alert-error', role: 'alert' }, message);
}

// A table from column specs: [{label, num?: bool, cell: row => node|string, th?: bool, cls?}].
// `stack`: on a phone each row becomes a small card of "label: value" lines (app.css .stack).
export function table(columns, rows, { caption, rowClass, stack } = {}) {
  const thead = h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col', class: c.num ? 'num' : null }, c.label))));
  const tbody = h(
    'tbody',
    null,
    rows.map((row) =>
      h(
        'tr',
        { class: rowClass ? rowClass(row) : null },
        columns.map((c) => {
          // A cell of several parts (a label and a note under it) is kept in one box, so that the
          // phone layout (label left, value right) keeps the parts together.
          const content = c.cell(row);
          return h(
            c.th ? 'th' : 'td',
            { class: c.num ? 'num' : c.cls || null, scope: c.th ? 'row' : null, 'data-label': c.label || null },
            Array.isArray(content) ? h('span', { class: 'cell' }, content) : content
          );
        })
      )
    )
  );
  return h('div', { class: 'table-wrap' + (stack ? ' stack' : '') }, h('table', null, caption ? h('caption', null, caption) : null, thead, tbody));
}

// A few API checks name the field in their message only ("min_gpus must be between 1 and ...",
// "field 'amount' must be ..."): the field named first in the message, when the form has it.
function fieldOfMessage(form, message) {
  const m = /^([a-z][a-z0-9_]*) /.exec(message || '') || /\bfield '([a-z][a-z0-9_]*)'/.exec(message || '');
  if (!m) return null;
  return form.querySelector(`[name="${CSS.escape(m[1])}"]:not([type="hidden"])`) ? m[1] : null;
}

// Shows an API error next to the field it names (inputs carry name="<api field>"), or in the
// form's alert when it names none. Returns true when a field took it.
export function showFormError(form, error) {
  clearFormErrors(form);
  const name = error ? error.field || fieldOfMessage(form, error.message) : null;
  const field = name ? form.querySelector(`[name="${CSS.escape(name)}"]`) : null;
  if (field) {
    field.setAttribute('aria-invalid', 'true');
    const slot = form.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
    if (slot) slot.textContent = errorSentence(error, form);
    field.focus();
    return true;
  }
  const alert = form.querySelector('.form-alert');
  if (alert) {
    alert.textContent = error && error.message ? errorSentence(error, form) : String(error);
    alert.className = 'form-alert alert alert-error';
    alert.setAttribute('role', 'alert');
  }
  return false;
}

export function clearFormErrors(form) {
  for (const el of form.querySelectorAll('[aria-invalid="true"]')) el.removeAttribute('aria-invalid');
  for (const el of form.querySelectorAll('[data-error-for]')) el.textContent = '';
  const alert = form.querySelector('.form-alert');
  if (alert) {
    alert.textContent = '';
    alert.className = 'form-alert';
  }
}

// One figure of a summary row: a small label over a large value.
// A command to paste into a terminal (an SSH line) with a Copy button; `label` names it for screen
// readers ("the SSH command of lease #7").
export function copyableCommand(text, label) {
  const code = h('code', { class: 'connection-line' }, text);
  const copy = h('button', {
    type: 'button',
    class: 'btn btn-small btn-secondary',
    'aria-label': `Copy ${label}`,
    onclick: async (e) => {
      const button = e.currentTarget;  // null once the event is over, after the await
      // The accessible name keeps the visible word first (axe: label-content-name-mismatch).
      const say = (word) => {
        button.textContent = word;
        button.setAttribute('aria-label', `${word}: ${label}`);
      };
      try {
        await navigator.clipboard.writeText(text);
        say('Copied');
      } catch {
        say('Select and copy');
      }
    },
  }, 'Copy');
  return h('span', { class: 'connection' }, code, ' ', copy);
}

export function stat(label, value, cls) {
  return h('div', { class: 'stat' }, h('div', { class: 'label' }, label), h('div', { class: 'value ' + (cls || '') }, value));
}

export function setBusy(button, busy) {
  if (!button) return;
  button.disabled = busy;
  if (busy) button.setAttribute('aria-busy', 'true');
  else button.removeAttribute('aria-busy');
}
